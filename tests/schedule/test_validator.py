"""The validator rejects each kind of defect with a clear message and accepts correct schedules.

Every defective program here is written by hand, with one defect in an otherwise correct
program, so each test shows that exactly that defect is caught.
"""

from __future__ import annotations

import numpy as np
import pytest

from collops.algorithms import get_algorithm, make_spec
from collops.errors import DeadlockError, MessageSizeMismatch, ScheduleError
from collops.schedule import (
    RECV,
    SEND,
    TMP,
    Schedule,
    ScheduleBuilder,
    StepKind,
    run_reference,
    validate,
)


def ping(n_sent: int = 2, n_received: int = 2) -> list[Schedule]:
    """Rank 0 sends its SEND area to rank 1, which receives it into RECV."""
    a = ScheduleBuilder(0, 2, send=2, recv=2)
    a.send(1, SEND(0, n_sent))
    b = ScheduleBuilder(1, 2, send=2, recv=2)
    b.recv(0, RECV(0, n_received))
    return [a.build(), b.build()]


def exchange(deadlock: bool) -> list[Schedule]:
    """Two ranks swap vectors; with ``deadlock`` each sends only after its receive."""
    out = []
    for rank in (0, 1):
        b = ScheduleBuilder(rank, 2, send=3, recv=3)
        got = b.recv(1 - rank, RECV(0, 3))
        b.send(1 - rank, SEND(0, 3), [got] if deadlock else [])
        out.append(b.build())
    return out


def idle(rank: int, size: int = 2, **buffers: int) -> Schedule:
    """A rank that does nothing."""
    return ScheduleBuilder(rank, size, **buffers).build()


# -- accepted ----------------------------------------------------------------------------
def test_accepts_ping():
    validate(ping())


def test_accepts_exchange_and_reference_runs_it():
    schedules = exchange(deadlock=False)
    validate(schedules)
    data = [np.arange(3.0), np.arange(3.0) + 10]
    out = run_reference(schedules, data, np.float64)
    np.testing.assert_array_equal(out[0], data[1])
    np.testing.assert_array_equal(out[1], data[0])


def test_accepts_ordered_local_steps_on_the_same_region():
    b = ScheduleBuilder(0, 1, send=2, recv=2, tmp=2)
    first = b.copy(RECV(0, 2), SEND(0, 2))
    second = b.copy(TMP(0, 2), RECV(0, 2), [first])
    b.reduce(RECV(0, 2), TMP(0, 2), [second])
    validate([b.build()])


@pytest.mark.parametrize("p", [1, 2, 5, 8])
def test_accepts_a_registered_algorithm(p):
    spec = make_spec("bcast", p, np.int32, count=4, root=p - 1)
    validate(get_algorithm("bcast", "binomial").build_all(spec))


def test_accepts_zero_count_steps_on_empty_buffers():
    a = ScheduleBuilder(0, 2)
    a.send(1, SEND(0, 0))
    b = ScheduleBuilder(1, 2)
    b.recv(0, RECV(0, 0))
    validate([a.build(), b.build()])


# -- rejected ----------------------------------------------------------------------------
def test_rejects_send_without_receive():
    a = ScheduleBuilder(0, 2, send=2)
    a.send(1, SEND(0, 2))
    with pytest.raises(ScheduleError, match=r"rank 0: send #0 to 1 is never received"):
        validate([a.build(), idle(1)])


def test_rejects_receive_without_send():
    b = ScheduleBuilder(1, 2, recv=2)
    b.recv(0, RECV(0, 2))
    with pytest.raises(ScheduleError, match=r"rank 1 step 0: receive #0 from 0 has no send"):
        validate([idle(0), b.build()])


def test_rejects_size_mismatch():
    with pytest.raises(ScheduleError, match=r"receives 1 elements from 0 .* but 2 are sent"):
        validate(ping(n_sent=2, n_received=1))


def test_rejects_out_of_bounds_region():
    a = ScheduleBuilder(0, 2, send=2)
    a.send(1, SEND(0, 2))
    b = ScheduleBuilder(1, 2, recv=3)
    b.recv(0, RECV(2, 2))
    with pytest.raises(ScheduleError, match=r"rank 1 step 0 writes RECV\[2:4\] outside its 3"):
        validate([a.build(), b.build()])


def test_rejects_read_out_of_bounds():
    a = ScheduleBuilder(0, 1, send=2, recv=4)
    a.copy(RECV(0, 4), SEND(0, 4))
    with pytest.raises(ScheduleError, match=r"reads SEND\[0:4\] outside its 2 elements"):
        validate([a.build()])


def test_rejects_write_to_send_area():
    a = ScheduleBuilder(0, 1, send=2, recv=2)
    a.copy(SEND(0, 2), RECV(0, 2))
    with pytest.raises(ScheduleError, match="writes the caller's SEND area"):
        validate([a.build()])


def test_rejects_concurrent_overlapping_writes():
    a = ScheduleBuilder(0, 2, send=4)
    a.send(1, SEND(0, 2))
    a.send(1, SEND(2, 2))
    b = ScheduleBuilder(1, 2, recv=3)
    b.recv(0, RECV(0, 2))
    b.recv(0, RECV(1, 2))  # overlaps the first receive at element 1, no order between them
    with pytest.raises(ScheduleError, match=r"steps 0 and 1 touch overlapping elements of RECV"):
        validate([a.build(), b.build()])


def test_rejects_read_write_race():
    a = ScheduleBuilder(0, 2, send=2, recv=2)
    a.copy(RECV(0, 2), SEND(0, 2))
    a.send(1, RECV(0, 2))  # reads what the copy writes, without waiting for it
    b = ScheduleBuilder(1, 2, recv=2)
    b.recv(0, RECV(0, 2))
    with pytest.raises(ScheduleError, match=r"rank 0: steps 0 and 1 .*concurrently \(one writes\)"):
        validate([a.build(), b.build()])


def test_ordering_removes_the_race():
    a = ScheduleBuilder(0, 2, send=2, recv=2)
    copied = a.copy(RECV(0, 2), SEND(0, 2))
    a.send(1, RECV(0, 2), [copied])
    b = ScheduleBuilder(1, 2, recv=2)
    b.recv(0, RECV(0, 2))
    validate([a.build(), b.build()])


def test_rejects_overlapping_source_and_destination():
    a = ScheduleBuilder(0, 1, recv=4)
    a.copy(RECV(1, 3), RECV(0, 3))
    with pytest.raises(ScheduleError, match="source and destination overlap"):
        validate([a.build()])


def test_rejects_local_dependency_cycle():
    columns = {"kind": [StepKind.COPY, StepKind.COPY], "src_buf": [0, 0], "dst_buf": [1, 1],
               "src_off": [0, 0], "dst_off": [0, 0], "count": [1, 1]}
    cyclic = Schedule.from_columns(0, 1, (1, 1, 0), columns, ([0, 1], [1, 0]))
    with pytest.raises(ScheduleError, match=r"rank 0: dependency cycle through steps \[0, 1\]"):
        validate([cyclic])


def test_rejects_cross_rank_deadlock():
    with pytest.raises(DeadlockError, match="can deadlock: a cycle of waits through rank"):
        validate(exchange(deadlock=True))


def test_rejects_deadlock_through_message_order():
    # rank 0 sends message #0 only after receiving; rank 1 receives #0 before sending
    a = ScheduleBuilder(0, 2, send=1, recv=1)
    got = a.recv(1, RECV(0, 1))
    a.send(1, SEND(0, 1), [got])
    b = ScheduleBuilder(1, 2, send=1, recv=1)
    first = b.recv(0, RECV(0, 1))
    b.send(0, SEND(0, 1), [first])
    with pytest.raises(DeadlockError):
        validate([a.build(), b.build()])


@pytest.mark.parametrize("peer", [0, 2, -1])
def test_rejects_bad_peer(peer):
    a = ScheduleBuilder(0, 2, send=1)
    a.send(peer, SEND(0, 1))
    with pytest.raises(ScheduleError, match=rf"peer {peer} is not another rank of 2"):
        validate([a.build(), idle(1)])


def test_rejects_dependency_on_missing_step():
    columns = {"kind": [StepKind.COPY], "src_buf": [0], "dst_buf": [1], "count": [1]}
    broken = Schedule.from_columns(0, 1, (1, 1, 0), columns, ([3], [0]))
    with pytest.raises(ScheduleError, match=r"dependency 3 -> 0 is invalid"):
        validate([broken])


def test_rejects_schedules_in_the_wrong_order():
    schedules = ping()
    with pytest.raises(ScheduleError, match="schedule 0 says rank 1 of 2, expected 0 of 2"):
        validate(schedules[::-1])


# -- the reference executor ------------------------------------------------------------------
def test_reference_raises_deadlock_on_crossed_receives():
    with pytest.raises(DeadlockError, match="recv from"):
        run_reference(exchange(deadlock=True), [np.zeros(3), np.zeros(3)], np.float64)


def test_reference_raises_deadlock_on_a_receive_nobody_sends():
    b = ScheduleBuilder(1, 2, recv=1)
    b.recv(0, RECV(0, 1))
    with pytest.raises(DeadlockError, match="rank 1 step 0 recv from 0"):
        run_reference([idle(0), b.build()], [None, None], np.float64)


def test_reference_raises_on_unreceived_message():
    a = ScheduleBuilder(0, 2, send=1)
    a.send(1, SEND(0, 1))
    with pytest.raises(DeadlockError, match="never received"):
        run_reference([a.build(), idle(1)], [np.zeros(1), None], np.float64)


def test_reference_raises_on_size_mismatch():
    with pytest.raises(MessageSizeMismatch, match="expected 1 elements from 0, got 2"):
        run_reference(ping(2, 1), [np.zeros(2), None], np.float64)
