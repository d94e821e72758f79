"""A rank waiting in one call past COLLOPS_STALL_REPORT says once what it waits for and who
has not arrived; the call then completes. The threshold and COLLOPS_TIMEOUT are validated."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import collops
from collops import SettingError, config
from collops.transport.stall import StallWatch, arrivals
from collops.transport.tags import CALL_BITS
from tests.support.leaks import collops_segments, left_behind, still_running, tagged

SCRIPT = Path(__file__).parent / "scripts" / "late_rank.py"


def _reports(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("collops: stall:")]


def _run_late_rank(**env: str) -> subprocess.CompletedProcess[str]:
    before, job = collops_segments(), tagged({**os.environ, "LATE_SECONDS": "2", **env})
    proc = subprocess.run([sys.executable, "-m", "collops", "run", "-n", "2", "--timeout", "50",
                           str(SCRIPT)], capture_output=True, text=True, timeout=60,
                          env=job)
    assert not left_behind(before), "a shared-memory segment was left behind"
    assert not still_running(str(SCRIPT), job)
    return proc


@pytest.mark.timeout(70)
@pytest.mark.parametrize("algorithm", ["", "ring"], ids=["default", "ring"])
def test_a_late_rank_is_reported_once_over_shm_and_the_call_completes(algorithm):
    proc = _run_late_rank(COLLOPS_STALL_REPORT="0.5", COLLOPS_ALLREDUCE_ALGORITHM=algorithm)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the script checks the result against numpy on every rank
    assert "rank 0 ok" in proc.stdout and "rank 1 ok" in proc.stdout
    # call #0 may be reported too when a loaded machine starts one rank 0.5 s after the other
    reports = [r for r in _reports(proc.stderr) if "] #1," in r]
    assert len(reports) == 1, proc.stderr
    (line,) = reports
    assert line.startswith("collops: stall: rank 0 has waited")
    assert "allreduce[" in line and " #1" in line
    if algorithm:
        assert f"allreduce[{algorithm}]" in line
    assert "arrived at this call: ranks [0]; not arrived: ranks [1]" in line


@pytest.mark.timeout(70)
def test_no_report_when_disabled():
    proc = _run_late_rank(COLLOPS_STALL_REPORT="off", LATE_SECONDS="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not _reports(proc.stderr)


def _late_rank(comm):
    x = np.arange(8.0) + comm.rank
    comm.allreduce(x)
    if comm.rank == 1:
        time.sleep(1.5)
    return comm.allreduce(x)


@pytest.mark.timeout(60)
def test_a_late_thread_is_reported_once(monkeypatch, capfd):
    monkeypatch.setenv("COLLOPS_STALL_REPORT", "0.5")
    config.reload_settings()
    try:
        results = collops.spawn(_late_rank, 2, timeout=30)
    finally:
        monkeypatch.undo()
        config.reload_settings()
    expected = np.arange(8.0) * 2 + 1
    for got in results:
        np.testing.assert_array_equal(got, expected)
    reports = _reports(capfd.readouterr().err)
    assert len(reports) == 1, reports
    assert reports[0].startswith("collops: stall: rank 0 has waited")
    assert "allreduce[" in reports[0] and " #1" in reports[0]
    assert "not arrived: ranks [1]" in reports[0]


def test_the_watch_reports_once_per_call():
    written: list[str] = []
    watch = StallWatch(written.append)
    assert not watch.waiting((0, 1), 0.05, lambda s: f"first {s:.2f}")
    time.sleep(0.06)
    assert watch.waiting((0, 1), 0.05, lambda s: "first")
    time.sleep(0.06)
    assert not watch.waiting((0, 1), 0.05, lambda s: "again")  # once per call
    assert not watch.waiting((0, 2), 0.05, lambda s: "next")  # a new call starts afresh
    time.sleep(0.06)
    assert watch.waiting((0, 2), 0.05, lambda s: "next")
    assert not watch.waiting((0, 3), None, lambda s: "off")
    assert written == ["first", "next"]


def test_arrivals_compare_call_numbers_modulo_the_tag_bits():
    assert arrivals([2, 1, 5], 1) == ([0, 2], [1])
    wrapped = 1 << CALL_BITS
    # a counter past the wrap of the tags' call bits has arrived at the last numbers before it
    assert arrivals([wrapped + 1, wrapped - 1], wrapped - 1) == ([0], [1])


@pytest.mark.parametrize("value, expected", [("", 60.0), ("2.5", 2.5), ("0", None),
                                             ("off", None), ("OFF", None)])
def test_the_stall_threshold_setting(value, expected):
    assert config.Settings.from_env({"COLLOPS_STALL_REPORT": value}).stall_report == expected


@pytest.mark.parametrize("name", ["COLLOPS_STALL_REPORT", "COLLOPS_TIMEOUT"])
@pytest.mark.parametrize("value", ["x", "-1", "nan", "inf"])
def test_a_bad_duration_names_the_variable(name, value):
    with pytest.raises(SettingError, match=name):
        config.Settings.from_env({name: value})


def test_a_zero_timeout_is_refused():
    with pytest.raises(SettingError, match="COLLOPS_TIMEOUT='0'"):
        config.Settings.from_env({"COLLOPS_TIMEOUT": "0"})
    assert config.Settings.from_env({"COLLOPS_TIMEOUT": "2"}).timeout == 2.0
