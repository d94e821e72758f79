"""The burst row of the point-to-point settings (`collops.tune.p2p_rows`): a burst delivers every
message whole, is timed per message, and lets a setting that only a burst shows (the cells
per ring) or the inline limit on threads become a rule, with a fake launcher."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest

import collops
from collops.algorithms import tuning
from collops.tune.jobs import BURST_MAX_BYTES, JOB_KNOBS, job_rows, time_rows, tune_job_settings
from collops.tune.measure import QUICK
from collops.tune.p2p_rows import BURST, row_call
from collops.tune.table import machine, write_table

ROWS = job_rows(["allreduce", "pingpong", "burst"], [8, 4096, 1 << 20], True)


def test_burst_rows_stop_where_the_rings_are_a_bulk_copys():
    assert ROWS == [("allreduce", 1 << 20), ("pingpong", 8), ("pingpong", 4096),
                    ("pingpong", 1 << 20), ("burst", 8), ("burst", 4096)]
    assert BURST_MAX_BYTES < 1 << 20


def burst_arrives(comm, nbytes: int) -> tuple[bool, list[tuple[str, float]]]:
    """One burst of ``nbytes`` messages from rank 0 checked on rank 1 against what was sent,
    then the burst row timed."""
    send = np.arange(nbytes // 8, dtype=np.float64) + comm.rank + 1
    recv = np.zeros(nbytes // 8)
    row_call(comm, "burst", send, recv)()
    whole = comm.rank != 1 or np.array_equal(recv, np.arange(nbytes // 8) + 1.0)
    return bool(whole), time_rows(comm, [("burst", nbytes), ("pingpong", nbytes)], QUICK)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("nprocs, transport", [(2, "inproc"), (3, "inproc"), (2, "shm")])
def test_a_burst_arrives_whole_and_is_timed_per_message(nprocs: int, transport: str) -> None:
    for whole, timed in collops.spawn(burst_arrives, nprocs, 1024, transport=transport,
                                      timeout=50):
        assert whole
        assert [alg for alg, _ in timed] == ["p2p", "p2p"]
        assert all(t > 0 for _, t in timed)


def settings(path: str) -> dict[str, object]:
    """The job-wide settings a candidate's tuning file sets."""
    if not path:
        return {}
    with open(path, "rb") as f:
        data = tomllib.load(f).get("protocols", {})
    return {f"{c}.{k}": v[0]["value"] for c, table in data.items() for k, v in table.items()}


def knobs(*names: str):
    return tuple(k for k in JOB_KNOBS if k.name in names)


def test_cells_per_ring_win_on_the_burst_rows_alone(tmp_path: Path) -> None:
    jobs: list[dict[str, object]] = []

    def launch(path, rows):
        s = settings(path)
        jobs.append(s)
        # a burst of BURST messages overflows 16 cells and fits in 256; a ping-pong has
        # one message in flight whatever the ring holds
        cells = s.get("shm.p2p_ring_cells", 64)
        return [("p2p", (3e-6 if c == "pingpong" else
                         2e-6 * (0.6 if cells >= BURST * 2 else 1.0 if cells >= BURST else 1.8)))
                for c, _ in rows]

    (rule,) = tune_job_settings(2, ROWS, QUICK, True, launch, knobs=knobs("p2p_ring_cells"))
    assert (rule.name, rule.value, rule.kept) == ("p2p_ring_cells", 256, True)
    assert rule.won_rows() == {("burst", 8), ("burst", 4096)}
    assert [round(r.ratio, 3) for r in rule.checked] == [1.0, 1.0, 1.0, 0.6, 0.6]
    path = tmp_path / "t.toml"
    path.write_text(write_table({2: {}}, machine("shm", [2], "collops tune"), "shm", {2: {}},
                                {2: [rule]}))
    assert tuning.setting("shm", "p2p_ring_cells", None, str(path), 2).value == 256


def test_on_threads_the_inline_limit_alone_is_tried_and_written_as_a_p2p_setting(
        tmp_path: Path) -> None:
    seen: list[dict[str, object]] = []

    def launch(path, rows):
        s = settings(path)
        seen.append(s)
        limit = s.get("p2p.inline_max", 4096)
        # a payload past the limit follows its envelope as a message of its own
        return [("p2p", (2e-6 if size <= limit else 5e-6)) for _, size in rows]

    rows = job_rows(["pingpong", "burst"], [8, 1024, 8192], True)
    (rule,) = tune_job_settings(2, rows, QUICK, True, launch, transport="inproc")
    assert {k for s in seen for k in s} == {"p2p.inline_max"}
    assert (rule.key, rule.value, rule.default, rule.kept) == ("p2p.inline_max", 16384, 4096,
                                                                True)
    assert rule.won_rows() == {("pingpong", 8192), ("burst", 8192)}
    path = tmp_path / "t.toml"
    path.write_text(write_table({2: {}}, machine("inproc", [2], "collops tune"), "inproc",
                                {2: {}}, {2: [rule]}))
    assert tuning.setting("p2p", "inline_max", None, str(path), 2).value == 16384
    assert tuning.setting("p2p", "inline_max", None, str(path), 3).value == 4096
    # on shm the limit is read only where the cells are off (the built-in table: on)
    assert not knobs("inline_max")[0].read_by(2, "shm")
