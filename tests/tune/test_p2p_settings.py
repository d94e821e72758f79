"""Point-to-point settings of the shared-memory transport (``protocols.shm.p2p_cells``,
``p2p_cell_bytes``) tuned as job-wide settings over ping-pong rows: with a fake launcher a
cell size that makes a message inline wins and is written as a rule; a job reads the rule
bounded by its rank count and its messages arrive whole either side of the new cell's room."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import collops
from collops import config
from collops.algorithms import tuning
from collops.algorithms.tuning import load_tuning
from collops.errors import TransportError
from collops.shm import segment as seg
from collops.tune import across
from collops.tune.jobs import (
    JOB_KNOBS,
    JobKnob,
    job_rows,
    setting_file,
    time_rows,
    tune_job_settings,
)
from collops.tune.measure import QUICK
from collops.tune.table import machine, write_table
from tests.support.pingpong import exchange

#: the settings of the cells ``--quick`` tries
P2P_KNOBS = tuple(k for k in JOB_KNOBS if k.name in ("p2p_cells", "p2p_cell_bytes"))
ROWS = job_rows(["allreduce", "pingpong"], [8, 1024, 1 << 20], True)


def test_ping_pong_rows_are_timed_at_every_size_the_collectives_at_the_large_ones():
    assert ROWS == [("allreduce", 1 << 20), ("pingpong", 8), ("pingpong", 1024),
                    ("pingpong", 1 << 20)]
    assert {k.name for k in P2P_KNOBS} == {"p2p_cells", "p2p_cell_bytes"}
    assert all(k.quick for k in P2P_KNOBS)


def settings_of(path: str) -> dict[str, object]:
    """The file's job-wide shm settings (the built-in ones for those it does not set)."""
    found = {"p2p_cells": True, "p2p_cell_bytes": seg.P2P_CELL_BYTES}
    if path:
        with open(path, "rb") as f:
            rules = tomllib.load(f).get("protocols", {}).get("shm", {})
        found.update({name: r[0]["value"] for name, r in rules.items()})
    return found


def fake_launch(slower_without_cells: bool = True):
    """A job's ping-pong in µs: a 1 KiB message 40 % faster in 4 KiB cells (inline), every
    message 50 % slower without cells; the collectives' rows as they are, but 30 % slower in
    the jobs of 4 KiB cells (the machine's noise: cells carry no collective's message)."""
    jobs: list[tuple[dict[str, object], list[tuple[str, int]]]] = []

    def launch(path, rows):
        s = settings_of(path)
        jobs.append((s, list(rows)))
        out = []
        for collective, size in rows:
            us = 10.0 if size <= 1024 else 200.0
            if collective == "pingpong":
                if size == 1024 and s["p2p_cell_bytes"] == 4096 and s["p2p_cells"]:
                    us *= 0.6
                if not s["p2p_cells"] and slower_without_cells:
                    us *= 1.5
            elif s["p2p_cell_bytes"] == 4096:
                us *= 1.3
            out.append(("p2p" if collective == "pingpong" else "ring", us * 1e-6))
        return out
    return launch, jobs


def test_a_cell_size_that_puts_a_message_inline_becomes_a_rule_the_table_reads(
        tmp_path: Path) -> None:
    launch, jobs = fake_launch()
    # 5 ranks: beyond the built-in table's 4 KiB cells (up to 4 ranks), its cells are 1 KiB
    (rule,) = tune_job_settings(5, ROWS, QUICK, True, launch, knobs=P2P_KNOBS)
    assert (rule.name, rule.value, rule.default, rule.kept) == ("p2p_cell_bytes", 4096,
                                                                seg.P2P_CELL_BYTES, True)
    # passes of four jobs (the defaults, no cells, 256 and 4096 B cells), then every round
    # over the ping-pong rows alone (the allreduce row's noise does not count)
    assert len(jobs) == 4 * 2 + 2 * across.ROUNDS[True][1]
    assert all(rows == ROWS[1:] for _, rows in jobs[8:])
    assert [r.ratio for r in rule.checked] == pytest.approx([1.0, 0.6, 1.0])
    path = tmp_path / "t.toml"
    path.write_text(write_table({5: {}}, machine("shm", [5], "collops tune -n 5"), "shm",
                                {5: {}}, {5: [rule]}))
    load_tuning(str(path))
    assert tuning.setting("shm", "p2p_cell_bytes", None, str(path), 5).value == 4096
    assert tuning.setting("shm", "p2p_cell_bytes", None, str(path), 6).value == 1024
    evidence = tomllib.loads(path.read_text())["protocols"]["shm"]["p2p_cell_bytes"][0][
        "evidence"]
    assert evidence["collectives"] == ["pingpong"] * 3
    assert evidence["sizes"] == [8, 1024, 1 << 20]


def test_without_a_gain_no_point_to_point_rule():
    launch, _ = fake_launch()

    def no_gain(path, rows):
        got = launch(path, rows)
        return [(alg, 10e-6 if size <= 1024 else 200e-6)
                for (alg, _), (_, size) in zip(got, rows, strict=True)]
    assert tune_job_settings(2, ROWS, QUICK, True, no_gain, knobs=P2P_KNOBS) == []
    # a job of one rank has no ping-pong: its rows are the collectives' alone, and the
    # point-to-point settings alone have no row to change there (no job at all)
    launch, jobs = fake_launch()
    wide = JobKnob("single_copy_min", (524288,), quick=True)
    tune_job_settings(1, ROWS, QUICK, True, launch, knobs=P2P_KNOBS + (wide,))
    assert jobs and all(rows == [("allreduce", 1 << 20)] for _, rows in jobs)
    launch, jobs = fake_launch()
    assert tune_job_settings(1, ROWS, QUICK, True, launch, knobs=P2P_KNOBS) == [] and not jobs
    # with two ranks the point-to-point settings are timed on the point-to-point rows alone
    tune_job_settings(2, ROWS, QUICK, True, launch, knobs=P2P_KNOBS)
    assert jobs and all(rows == ROWS[1:] for _, rows in jobs)


def in_force(monkeypatch, path: Path) -> None:
    monkeypatch.setenv("COLLOPS_TUNING_FILE", str(path))
    config.reload_settings()


@pytest.mark.usefixtures("compiled_on")  # a test of the compiled route
@pytest.mark.timeout(120)
def test_a_job_lays_out_the_cells_the_file_says_and_messages_arrive_whole(
        tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "cells.toml"
    path.write_text(setting_file("p2p_cell_bytes", 256, 2))
    in_force(monkeypatch, path)

    def body(comm):
        room = comm.transport.point_to_point_cells().capacity
        errors = exchange(comm, [8, 1024, 3000, room - 64, room, 5000, 200000])
        return room, errors, time_rows(comm, [("pingpong", 1024)], QUICK)

    try:
        for room, errors, timed in collops.spawn(body, 2, transport="shm", timeout=100):
            assert room == 256 - 64 and errors == []
            assert timed[0][0] == "p2p" and timed[0][1] > 0
        # bounded to 2 ranks: a job of 3 lays out the built-in cells (4 KiB up to 4 ranks)
        rooms = collops.spawn(lambda comm: comm.transport.point_to_point_cells().capacity, 3,
                              transport="shm", timeout=100)
        builtin = tuning.setting("shm", "p2p_cell_bytes", None, None, 3).value
        assert builtin == 4096 and rooms == [builtin - 64] * 3
        path.write_text(setting_file("p2p_cells", False, 2))
        config.reload_settings()
        off = collops.spawn(lambda comm: comm.transport.protocol_settings()["shm.p2p_cells"][0],
                            2, transport="shm", timeout=100)
        assert off == [False, False]
    finally:
        monkeypatch.delenv("COLLOPS_TUNING_FILE")
        config.reload_settings()


@pytest.mark.parametrize("value", [100, 96 * 1024, True])
def test_a_cell_size_out_of_bounds_is_an_error_naming_the_setting(
        tmp_path: Path, monkeypatch, value) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(setting_file("p2p_cell_bytes", value, 2))
    in_force(monkeypatch, path)
    try:
        with pytest.raises(TransportError, match="shm.p2p_cell_bytes must be a positive "
                                                 "multiple of 64 bytes from 128 to 65536"):
            seg.Layout.for_ranks(2)
        assert seg.Layout.for_ranks(3).p2p_cell_bytes == tuning.setting(
            "shm", "p2p_cell_bytes", None, None, 3).value
    finally:
        monkeypatch.delenv("COLLOPS_TUNING_FILE")
        config.reload_settings()


def test_of_two_cell_settings_only_the_best_is_chosen_and_each_rule_is_judged_on_its_rows():
    knobs = P2P_KNOBS + (JobKnob("single_copy_min", (524288,), quick=True),)
    jobs: list[str] = []

    def launch(path, rows):
        s = settings_of(path)
        jobs.append(path)
        passes = len(jobs) <= 2 * 5  # five candidates, two passes
        out = []
        for collective, size in rows:
            us = 100.0
            if collective == "pingpong" and size == 1024:
                us *= 0.6 if s["p2p_cell_bytes"] == 4096 else 0.7 if not s["p2p_cells"] else 1
            if collective == "allreduce" and s.get("single_copy_min") == 524288:
                us *= 0.7 if passes else 1.5  # wins the passes, loses once re-timed
            out.append(("p2p", us * 1e-6))
        return out

    rules = tune_job_settings(5, ROWS, QUICK, True, launch, knobs=knobs)
    assert [(r.name, r.value, r.kept) for r in rules] == [
        ("single_copy_min", 524288, False), ("p2p_cell_bytes", 4096, True)]
    cells = rules[1]
    assert [(r.collective, r.size) for r in cells.checked] == ROWS[1:]
