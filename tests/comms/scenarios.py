"""Communicator scenarios run on every rank of a job: threads and ``shm`` through `spawn`,
MPI through ``tests/mpi/scripts/communicators.py``. Each checks results against numpy on
inputs every rank can compute for every other, and returns what the test asserts on too."""

from __future__ import annotations

from typing import Any

import numpy as np

import collops
from collops.errors import ArgumentError, CommunicatorFreed, CommunicatorLimit
from collops.runtime.groups import CONGRUENT, IDENT, SIMILAR, UNEQUAL
from collops.transport.tags import CONTEXT_LIMIT


def _x(rank: int, salt: int, n: int = 1) -> np.ndarray:
    return (np.arange(n) + 3.0 * rank + 7 * salt) % 101


def _sum(ranks: Any, salt: int, n: int = 1) -> np.ndarray:
    return np.sum([_x(r, salt, n) for r in ranks], axis=0)


def _check_allreduce(comm: Any, salt: int, n: int = 1) -> None:
    world = [comm.group.ranks[r] for r in range(comm.size)]
    got = comm.allreduce(_x(comm.group.ranks[comm.rank], salt, n))
    np.testing.assert_array_equal(got, _sum(world, salt, n))


def dup_free_cycles(comm: Any, cycles: int, every: int) -> dict[str, Any]:
    """``cycles`` × (dup, 8-byte allreduce, free); every ``every`` cycles the result is checked
    against numpy and the repeated call's bound runner recorded."""
    contexts, bound = set(), []
    for i in range(cycles):
        c = comm.dup()
        got = c.allreduce(_x(comm.rank, i))
        contexts.add(c.context)
        if i % every == 0 or i == cycles - 1:
            np.testing.assert_array_equal(got, _sum(range(comm.size), i))
            again = c.allreduce(_x(comm.rank, i + 1))
            np.testing.assert_array_equal(again, _sum(range(comm.size), i + 1))
            bound.append((c.bound_calls().get("allreduce"), c.last_algorithm))
        c.free()
    return {"contexts": sorted(contexts), "bound": bound}


def opposite_orders(comm: Any, reuses: int, live: bool = False) -> list[int]:
    """A dup whose id was reused ``reuses`` times (``live``: made after ``reuses`` dups still
    alive), and non-blocking allreduces on it and on ``comm`` begun in opposite orders on even
    and odd ranks (legal MPI: must not mix up)."""
    alive = []
    for _ in range(reuses):
        c = comm.dup()
        if live:
            alive.append(c)
        else:
            c.free()
    d = comm.dup()
    while int(d._call_number[0]) < int(comm._call_number[0]):
        d.barrier()  # the two calls get the same call number: only the context tells them apart
    a, b = _x(comm.rank, 1, 3), _x(comm.rank, 2, 3)
    if comm.rank % 2 == 0:
        on_world, on_dup = comm.iallreduce(a), d.iallreduce(b)
    else:
        on_dup, on_world = d.iallreduce(b), comm.iallreduce(a)
    first, second = (on_dup, on_world) if comm.rank % 2 == 0 else (on_world, on_dup)
    first.wait()
    second.wait()
    np.testing.assert_array_equal(on_world.wait(), _sum(range(comm.size), 1, 3))
    np.testing.assert_array_equal(on_dup.wait(), _sum(range(comm.size), 2, 3))
    used = d.context
    d.free()
    for c in alive:
        c.free()
    return [used, comm.context]


def free_semantics(comm: Any) -> dict[str, str]:
    """Pending calls complete across `free`; a freed comm refuses every call by name; the
    world cannot be freed; a ``with`` block frees."""
    c = comm.dup()
    pending = c.iallreduce(_x(comm.rank, 5, 4))
    c.free()
    np.testing.assert_array_equal(pending.wait(), _sum(range(comm.size), 5, 4))
    errors = {}
    for call, run in [("allreduce", lambda: c.allreduce(np.ones(1))),
                      ("dup", lambda: c.dup()), ("free", lambda: c.free()),
                      ("iallreduce", lambda: c.iallreduce(np.ones(1))),
                      ("group", lambda: c.group)]:
        try:
            run()
        except CommunicatorFreed as exc:
            assert call in str(exc) and c.name in str(exc), str(exc)
            errors[call] = str(exc)
    assert sorted(errors) == ["allreduce", "dup", "free", "group", "iallreduce"], errors
    try:
        comm.free()
    except ArgumentError as exc:
        assert "free" in str(exc) and "world" in str(exc), str(exc)
        errors["world"] = str(exc)
    with comm.dup() as d:
        _check_allreduce(d, 6)
    assert d.freed
    with comm.dup() as e:
        e.free()  # freed inside: the block's end does not free it again
    return errors


def many_live(comm: Any, count: int) -> dict[str, Any]:
    """``count`` communicators alive at once (more than the segment's direct areas), each
    checked; freed in a shuffled order; the ids and the direct areas come back."""
    live = [comm.dup() for _ in range(count)]
    for i, c in enumerate(live):
        _check_allreduce(c, i)
    resources = [sorted(c._resources) for c in live]
    order = np.random.default_rng(3).permutation(count)
    for i in order:
        live[i].free()
    again = comm.dup()
    _check_allreduce(again, 1)
    _check_allreduce(again, 2)
    result = {"contexts": sorted(c.context for c in live), "again": again.context,
              "resources": resources, "again_resources": sorted(again._resources),
              "again_bound": again.bound_calls().get("allreduce")}
    again.free()
    return result


def reuse_across_groups(comm: Any) -> list[int]:
    """One id serving in turn the whole group, halves of it and the whole again (the direct
    slots must pass from one group to the next), with results checked throughout."""
    used = []
    for round_ in range(6):
        d = comm.dup()
        for k in range(5):
            _check_allreduce(d, 10 * round_ + k)
        used.append(d.context)
        d.free()
        s = comm.split(comm.rank % 2, key=-comm.rank)
        for k in range(5):
            _check_allreduce(s, 10 * round_ + k + 5, 2)
        _check_allreduce(s, round_, 1 << 19)  # 4 MiB: the stream area, where it has one
        used.append(s.context)
        s.free()
    return used


def ids_exhausted(comm: Any) -> dict[str, Any]:
    """Ids free on the ranks in different windows (agreement through whole masks), then none
    free (the limit, named, on every rank); the rank's ids restored afterwards."""
    ids = comm._contexts
    saved = ids.free
    try:
        ids.free = (1 << (100 + 300 * comm.rank)) | (1 << 5000)
        far = comm.dup()
        _check_allreduce(far, 3)
        got = far.context
        far.free()
        ids.free = 0
        try:
            comm.dup()
        except CommunicatorLimit as exc:
            message = str(exc)
        else:
            raise AssertionError("dup with no id free did not raise")
    finally:
        ids.free = saved
    assert str(CONTEXT_LIMIT - 2) in message, message
    _check_allreduce(comm, 4)
    return {"far": got, "message": message}


def making_communicators(comm: Any) -> dict[str, Any]:
    """create, create_group (non-members not calling, reversed order, the same tag again),
    split_type, idup overlapping other calls, compare, and bad arguments named."""
    p, me = comm.size, comm.rank
    out: dict[str, Any] = {}
    # create: every rank but 0, collective over comm
    c = comm.create(comm.group.excl([0]))
    if me == 0:
        assert c is None
    else:
        assert (c.size, c.rank) == (p - 1, me - 1)
        _check_allreduce(c, 1)
        c.free()
    # create_group over the ends only, in reversed order: the middle ranks do not call
    ends = comm.group.incl([p - 1, 0] if p > 1 else [0])
    if me in (0, p - 1):
        for again in range(5):  # consecutive calls with the same tag and group
            g = comm.create_group(ends, tag=3)
            assert g.size == (2 if p > 1 else 1) and g.rank == ends.rank, (g.size, g.rank)
            _check_allreduce(g, again)
            out["create_group"] = g.context
            g.free()
    comm.barrier()
    # split_type
    shared = comm.split_type("shared", key=-me)
    assert shared.size == p and shared.rank == p - 1 - me
    _check_allreduce(shared, 2)
    shared.free()
    assert comm.split_type(None) is None and comm.split_type(collops.UNDEFINED) is None
    assert comm.split(collops.UNDEFINED) is None
    # idup overlapping a collective and another idup, waited last-first
    first = comm.idup()
    middle = comm.iallreduce(_x(me, 8, 2))
    last = comm.idup()
    b = last.wait()
    np.testing.assert_array_equal(middle.wait(), _sum(range(p), 8, 2))
    a = first.wait()
    assert a.context != b.context and comm.context not in (a.context, b.context)
    _check_allreduce(a, 9)
    _check_allreduce(b, 10)
    out["compare"] = [comm.compare(comm), comm.compare(a), a.compare(b),
                      a.group.compare(comm.group)]
    assert out["compare"] == [IDENT, CONGRUENT, CONGRUENT, IDENT]
    if p > 1:
        rev = comm.split(0, key=-me)
        assert comm.compare(rev) == SIMILAR
        odd = comm.split(me % 2)
        assert comm.compare(odd) == UNEQUAL
        rev.free()
        odd.free()
    a.free()
    b.free()
    # bad arguments name the argument
    named = {}
    for name, run in [("color", lambda: comm.split("red")), ("key", lambda: comm.split(0, 1.5)),
                      ("group", lambda: comm.create_group([0])),
                      ("tag", lambda: comm.create_group(comm.group, tag=-1)),
                      ("split_type", lambda: comm.split_type("numa")),
                      ("other", lambda: comm.compare(3))]:
        try:
            run()
        except ArgumentError as exc:
            assert f"{name}=" in str(exc), (name, str(exc))
            named[name] = str(exc)
    assert sorted(named) == ["color", "group", "key", "other", "split_type", "tag"], named
    sub = comm.split(0 if me < max(1, p // 2) else 1)
    if me == 0 and p > 1:
        try:
            sub.create_group(comm.group)  # ranks outside sub
        except ArgumentError as exc:
            named["outside"] = str(exc)
        assert "not in" in named["outside"]
    sub.free()
    return out


def failed_idup(comm: Any, limit: float) -> tuple[str | None, Any]:
    """Rank 0's ``idup`` on a duplicate with time limit ``limit``, which rank 1 never makes
    (it sleeps twice as long): the error's type name on rank 0 (None elsewhere) and the
    duplicate. The request is kept, as a program keeps its requests."""
    import time
    d = comm.dup()
    d.timeout = limit
    error = None
    if comm.rank == 0:
        request = d.idup()
        try:
            request.wait()
        except collops.CollopsError as exc:
            error = type(exc).__name__
    else:
        time.sleep(2 * limit)
    return error, d


def run_all(comm: Any, cycles: int = 200) -> list[str]:
    """Every scenario once (the MPI job's script)."""
    done = []
    dup_free_cycles(comm, cycles, 50)
    done.append("dup_free_cycles")
    opposite_orders(comm, 50)
    done.append("opposite_orders")
    free_semantics(comm)
    done.append("free_semantics")
    many_live(comm, 40)
    done.append("many_live")
    reuse_across_groups(comm)
    done.append("reuse_across_groups")
    ids_exhausted(comm)
    done.append("ids_exhausted")
    making_communicators(comm)
    done.append("making_communicators")
    collops.wait_all([])
    return done
