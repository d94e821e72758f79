"""The schedule builder: rounds, scratch, composition with extend, message numbering, columns."""

from __future__ import annotations

import numpy as np
import pytest

from collops.schedule import (
    RECV,
    SEND,
    TMP,
    Buffer,
    Schedule,
    ScheduleBuilder,
    StepKind,
    run_reference,
    validate,
)
from collops.schedule.table import COLUMNS, FLAG_REVERSE


def edges(s: Schedule) -> set[tuple[int, int]]:
    """The dependency edges of a schedule as a set of (from, to)."""
    return set(zip(s.dep_from.tolist(), s.dep_to.tolist(), strict=True))


# -- rounds ----------------------------------------------------------------------------------
def test_round_steps_wait_for_every_step_of_the_previous_round():
    b = ScheduleBuilder(0, 4, send=3, recv=3)
    with b.round() as first:
        b.send(1, SEND(0, 1))
        b.send(2, SEND(1, 1))
    with b.round() as second:
        b.recv(1, RECV(0, 1))
        b.recv(2, RECV(1, 1))
    assert first == [0, 1] and second == [2, 3]
    assert edges(b.build()) == {(0, 2), (1, 2), (0, 3), (1, 3)}
    assert b.previous_round == [2, 3]


def test_steps_of_one_round_are_independent_and_extra_deps_are_kept():
    b = ScheduleBuilder(0, 3, send=2, recv=2)
    early = b.copy(RECV(0, 1), SEND(0, 1))
    with b.round():
        b.send(1, SEND(1, 1))
        b.send(2, RECV(0, 1), [early])
    assert edges(b.build()) == {(0, 2)}


def test_steps_outside_rounds_get_no_round_dependencies():
    b = ScheduleBuilder(0, 2, send=2, recv=2)
    with b.round():
        b.send(1, SEND(0, 1))
    b.copy(RECV(1, 1), SEND(1, 1))
    with b.round():
        b.recv(1, RECV(0, 1))
    assert edges(b.build()) == {(0, 2)}


def test_an_empty_round_keeps_the_previous_one():
    b = ScheduleBuilder(0, 2, send=1, recv=1)
    with b.round():
        b.send(1, SEND(0, 1))
    with b.round():
        pass
    with b.round():
        b.recv(1, RECV(0, 1))
    assert edges(b.build()) == {(0, 1)}


def test_rounds_do_not_nest():
    b = ScheduleBuilder(0, 1)
    with b.round(), pytest.raises(RuntimeError, match="nest"):
        with b.round():
            pass


# -- scratch ---------------------------------------------------------------------------------
def test_tmp_reserves_consecutive_scratch():
    b = ScheduleBuilder(0, 1, send=4, recv=4, tmp=3)
    first, second = b.tmp(5), b.tmp(2)
    assert first == TMP(3, 5) and second == TMP(8, 2)
    assert b.build().tmp_count == 10
    assert b.build().buffer_counts == (4, 4, 10)


def test_mismatched_local_counts_are_refused():
    b = ScheduleBuilder(0, 1, send=4, recv=4)
    with pytest.raises(ValueError, match="copy of 3 elements into a region of 2"):
        b.copy(RECV(0, 2), SEND(0, 3))
    with pytest.raises(ValueError, match="reduce of 3 elements"):
        b.reduce(RECV(0, 2), SEND(0, 3))


def test_reduce_reverse_sets_the_flag():
    b = ScheduleBuilder(0, 1, send=1, recv=1)
    b.reduce(RECV(0, 1), SEND(0, 1))
    b.reduce(RECV(0, 1), SEND(0, 1), [0], reverse=True)
    assert b.build().flags.tolist() == [0, FLAG_REVERSE]


# -- extend ----------------------------------------------------------------------------------
def part_to_append() -> Schedule:
    """Copy SEND→RECV (a no-op once SEND maps onto RECV), then send RECV, staged in TMP."""
    b = ScheduleBuilder(0, 2, send=2, recv=2)
    copied = b.copy(RECV(0, 2), SEND(0, 2))
    staged = b.tmp(2)
    moved = b.copy(staged, RECV(0, 2), [copied])
    b.send(1, staged, [moved])
    return b.build()


def test_extend_remaps_buffers_places_tmp_after_and_drops_noop_copies():
    b = ScheduleBuilder(0, 2, send=2, recv=2)
    own = b.tmp(3)
    first = b.copy(RECV(0, 2), SEND(0, 2))
    exits = b.extend(part_to_append(), after=[first], remap={Buffer.SEND: (int(Buffer.RECV), 0)})
    s = b.build()
    assert own == TMP(0, 3)
    assert s.tmp_count == 5
    assert len(s) == 3  # the SEND→RECV copy became RECV→RECV and was dropped
    copy, send = list(s.steps())[1:]
    assert (copy["kind"], copy["src_buf"], copy["dst_buf"], copy["dst_off"]) == (
        StepKind.COPY, Buffer.RECV, Buffer.TMP, 3)
    assert (send["kind"], send["src_buf"], send["src_off"]) == (StepKind.SEND, Buffer.TMP, 3)
    # the copy inherits the dropped copy's place: it waits for `after`
    assert edges(s) == {(0, 1), (1, 2)}
    assert exits == [2]


def test_extend_default_mapping_keeps_send_and_recv():
    appended = part_to_append()
    b = ScheduleBuilder(0, 2, send=2, recv=2)
    exits = b.extend(appended)
    s = b.build()
    for name in COLUMNS:
        np.testing.assert_array_equal(getattr(s, name), getattr(appended, name))
    assert edges(s) == edges(appended)
    assert exits == [2]


def test_extend_with_remap_to_an_offset():
    appended = part_to_append()
    b = ScheduleBuilder(0, 2, send=2, recv=6)
    b.extend(appended, remap={Buffer.SEND: (int(Buffer.SEND), 0),
                              Buffer.RECV: (int(Buffer.RECV), 4)})
    s = b.build()
    assert s.dst_off[0] == 4 and s.dst_buf[0] == Buffer.RECV
    assert s.src_off[1] == 4 and s.src_buf[1] == Buffer.RECV


def test_extend_composes_two_runnable_schedules():
    # rank 0 sends 2 elements to rank 1, then the same program again with roles swapped
    def hop(src: int, dst: int, rank: int) -> Schedule:
        b = ScheduleBuilder(rank, 2, send=2, recv=2)
        if rank == src:
            b.send(dst, SEND(0, 2))
        else:
            b.recv(src, RECV(0, 2))
        return b.build()

    schedules = []
    for rank in (0, 1):
        b = ScheduleBuilder(rank, 2, send=2, recv=2)
        exits = b.extend(hop(0, 1, rank))
        # the second hop forwards what rank 1 received (its RECV takes the place of SEND)
        b.extend(hop(1, 0, rank), after=exits, remap={Buffer.SEND: (int(Buffer.RECV), 0)})
        schedules.append(b.build())
    validate(schedules)
    out = run_reference(schedules, [np.array([5.0, 6.0]), None], np.float64)
    np.testing.assert_array_equal(out[0], [5.0, 6.0])


# -- message numbering -----------------------------------------------------------------------
def test_message_sequence_counts_per_peer_and_direction():
    b = ScheduleBuilder(0, 3, send=1, recv=5)
    b.send(1, SEND(0, 1))
    b.send(2, SEND(0, 1))
    b.recv(1, RECV(0, 1))
    b.send(1, SEND(0, 1))
    b.recv(1, RECV(1, 1))
    b.recv(2, RECV(2, 1))
    b.copy(RECV(3, 1), SEND(0, 1))
    b.send(1, SEND(0, 1))
    assert b.build().seq.tolist() == [0, 0, 0, 1, 1, 0, -1, 2]


# -- from_columns ----------------------------------------------------------------------------
def test_from_columns_equals_the_step_by_step_builder():
    b = ScheduleBuilder(1, 4, send=6, recv=6)
    got = b.recv(0, RECV(0, 3))
    scratch = b.tmp(3)
    copied = b.copy(scratch, SEND(3, 3))
    reduced = b.reduce(scratch, RECV(0, 3), [got, copied], reverse=True)
    b.send(2, scratch, [reduced])
    b.send(3, SEND(0, 2))
    built = b.build()

    columns = {
        "kind": [StepKind.RECV, StepKind.COPY, StepKind.REDUCE, StepKind.SEND, StepKind.SEND],
        "peer": [0, -1, -1, 2, 3],
        "src_buf": [0, Buffer.SEND, Buffer.RECV, Buffer.TMP, Buffer.SEND],
        "src_off": [0, 3, 0, 0, 0],
        "dst_buf": [Buffer.RECV, Buffer.TMP, Buffer.TMP, 0, 0],
        "dst_off": [0, 0, 0, 0, 0],
        "count": [3, 3, 3, 3, 2],
        "flags": [0, 0, FLAG_REVERSE, 0, 0],
    }
    vectorised = Schedule.from_columns(1, 4, (6, 6, 3), columns, ([0, 1, 2], [2, 2, 3]))
    for name in (*COLUMNS, "seq"):
        np.testing.assert_array_equal(getattr(vectorised, name), getattr(built, name),
                                      err_msg=name)
    assert edges(vectorised) == edges(built)
    assert vectorised.buffer_counts == built.buffer_counts
    assert vectorised.describe() == built.describe()
