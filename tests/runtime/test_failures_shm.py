"""Failures over shared memory are errors with diagnostics, never hangs, and leak nothing."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import collops
from collops import RankFailed
from tests.support.leaks import collops_segments, left_behind, still_running, tagged
from tests.support.output import json_objects

SCRIPTS = Path(__file__).parent / "scripts"


def _run(script, n, timeout=60):
    before, env = collops_segments(), tagged()
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "collops", "run", "-n", str(n), "--timeout",
                           str(timeout - 10), str(SCRIPTS / script)],
                          capture_output=True, text=True, timeout=timeout, env=env)
    elapsed = time.monotonic() - start
    assert not left_behind(before), "a shared-memory segment was left behind"
    leftover = still_running(str(SCRIPTS / script), env)
    assert not leftover, f"processes left: {leftover}"
    return proc, elapsed


@pytest.mark.timeout(60)
def test_a_killed_rank_is_named_by_peer_failed_within_two_seconds():
    proc, _ = _run("dies_mid_collective.py", 3)
    reports = json_objects(proc.stdout)
    survivors = {r["rank"]: r for r in reports}
    assert set(survivors) == {0, 2}, proc.stdout + proc.stderr
    for report in survivors.values():
        assert report["failed"] == 1
        assert report["seconds"] < 2.0
    assert proc.returncode == 128 + 9, "exit status is the first failing rank's (SIGKILL)"


@pytest.mark.timeout(60)
def test_an_exception_in_one_rank_ends_the_job_with_its_traceback():
    proc, elapsed = _run("raises.py", 4)
    assert proc.returncode == 1
    assert "rank two gives up" in proc.stderr and "Traceback" in proc.stderr
    # the failure ended the job, not the ranks' 50 s timeout (a loaded machine, or a second
    # test worker, may take 20 s to start and stop four ranks)
    assert elapsed < 40, elapsed


def _mismatch(comm):
    if comm.rank == 0:
        return comm.allreduce(np.ones(4), timeout=20)
    return comm.bcast(np.ones(2), timeout=20)


@pytest.mark.timeout(60)
def test_mismatched_calls_raise_collective_mismatch_saying_what_each_called():
    before = collops_segments()
    with pytest.raises(RankFailed) as info:
        collops.spawn(_mismatch, 2, transport="shm", timeout=40)
    assert info.value.exc_type == "CollectiveMismatch"
    text = str(info.value)
    assert "allreduce" in text and "bcast" in text
    assert not left_behind(before)


def _silent_peer(comm):
    if comm.rank == 1:
        time.sleep(3)
        return None
    return comm.allreduce(np.ones(2), timeout=0.5, algorithm="recursive_doubling")


@pytest.mark.timeout(60)
def test_timeout_names_collective_algorithm_step_and_silent_ranks():
    with pytest.raises(RankFailed) as info:
        collops.spawn(_silent_peer, 2, transport="shm", timeout=40)
    assert info.value.rank == 0 and info.value.exc_type == "CollectiveTimeout"
    text = str(info.value)
    assert "allreduce[recursive_doubling]" in text and "not heard from ranks [1]" in text
    assert "step" in text
