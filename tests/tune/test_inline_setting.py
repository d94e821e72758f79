"""The point-to-point inline limit as a selection-table setting (``protocols.p2p.inline_max``):
the built-in table keeps the former constant, a tuning file's value reaches the transport (a
payload past it follows its envelope as a message of its own, one within it does not), bounded
by rank count, messages either side of it arrive whole, and a value out of bounds is an error
naming the setting."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import collops
from collops import config
from collops.algorithms import tuning
from collops.errors import ArgumentError
from collops.runtime import p2p_channel, p2p_inline
from collops.tune.jobs import setting_file


def in_force(monkeypatch, path: Path) -> None:
    monkeypatch.setenv("COLLOPS_TUNING_FILE", str(path))
    config.reload_settings()


def forget(monkeypatch) -> None:
    monkeypatch.delenv("COLLOPS_TUNING_FILE")
    config.reload_settings()


def test_the_builtin_table_keeps_the_former_constant() -> None:
    assert tuning.setting("p2p", "inline_max", None, None, 2).value == p2p_channel.INLINE_MAX
    assert p2p_channel.INLINE_MAX == 4096


def parts_sent(comm, sizes: list[int]) -> list[int]:
    """Per size, the transport messages rank 0's send of that many bytes made (an envelope,
    and a payload that did not go inline); rank 1 checks what arrived against numpy."""
    out = []
    for nbytes in sizes:
        x = np.arange(nbytes // 8, dtype=np.float64) + nbytes
        if comm.rank == 0:
            posted: list[int] = []
            isend = comm.transport.isend

            def counting(dest, tag, data, _isend=isend, _posted=posted):
                _posted.append(tag)
                return _isend(dest, tag, data)
            comm.transport.isend = counting
            try:
                comm.send(x, 1)
            finally:
                del comm.transport.isend
            out.append(len(posted))
        elif comm.rank == 1:
            got, _ = comm.recv(source=0)
            out.append(int(np.array_equal(got, x)))
    return out


@pytest.mark.timeout(60)
def test_a_tuning_files_inline_limit_reaches_the_transport(tmp_path: Path,
                                                           monkeypatch) -> None:
    path = tmp_path / "inline.toml"
    path.write_text(setting_file("inline_max", 1024, 2, component="p2p"))
    in_force(monkeypatch, path)
    sizes = [8, 1016, 1024, 1032, 4096, 8192]
    try:
        sent, arrived = collops.spawn(parts_sent, 2, sizes, transport="inproc", timeout=50)
        assert sent == [1, 1, 1, 2, 2, 2]
        assert arrived == [1] * len(sizes)
        # bounded to 2 ranks: a job of 3 keeps the built-in 4 KiB
        assert collops.spawn(parts_sent, 3, sizes, transport="inproc",
                             timeout=50)[0] == [1, 1, 1, 1, 1, 2]
    finally:
        forget(monkeypatch)
    assert collops.spawn(parts_sent, 2, sizes, transport="inproc",
                         timeout=50)[0] == [1, 1, 1, 1, 1, 2]


@pytest.mark.parametrize("value", [-1, (1 << 20) + 1, 1.5, True])
def test_an_inline_limit_out_of_bounds_is_an_error_naming_the_setting(
        tmp_path: Path, monkeypatch, value: object) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(setting_file("inline_max", value, 2, component="p2p"))
    in_force(monkeypatch, path)
    try:
        with pytest.raises(ArgumentError, match=r"protocols\.p2p\.inline_max=.* on rank 1: "
                                                r".*bad\.toml \[\[protocols\.p2p\.inline_max"
                                                r"\]\] #1: must be a whole number of bytes "
                                                r"from 0 to 1048576"):
            p2p_inline.inline_max(2, 1)
        assert p2p_inline.inline_max(3) == p2p_channel.INLINE_MAX
    finally:
        forget(monkeypatch)
