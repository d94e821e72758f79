"""Messages and phases derived from schedules."""

from __future__ import annotations

import numpy as np
import pytest

from collops.errors import ScheduleError
from collops.schedule import RECV, SEND, ScheduleBuilder
from collops.sim.program import program_from_schedules, step_levels


def _chain(p: int) -> list:
    """Rank 0 sends to 1, which forwards to 2, …: phase k for hop k."""
    out = []
    for r in range(p):
        b = ScheduleBuilder(r, p, send=4, recv=4)
        got = [b.recv(r - 1, RECV(0, 4))] if r else []
        if r + 1 < p:
            b.send(r + 1, RECV(0, 4) if r else SEND(0, 4), got)
        out.append(b.build())
    return out


def test_forwarding_chain_has_one_phase_per_hop() -> None:
    prog = program_from_schedules(_chain(5), itemsize=8)
    order = np.argsort(prog.msg_src)
    np.testing.assert_array_equal(prog.msg_src[order], [0, 1, 2, 3])
    np.testing.assert_array_equal(prog.msg_dst[order], [1, 2, 3, 4])
    np.testing.assert_array_equal(prog.msg_phase[order], [0, 1, 2, 3])
    np.testing.assert_array_equal(prog.msg_bytes, 32)
    assert prog.num_phases == 4 and prog.total_bytes == 128


def test_chained_sends_keep_one_phase_and_their_order() -> None:
    p = 4
    out = []
    for r in range(p):
        b = ScheduleBuilder(r, p, send=p, recv=p)
        for j in range(p):
            if j != r:
                b.recv(j, RECV(j, 1))
        prev: list[int] = []
        for j in (3, 1, 2, 0):
            if j != r:
                prev = [b.send(j, SEND(j, 1), prev)]
        out.append(b.build())
    prog = program_from_schedules(out, itemsize=1)
    assert (prog.msg_phase == 0).all()
    rank0 = np.flatnonzero(prog.msg_src == 0)
    np.testing.assert_array_equal(prog.msg_dst[rank0[np.argsort(prog.msg_order[rank0])]],
                                  [3, 1, 2])


def test_levels_detect_cycles() -> None:
    with pytest.raises(ScheduleError):
        step_levels(3, np.array([0, 1, 2]), np.array([1, 2, 0]), np.zeros(0, np.int64),
                    np.zeros(0, np.int64))


def test_unmatched_messages_are_rejected() -> None:
    b0 = ScheduleBuilder(0, 2, send=1)
    b0.send(1, SEND(0, 1))
    with pytest.raises(ScheduleError):
        program_from_schedules([b0.build(), ScheduleBuilder(1, 2).build()], 1)
