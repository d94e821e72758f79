"""Job-wide settings (``protocols.shm.*``): a candidate value is timed in jobs of its own with
a fake launcher; a value wins only where it is faster in every pass and slower nowhere, and is
kept only where the alternating jobs of the verification uphold it; a job reads a rule bounded
by its rank count; `collops tune` writes and `--compare-default` re-times such rules."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

import collops
from collops import config
from collops.algorithms import tuning
from collops.algorithms.tuning import load_tuning
from collops.errors import TransportError
from collops.tune import across
from collops.tune.jobs import JobKnob, setting_file, tune_job_settings
from collops.tune.measure import QUICK
from collops.tune.table import machine, write_table

ROWS = [("allreduce", 65536), ("allreduce", 1048576)]
KNOBS = (JobKnob("single_copy_min", (524288, 8388608), quick=True),)
BUILT_IN = tuning.setting("shm", "single_copy_min").value


def fake_launch(world):
    """A launcher whose job times each row as ``world(value, row, job number)`` µs, the value
    being the file's ``single_copy_min`` (the built-in one without a file); the jobs started
    are recorded."""
    jobs: list[tuple[str, object]] = []

    def launch(path, rows):
        value = BUILT_IN
        if path:
            with open(path, "rb") as f:
                rules = tomllib.load(f).get("protocols", {}).get("shm", {})
            value = rules.get("single_copy_min", [{"value": BUILT_IN}])[0]["value"]
        jobs.append((path, value))
        return [("ring", world(value, row, len(jobs)) * 1e-6) for row in rows]
    return launch, jobs


def faster_from_512k(value, row, job):
    """512 KiB single copy makes the 1 MiB row 30 % faster; nothing else changes."""
    return 70.0 if value == 524288 and row[1] == 1048576 else 100.0


def test_a_value_faster_in_every_pass_and_in_the_check_becomes_a_rule(tmp_path: Path):
    launch, jobs = fake_launch(faster_from_512k)
    (rule,) = tune_job_settings(2, ROWS, QUICK, True, launch, knobs=KNOBS)
    assert (rule.name, rule.value, rule.default, rule.kept) == ("single_copy_min", 524288,
                                                                BUILT_IN, True)
    # two passes of three jobs (the defaults, two values), then the verification's rounds of
    # two: all of them, as the rule would be kept
    assert len(jobs) == 3 * 2 + across.ROUNDS[True][1] * 2
    assert [r.ratio for r in rule.checked] == pytest.approx([1.0, 0.7])
    path = tmp_path / "t.toml"
    path.write_text(write_table({2: {}}, machine("shm", [2], "collops tune -n 2"), "shm",
                                {2: {}}, {2: [rule]}))
    load_tuning(str(path))  # parses
    assert tuning.setting("shm", "single_copy_min", None, str(path), 2).value == 524288
    assert tuning.setting("shm", "single_copy_min", None, str(path), 4).value == BUILT_IN
    evidence = tomllib.loads(path.read_text())["protocols"]["shm"]["single_copy_min"][0][
        "evidence"]
    assert evidence["sizes"] == [65536, 1048576] and evidence["verified_ratio"] == [1.0, 0.7]


def test_a_value_that_wins_one_pass_only_or_slows_another_row_makes_no_rule():
    launch, _ = fake_launch(lambda v, row, job: 70.0 if v == 524288 and job <= 3 else 100.0)
    assert tune_job_settings(2, ROWS, QUICK, True, launch, knobs=KNOBS) == []
    launch, _ = fake_launch(lambda v, row, job: (70.0 if row[1] == 1048576 else 120.0)
                            if v == 524288 else 100.0)
    assert tune_job_settings(2, ROWS, QUICK, True, launch, knobs=KNOBS) == []


def test_a_value_the_alternating_jobs_do_not_uphold_is_dropped_and_named(tmp_path: Path):
    # the passes take six jobs; from then on the value is no faster
    launch, _ = fake_launch(lambda v, row, job: 70.0 if v == 524288 and job <= 6 and
                            row[1] == 1048576 else 100.0)
    (rule,) = tune_job_settings(2, ROWS, QUICK, True, launch, knobs=KNOBS)
    assert not rule.kept
    text = write_table({2: {}}, {}, "shm", {2: {}}, {2: [rule]})
    assert "[[protocols.shm" not in text
    assert "# dropped after verification: protocols.shm.single_copy_min = 524288, 2 ranks" \
        in text


def test_without_rows_at_job_sizes_no_job_is_started():
    launch, jobs = fake_launch(faster_from_512k)
    assert tune_job_settings(2, [], QUICK, True, launch, knobs=KNOBS) == []
    assert jobs == []


@pytest.mark.timeout(120)
def test_a_job_reads_the_job_wide_rule_bounded_by_its_rank_count(tmp_path: Path,
                                                                   monkeypatch) -> None:
    path = tmp_path / "wide.toml"
    path.write_text(setting_file("split_min", 3 << 20, 2))
    monkeypatch.setenv("COLLOPS_TUNING_FILE", str(path))
    config.reload_settings()
    try:
        def split_min(comm):
            return comm.transport.protocol_settings()["shm.split_min"][0]

        assert collops.spawn(split_min, 2, transport="shm", timeout=100) == [3 << 20] * 2
        built_in = tuning.setting("shm", "split_min").value
        assert collops.spawn(split_min, 3, transport="shm", timeout=100) == [built_in] * 3
    finally:
        monkeypatch.delenv("COLLOPS_TUNING_FILE")
        config.reload_settings()


def test_a_value_whose_job_cannot_start_is_dropped_and_the_others_decided():
    launch, _ = fake_launch(faster_from_512k)

    def refusing(path, rows):
        if path and "8388608" in Path(path).read_text():
            raise TransportError("shared memory for 2 ranks: too small")
        return launch(path, rows)

    (rule,) = tune_job_settings(2, ROWS, QUICK, True, refusing, knobs=KNOBS)
    assert (rule.value, rule.kept) == (524288, True)


@pytest.mark.timeout(120)
def test_a_job_laid_out_by_a_tuning_file_runs_the_collectives_right(tmp_path: Path,
                                                                     monkeypatch) -> None:
    path = tmp_path / "layout.toml"
    path.write_text(setting_file("direct_bytes", 32768, 2) + "\n"
                    + setting_file("stream_chunk_bytes", 65536, 2))
    monkeypatch.setenv("COLLOPS_TUNING_FILE", str(path))
    config.reload_settings()

    def body(comm):
        out = {"direct_bytes": comm.transport.direct_bytes, "errors": []}
        for count in (5000, 40000, 300000):  # float64: 40 KB, 320 KB, 2.4 MB a rank
            x = np.arange(count, dtype=np.float64) + comm.rank
            checks = {
                "allgather": (comm.allgather(x), np.concatenate(
                    [np.arange(count) + r for r in range(comm.size)])),
                "bcast": (comm.bcast(x), np.arange(count, dtype=np.float64)),
                "allreduce": (comm.allreduce(x), 2 * np.arange(count) + 1.0)}
            if count == 40000:  # fits the built-in slots, not these
                out["allgather_40000"] = str(comm.last_algorithm)
            out["errors"] += [f"{name} {count}" for name, (got, want) in checks.items()
                              if not np.array_equal(np.asarray(got).ravel(), want)]
        return out

    try:
        for got in collops.spawn(body, 2, transport="shm", timeout=100):
            assert got["direct_bytes"] == 32768 and got["errors"] == []
            assert got["allgather_40000"] != "shm_direct"
    finally:
        monkeypatch.delenv("COLLOPS_TUNING_FILE")
        config.reload_settings()


@pytest.mark.timeout(300)
def test_the_command_times_job_wide_settings_and_compare_default_re_times_them(
        tmp_path: Path) -> None:
    out = tmp_path / "t.toml"
    done = subprocess.run([sys.executable, "-m", "collops", "tune", "-n", "2", "--quick",
                           "--collectives", "allreduce,pingpong", "--sizes", "8,1M",
                           "--output", str(out)], capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    # --quick times the job-wide settings at the large sizes alone
    passes = [line for line in done.stderr.splitlines() if "job pass 1/2" in line]
    assert any("2 ranks, defaults: allreduce 1048576 B" in line for line in passes)
    assert not any("allreduce 8 B" in line for line in passes)
    assert "shm.single_copy_min" in done.stderr  # a candidate value, in a job of its own
    # the point-to-point rows at every size, with the cells' settings as candidates
    assert any("pingpong 8 B" in line and "pingpong 1048576 B" in line for line in passes)
    assert "shm.p2p_cell_bytes=1024" in done.stderr  # not the built-in 4 KiB at 2 ranks
    load_tuning(str(out))
    hand, rows = tmp_path / "hand.toml", tmp_path / "rows.json"
    hand.write_text(setting_file("split_min", 1 << 20, 2)
                    + 'evidence = { collectives = ["allreduce"], sizes = [65536] }\n')
    done = subprocess.run([sys.executable, "-m", "collops", "tune", "-n", "2",
                           "--compare-default", str(hand), "--rounds", "2", "--json",
                           str(rows)], capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = json.loads(rows.read_text())["rows"]
    assert (row["collective"], row["size"]) == ("allreduce", 65536)
    assert row["tuned_algorithm"].endswith("(job-wide settings)")
    assert len(row["tuned_us"]) == len(row["default_us"]) == 2
