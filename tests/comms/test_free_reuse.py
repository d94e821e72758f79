"""Communicators that come and go: ids reused after `free`, never a tag shared, the direct
areas handed on, on threads and ``shm`` (the MPI job: ``test_comms_mpi.py``).

Results are checked against numpy; the fast path is checked by the runner a repeated call is
bound to (`bound_calls`), never by a timing.
"""

from __future__ import annotations

import time

import pytest

import collops

from . import scenarios

TRANSPORTS = ["inproc", "shm"]


def _run(fn, nprocs, transport, *args, timeout=240):
    return collops.spawn(fn, nprocs, *args, transport=transport, timeout=timeout)


@pytest.mark.usefixtures("compiled_on")  # a test of the compiled route
@pytest.mark.timeout(600)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_ten_thousand_dup_free_cycles_keep_results_ids_and_the_bound_fast_path(transport):
    got = _run(scenarios.dup_free_cycles, 2, transport, 10_000, 1000, timeout=580)
    for report in got:
        assert report["contexts"] == [1], report["contexts"]  # the one id, reused
        assert len(report["bound"]) == 11
        if transport == "shm":  # the direct area comes back with the id, bound each time
            assert set(report["bound"]) == {("shm_direct", "shm_direct")}, report["bound"]
        else:
            assert len(set(report["bound"])) == 1, report["bound"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("live", [False, True], ids=["reused", "alive"])
def test_non_blocking_calls_on_the_world_and_the_4096th_dup_in_opposite_orders(transport,
                                                                                 live):
    # the 4,096th dup once shared the world's tags (12 bits of context): neither an id
    # reused 4,095 times nor the 4,096th communicator alive at once may make a tag collide
    for used, world in _run(scenarios.opposite_orders, 2, transport, 4095, live):
        assert used == (4096 if live else 1) and world == 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("nprocs", [1, 2, 3])
def test_free_completes_pending_calls_then_refuses_every_call_by_name(transport, nprocs):
    for errors in _run(scenarios.free_semantics, nprocs, transport):
        assert "world" in errors


@pytest.mark.usefixtures("compiled_on")  # a test of the compiled route
@pytest.mark.timeout(180)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_more_live_communicators_than_direct_areas_then_all_freed(transport):
    for report in _run(scenarios.many_live, 2, transport, 40):
        assert report["contexts"] == list(range(1, 41))
        assert report["again"] == 1
        if transport == "shm":
            direct = sum("shm_direct" in r for r in report["resources"])
            assert 0 < direct < 40  # the segment's areas run out, the calls still come right
            assert "shm_direct" in report["again_resources"]
            assert report["again_bound"] == "shm_direct"


@pytest.mark.timeout(180)
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("nprocs", [2, 3, 4])
def test_one_id_passes_between_groups(transport, nprocs):
    got = _run(scenarios.reuse_across_groups, nprocs, transport)
    assert all(used == [1] * 12 for used in got), got


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_ids_agreed_through_whole_masks_and_running_out_is_named(transport):
    got = _run(scenarios.ids_exhausted, 2, transport)
    assert [r["far"] for r in got] == [5000, 5000]
    assert all("CommunicatorLimit" not in r["message"] and "free()" in r["message"]
               for r in got)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_create_create_group_split_type_idup_compare(transport, nprocs):
    got = _run(scenarios.making_communicators, nprocs, transport)
    assert len(got) == nprocs


class _Held:
    """An agreement's execution whose completion this rank sees only ``seconds`` after it was
    first polled."""

    __slots__ = ("inner", "until", "seconds", "deadline")

    def __init__(self, inner, seconds):
        self.inner, self.until, self.seconds, self.deadline = inner, None, seconds, None

    def poll(self):
        if self.until is None:
            self.until = time.monotonic() + self.seconds
        return self.inner.poll() and time.monotonic() >= self.until


def _made_in_order(comm):
    """Two idups begun in that order, a small call between, rank 0 seeing the first one's id
    agreement complete only late (after the second's): the order each rank made them in (by
    the transport's `communicator_made`, where MPI makes each one's own MPI communicator by a
    blocking collective, so two ranks making them in other orders deadlock), and the calls'
    order."""
    made = []
    transport = comm.transport
    real = getattr(transport, "communicator_made", None)

    def record(group, context):
        made.append(context)
        if real is not None:
            real(group, context)

    transport.communicator_made = record
    agreements = []
    allgather = comm._allgather_ints

    def late_first(*args, **kwargs):
        agreements.append(1)
        if comm.rank != 0 or len(agreements) > 1:
            return (yield from allgather(*args, **kwargs))
        steps = allgather(*args, **kwargs)
        try:
            ex = next(steps)
            while True:
                ex = steps.send((yield _Held(ex, 0.2)))
        except StopIteration as stop:
            return stop.value

    comm._allgather_ints = late_first
    first = comm.idup()
    comm.allreduce(scenarios._x(comm.rank, 1))
    second = comm.idup()
    if comm.rank == 0:
        b, a = second.wait(), first.wait()
    else:
        a, b = first.wait(), second.wait()
    del comm._allgather_ints
    order = [a.context, b.context]
    scenarios._check_allreduce(b, 2)
    scenarios._check_allreduce(a, 3)
    for c in (a, b):
        c.free()
    return made, order


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_communicators_are_made_in_the_calls_order_whatever_order_they_are_waited_in(
        transport):
    # MPI makes each communicator's own MPI one by a blocking collective: two ranks making
    # them in other orders deadlocked (an idup waited for after a later one)
    for made, order in _run(_made_in_order, 2, transport, timeout=100):
        assert made == order, (made, order)


def _three_at_once(comm):
    """Two idups and a dup in flight at once, a small call between, the idups waited for
    last-first on rank 0 and in order on the others: each made, with ids of their own, and
    usable."""
    first = comm.idup()
    comm.allreduce(scenarios._x(comm.rank, 1))
    second = comm.idup()
    third = comm.dup()
    if comm.rank == 0:
        b, a = second.wait(), first.wait()
    else:
        a, b = first.wait(), second.wait()
    made = [a, b, third]
    for i, c in enumerate(made):
        scenarios._check_allreduce(c, 10 + i)
    contexts = [c.context for c in made]
    for c in made:
        c.free()
    return contexts


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_communicators_made_while_others_are_in_flight_each_get_an_id(transport):
    # agreements in flight at once locked ids the others then could not offer: the dup found
    # no id common to every rank (CommunicatorLimit) in a run of three
    for _ in range(5):
        contexts = _run(_three_at_once, 2, transport, timeout=100)
        assert len(set(contexts[0])) == 3 and contexts[0] == contexts[1], contexts


def _opposite_orders(comm, cycles):
    """``idup`` on the world and on a dup of it, begun in opposite orders on ranks 0 and 1
    (MPI allows it: non-blocking calls on different communicators), ``cycles`` times: each
    made with an id of its own and usable, then freed; and how many whole-mask rounds this
    rank offered nothing in (another agreement held its ids)."""
    from collops.runtime import context_ids

    deferred = [0]
    real = context_ids.ContextIds.whole

    def counted(self, key):
        got = real(self, key)
        deferred[0] += got is None
        return got

    other = comm.dup()
    context_ids.ContextIds.whole = counted  # inproc: the ranks' threads share the class
    try:
        got = []
        for i in range(cycles):
            if comm.rank % 2 == 0:
                first, second = comm.idup(), other.idup()
            else:
                second, first = other.idup(), comm.idup()
            a, b = first.wait(), second.wait()
            scenarios._check_allreduce(a, 2 * i)
            scenarios._check_allreduce(b, 2 * i + 1)
            got.append((a.context, b.context))
            a.free()
            b.free()
    finally:
        context_ids.ContextIds.whole = real
    other.free()
    return got, deferred[0]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_idups_on_two_communicators_begun_in_opposite_orders_each_get_an_id(transport):
    # each rank locked its window for the first agreement it began, so the two agreements'
    # windows were disjoint and both went on to whole masks, each locking every id the
    # other needed: CommunicatorLimit at the first cycle. Now one agreement at a time holds
    # a rank's mask, the others offering nothing and trying again
    results = _run(_opposite_orders, 2, transport, 60, timeout=100)
    (mine, deferred), (theirs, also) = results
    assert mine == theirs and all(a != b for a, b in mine), results
    assert deferred + also > 0, results  # the case the rounds are for ran


def _idup_given_up(comm):
    """What a failed ``idup`` (`scenarios.failed_idup`) held on its rank right after the
    error: its place in the making queue, ids locked for its agreement, the agreement's place
    in the whole-mask rounds."""
    error, d = scenarios.failed_idup(comm, 0.5)
    ids = d._contexts
    return error, list(d._making), ids.locked, ids.holder


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_failed_idup_leaves_nothing_held_when_it_raises(transport):
    # a failed phase left the call's generator suspended while its request was kept: its
    # place in the making queue stayed, and the next
    # dup or idup on the communicator waited for its turn for ever. The generator is closed
    # where the phase fails, so its finally clauses run then
    (error, making, locked, holder), _ = _run(_idup_given_up, 2, transport, timeout=100)
    assert error == "CollectiveTimeout"
    assert making == [] and locked == 0 and holder is None, (making, locked, holder)
