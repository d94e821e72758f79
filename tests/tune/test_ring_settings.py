"""The point-to-point layout's remaining numbers as selection-table settings: cells per pair
ring (``protocols.shm.p2p_ring_cells``) and the pair ring's slot (``ring_slot_bytes``). A
tuning file's value reaches the job's transport (bounded by rank count), messages either side
of the new eager limit and more of them than the ring has cells arrive whole, and a value
out of bounds is an error naming the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

import collops
from collops import config
from collops.algorithms import tuning
from collops.errors import TransportError
from collops.shm import segment as seg
from collops.tune.jobs import JOB_KNOBS, setting_file
from tests.support.pingpong import exchange


def in_force(monkeypatch, path: Path) -> None:
    monkeypatch.setenv("COLLOPS_TUNING_FILE", str(path))
    config.reload_settings()


def test_the_builtin_table_keeps_the_former_constants() -> None:
    def builtin(name: str, ranks: int) -> int:
        return tuning.setting("shm", name, None, None, ranks).value
    assert [builtin("p2p_ring_cells", n) for n in (2, 4, 5, 16, 17, 64)] == [64, 64, 16, 16,
                                                                             4, 4]
    assert builtin("ring_slot_bytes", 2) == seg.DEFAULT_SLOT_BYTES == 8192
    assert seg.Layout.for_ranks(2).eager_limit == 8192 - seg.SLOT_HEADER
    tuned = {k.name: k for k in JOB_KNOBS}
    assert tuned["p2p_ring_cells"].point_to_point and not tuned["ring_slot_bytes"].quick


@pytest.mark.timeout(120)
def test_a_job_lays_out_the_ring_the_file_says_and_messages_arrive_whole(
        tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "ring.toml"
    path.write_text(setting_file("p2p_ring_cells", 4, 2) + "\n"
                    + setting_file("ring_slot_bytes", 1024, 2))
    in_force(monkeypatch, path)

    def body(comm):
        lay = comm.transport._layout
        limit = lay.eager_limit
        return (lay.p2p_cells, lay.slot_bytes, limit,
                exchange(comm, [8, limit - 8, limit, limit + 8, 3 * limit, 200000], 20))

    try:
        for cells, slot, limit, errors in collops.spawn(body, 2, transport="shm", timeout=100):
            assert (cells, slot, limit, errors) == (4, 1024, 1024 - seg.SLOT_HEADER, [])
        # bounded to 2 ranks: a job of 3 lays out the built-in ring
        got = collops.spawn(lambda comm: (comm.transport._layout.p2p_cells,
                                          comm.transport._layout.slot_bytes), 3,
                            transport="shm", timeout=100)
        assert got == [(64, 8192)] * 3
    finally:
        monkeypatch.delenv("COLLOPS_TUNING_FILE")
        config.reload_settings()


@pytest.mark.parametrize("name, value, message", [
    ("p2p_ring_cells", 1, "shm.p2p_ring_cells must be a whole number of cells from 2 to 4096"),
    ("p2p_ring_cells", 16.0, "shm.p2p_ring_cells must be a whole number of cells"),
    ("ring_slot_bytes", 100, "shm.ring_slot_bytes must be a positive multiple of 64 bytes "
                             "from 128 to 65536"),
    ("ring_slot_bytes", 1 << 17, "shm.ring_slot_bytes must be a positive multiple of 64"),
])
def test_a_ring_setting_out_of_bounds_is_an_error_naming_it(
        tmp_path: Path, monkeypatch, name: str, value: object, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(setting_file(name, value, 2))
    in_force(monkeypatch, path)
    try:
        with pytest.raises(TransportError, match=message):
            seg.Layout.for_ranks(2)
        assert seg.Layout.for_ranks(3).p2p_cells == 64
    finally:
        monkeypatch.delenv("COLLOPS_TUNING_FILE")
        config.reload_settings()
