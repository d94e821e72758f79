"""Non-blocking and in-place calls on the prepared-call route (issues 17, 18).

A non-blocking single-phase call whose signature a call prepared already starts its one
phase from that `PreparedCall` (`FastPaths._fast_start`), without the phase generator; an
in-place call (``out`` is ``x``, or ``x`` its own block of ``out``) runs by the prepared call
and, on ``shm``, by its bound compiled runner. Here, on threads (``inproc``) and processes
(``shm``): results against numpy with the generators switched off (so a call that went the
general way fails), several requests outstanding and completed in another order on each
rank, ``out`` arrays the route must refuse (non-contiguous, another dtype), and calls that
differ between ranks, a peer that never comes and a timeout still raising named errors.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import collops
from collops.errors import ArgumentError, CollectiveMismatch, CollectiveTimeout, CollopsError
from tests.support.leaks import collops_segments, left_behind, still_running, tagged
from tests.support.output import json_objects
from tests.support.runners import compiled_route

pytestmark = pytest.mark.timeout(120)

TRANSPORTS = ["inproc", "shm"]
SCRIPTS = Path(__file__).parent / "scripts"
REPEATS = 3
#: the phase generators of the general path (`PhaseGenerators`): none may run once the
#: signature is prepared
GENERATORS = ("_barrier", "_reduction", "_gatherv", "_alltoallv")
#: and those of the calls that start with an envelope (bcast, scatter, scatterv), which take
#: the prepared route where the envelope has a bound runner (``shm_direct``: on ``shm``, as a
#: gatherv's headers)
ENVELOPED = ("_bcast", "_scatter", "_scatterv")


def _data(rank: int, n: int, salt: int = 0) -> np.ndarray:
    return ((np.arange(n) * (rank + 3) + salt) % 101).astype(np.float64)


def _general_off(comm):
    """Make every phase generator raise on ``comm`` (instance attributes shadow them)."""
    def refuse(name):
        def generator(*args, **kwargs):
            raise AssertionError(f"{name} ran: the call took the general path")
        return generator
    for name in GENERATORS + ENVELOPED:
        setattr(comm, name, refuse(name))


def _general_on(comm):
    for name in GENERATORS + ENVELOPED:
        comm.__dict__.pop(name, None)


def _forms(comm, n):
    """(name, blocking call, non-blocking call, numpy's answer on this rank)."""
    p, r = comm.size, comm.rank
    xs = [_data(j, n) for j in range(p)]
    x = xs[r]
    whole = [_data(j, n * p, 1) for j in range(p)]
    counts = [(j % 2) + n for j in range(p)]  # uneven v-counts
    vx = [_data(j, counts[j], 2) for j in range(p)]
    wide = [_data(j, sum(counts), 4) for j in range(p)]
    root = p - 1
    total = functools.reduce(np.add, xs)
    gathered = np.concatenate(xs)
    return [
        ("barrier", lambda: comm.barrier(), lambda: comm.ibarrier(), None),
        ("allreduce", lambda: comm.allreduce(x, "sum"), lambda: comm.iallreduce(x, "sum"),
         total),
        ("reduce", lambda: comm.reduce(x, "max", root), lambda: comm.ireduce(x, "max", root),
         functools.reduce(np.maximum, xs) if r == root else None),
        ("scan", lambda: comm.scan(x, "sum"), lambda: comm.iscan(x, "sum"),
         functools.reduce(np.add, xs[:r + 1])),
        ("exscan", lambda: comm.exscan(x, "sum"), lambda: comm.iexscan(x, "sum"),
         functools.reduce(np.add, xs[:r]) if r else None),
        ("reduce_scatter_block", lambda: comm.reduce_scatter_block(whole[r], "sum"),
         lambda: comm.ireduce_scatter_block(whole[r], "sum"),
         functools.reduce(np.add, whole)[r * n:(r + 1) * n]),
        ("allgather", lambda: comm.allgather(x), lambda: comm.iallgather(x), gathered),
        ("gather", lambda: comm.gather(x, root), lambda: comm.igather(x, root),
         gathered if r == root else None),
        ("alltoall", lambda: comm.alltoall(whole[r]), lambda: comm.ialltoall(whole[r]),
         np.concatenate([whole[j][r * n:(r + 1) * n] for j in range(p)])),
        ("allgatherv", lambda: comm.allgatherv(vx[r], counts),
         lambda: comm.iallgatherv(vx[r], counts), np.concatenate(vx)),
        ("alltoallv", lambda: comm.alltoallv(whole[r][:p * n], [n] * p, None, [n] * p),
         lambda: comm.ialltoallv(whole[r][:p * n], [n] * p, None, [n] * p),
         np.concatenate([whole[j][r * n:(r + 1) * n] for j in range(p)])),
        ("reduce_scatter", lambda: comm.reduce_scatter(wide[r], "sum", counts),
         lambda: comm.ireduce_scatter(wide[r], "sum", counts),
         functools.reduce(np.add, wide)[sum(counts[:r]):sum(counts[:r + 1])]),
    ]


def _gapped(counts):
    """Displacements of blocks of ``counts`` in reverse rank order, with gaps between them."""
    p = len(counts)
    return [sum(counts[j + 1:]) + 2 * (p - j) for j in range(p)]


def _rooted_forms(comm, n):
    """`_forms` of the rooted calls whose non-blocking form starts with an envelope or
    headers (bcast, scatter, scatterv, gatherv): counts given or not, zero counts,
    displacements with gaps."""
    p, r = comm.size, comm.rank
    root = p - 1
    whole = _data(root, n * p, 5)
    counts = [(j % 2) + n for j in range(p)]
    zeroed = [0 if j == 1 else c for j, c in enumerate(counts)]  # a rank with no rows
    forms = [
        ("bcast", lambda: comm.bcast(whole if r == root else None, root),
         lambda: comm.ibcast(whole if r == root else None, root), whole),
        ("scatter", lambda: comm.scatter(whole if r == root else None, root),
         lambda: comm.iscatter(whole if r == root else None, root), whole[r * n:(r + 1) * n]),
    ]
    for name, cs in (("", counts), (" zero", zeroed)):
        gaps = _gapped(cs)
        for how, displs in (("", None), (" gaps", gaps)):
            rows = _data(root, sum(cs) + (2 * p + 3 if displs else 0), 6)
            at = displs or [sum(cs[:j]) for j in range(p)]
            mine = rows[at[r]: at[r] + cs[r]]
            forms.append((f"scatterv{name}{how}", functools.partial(
                comm.scatterv, rows if r == root else None, cs if r == root else None, root,
                displs=displs if r == root else None), functools.partial(
                comm.iscatterv, rows if r == root else None, cs if r == root else None, root,
                displs=displs if r == root else None), mine))
            blocks = [_data(j, cs[j], 7) for j in range(p)]
            if displs is None:
                placed = np.concatenate(blocks)
            else:
                placed = np.zeros(max(d + c for d, c in zip(displs, cs, strict=True)))
                for j in range(p):
                    placed[displs[j]: displs[j] + cs[j]] = blocks[j]
            for given in ("every rank", "root only"):
                mine_counts = cs if given == "every rank" or r == root else None
                forms.append((f"gatherv {given}{name}{how}", functools.partial(
                    comm.gatherv, blocks[r], root, mine_counts,
                    displs=displs if r == root else None), functools.partial(
                    comm.igatherv, blocks[r], root, mine_counts,
                    displs=displs if r == root else None), placed if r == root else None))
    return forms


def _same(got, expected) -> bool:
    if expected is None:
        return got is None
    return got is not None and bool(np.array_equal(np.asarray(got), expected))


def _nonblocking(comm, n):
    """Per form: whether every non-blocking call on the prepared route matched numpy (the
    rooted forms on ``shm``, where their envelope or headers go through the direct slots;
    on threads they take the general path, checked all the same)."""
    forms = _forms(comm, n)
    rooted = _rooted_forms(comm, n)
    if comm.transport_name == "shm":
        forms, rooted = forms + rooted, []
    for _, blocking, _, _ in forms + rooted:  # the first call of each signature prepares it
        blocking()
    checks = {name: all(_same(start().wait(), expected) for _ in range(REPEATS))
              for name, _, start, expected in rooted}
    _general_off(comm)
    try:
        return {**checks, **{name: all(_same(start().wait(), expected) for _ in range(REPEATS))
                             for name, _, start, expected in forms}}
    finally:
        _general_on(comm)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("n", [1, 700])
@pytest.mark.parametrize("p", [2, 3])
def test_nonblocking_forms_on_the_prepared_route_match_numpy(transport, n, p):
    per_rank = collops.spawn(_nonblocking, p, n, transport=transport, timeout=100)
    for rank, checks in enumerate(per_rank):
        assert all(checks.values()), (rank, checks)


def _out_of_order(comm):
    """Several requests outstanding, completed in another order on each rank (by `wait`,
    `test` loops and `wait_any`): whether each result matched numpy."""
    p, r = comm.size, comm.rank
    xs = [_data(j, 5) for j in range(p)]
    root = p - 1
    big = _data(root, 700, 8)  # beyond a bcast's envelope: a data phase follows it
    whole = _data(root, 5 * p, 9)
    counts = [j + 1 for j in range(p)]
    blocks = [_data(j, counts[j], 10) for j in range(p)]
    sends = [_data(j, 2 * p, 11) for j in range(p)]
    rooted = [  # (blocking, non-blocking, numpy's answer on this rank)
        (lambda: comm.bcast(xs[r], root), lambda: comm.ibcast(xs[r], root), xs[root]),
        (lambda: comm.bcast(big if r == root else None, root),
         lambda: comm.ibcast(big if r == root else None, root), big),
        (lambda: comm.scatter(whole if r == root else None, root),
         lambda: comm.iscatter(whole if r == root else None, root), whole[5 * r: 5 * r + 5]),
        (lambda: comm.gatherv(blocks[r], root, counts),
         lambda: comm.igatherv(blocks[r], root, counts),
         np.concatenate(blocks) if r == root else None),
        (lambda: comm.alltoallv(sends[r], [2] * p, None, [2] * p),
         lambda: comm.ialltoallv(sends[r], [2] * p, None, [2] * p),
         np.concatenate([sends[j][2 * r: 2 * r + 2] for j in range(p)])),
    ]
    if comm.transport_name != "shm":  # on threads those go the general way: alltoallv only
        rooted = rooted[-1:]
    for _ in range(2):  # prepare the signatures
        comm.allreduce(xs[r], "sum")
        comm.allgather(xs[r])
        comm.scan(xs[r], "sum")
        comm.barrier()
        for blocking, _, _ in rooted:
            blocking()
    _general_off(comm)
    try:
        expected = []
        requests = []
        for k in range(1, 4):
            requests.append(comm.iallreduce(xs[r] * k, "sum"))
            expected.append(functools.reduce(np.add, xs) * k)
        requests.append(comm.iallgather(xs[r]))
        expected.append(np.concatenate(xs))
        requests.append(comm.iscan(xs[r], "sum"))
        expected.append(functools.reduce(np.add, xs[:r + 1]))
        requests.append(comm.ibarrier())
        expected.append(None)
        for _, start, answer in rooted:
            requests.append(start())
            expected.append(answer)
        order = list(range(len(requests)))
        order = order[r + 1:] + order[:r + 1]  # another order on every rank
        order.reverse()
        results = {}
        first = order[0]
        while not requests[first].test():
            pass
        results[first] = requests[first].wait()
        index, value = collops.wait_any([requests[i] for i in order[1:3]])
        results[order[1:3][index]] = value
        for i in order[1:]:
            results[i] = requests[i].wait()
        return [_same(results[i], expected[i]) for i in range(len(requests))]
    finally:
        _general_on(comm)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_outstanding_requests_complete_in_any_order(transport):
    per_rank = collops.spawn(_out_of_order, 3, transport=transport, timeout=100)
    for rank, checks in enumerate(per_rank):
        assert all(checks), (rank, checks)


def _in_place(comm, n):
    """Per in-place form: whether every call matched numpy with its result in ``out``
    itself, on the prepared route."""
    p, r = comm.size, comm.rank
    root = 1 % p
    checks: dict[str, list[bool]] = {}

    def check(name, got, out, expected):
        ok = _same(got, expected) and (got is None or np.shares_memory(got, out))
        checks.setdefault(name, []).append(ok)

    for k in range(REPEATS + 2):
        if k == 2:  # prepared and bound by the first calls: nothing general from here
            _general_off(comm)
        xs = [_data(j, n, k) for j in range(p)]
        x = xs[r].copy()
        check("allreduce", comm.allreduce(x, "sum", out=x), x, functools.reduce(np.add, xs))
        x = xs[r].copy()
        check("iallreduce", comm.iallreduce(x, "sum", out=x).wait(), x,
              functools.reduce(np.add, xs))
        x = xs[r].copy()
        got = comm.reduce(x, "min", root, out=x if r == root else None)
        check("reduce", got, x, functools.reduce(np.minimum, xs) if r == root else None)
        for name, total in (("scan", xs[:r + 1]), ("exscan", xs[:r])):
            x = xs[r].copy()
            got = getattr(comm, name)(x, "sum", out=x)
            check(name, got, x, functools.reduce(np.add, total) if total else None)
        out = np.zeros(n * p)
        mine = out[r * n:(r + 1) * n]
        mine[...] = xs[r]
        check("allgather", comm.allgather(mine, out=out), out, np.concatenate(xs))
        out = np.zeros(n * p)
        mine = out[r * n:(r + 1) * n]
        mine[...] = xs[r]
        got = comm.gather(mine if r == root else xs[r], root, out=out if r == root else None)
        check("gather", got, out, np.concatenate(xs) if r == root else None)
        blocks = [_data(j, n * p, k + 5) for j in range(p)]
        x = blocks[r].copy()
        check("alltoall", comm.alltoall(x, out=x), x,
              np.concatenate([blocks[j][r * n:(r + 1) * n] for j in range(p)]))
        x = blocks[r].copy()
        own = x[r * n:(r + 1) * n]
        check("reduce_scatter_block", comm.reduce_scatter_block(x, "sum", out=own), own,
              functools.reduce(np.add, blocks)[r * n:(r + 1) * n])
    _general_on(comm)
    return {name: all(v) for name, v in checks.items()}, comm.bound_calls()


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("n", [1, 700])
def test_in_place_forms_on_the_prepared_route_match_numpy(transport, n):
    per_rank = collops.spawn(_in_place, 3, n, transport=transport, timeout=100)
    for rank, (checks, bound) in enumerate(per_rank):
        assert all(checks.values()), (rank, checks)
        if transport == "shm" and compiled_route():  # the compiled runners run them, in place
            assert {"allreduce", "allgather", "alltoall", "scan"} <= set(bound), bound


def _bad_out(comm):
    """The errors of in-place calls whose ``out`` the route must refuse, each raised on every
    rank (all make the same call), and a good call after them."""
    x = np.arange(8.0)
    comm.allreduce(x.copy(), "sum", out=np.empty(8))  # prepared
    comm.allreduce(x.copy(), "sum", out=np.empty(8))  # bound
    errors = []
    strided = np.arange(16.0)[::2]
    for call in (lambda: comm.allreduce(strided, "sum", out=strided),
                 lambda: comm.iallreduce(strided, "sum", out=strided),
                 lambda: comm.allreduce(x, "sum", out=x.view(np.int64)),
                 lambda: comm.iallreduce(x, "sum", out=x.view(np.int64)),
                 lambda: comm.allgather(x[:4], out=x[:4])):
        try:
            call()
            errors.append(None)
        except ArgumentError as exc:
            errors.append(str(exc))
    y = np.arange(8.0)
    after = comm.iallreduce(y, "sum", out=y).wait()
    return errors, bool(np.array_equal(after, np.arange(8.0) * comm.size))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_in_place_out_that_cannot_hold_the_result_raises(transport):
    per_rank = collops.spawn(_bad_out, 2, transport=transport, timeout=100)
    for rank, (errors, after) in enumerate(per_rank):
        assert all(e is not None and "out" in e and f"rank {rank}" in e for e in errors), errors
        assert "contiguous" in errors[0] and "contiguous" in errors[1]
        assert "dtype" in errors[2] and "dtype" in errors[3]
        assert after


def _mismatched(comm, pair):
    """Rank 0 starts the first call of ``pair`` where the others start the second (both
    prepared): an allreduce and an allgather, a bcast and a scatter, a gatherv given other
    counts, an alltoallv and a gatherv."""
    p = comm.size
    x = np.arange(4.0)
    calls = {
        "allreduce": (lambda: comm.allreduce(x, "sum"),
                      lambda: comm.iallreduce(x, "sum", timeout=20)),
        "allgather": (lambda: comm.allgather(x), lambda: comm.iallgather(x, timeout=20)),
        "bcast": (lambda: comm.bcast(x, 0), lambda: comm.ibcast(x, 0, timeout=20)),
        "scatter": (lambda: comm.scatter(np.arange(2.0 * p), 0),
                    lambda: comm.iscatter(np.arange(2.0 * p), 0, timeout=20)),
        "gatherv": (lambda: comm.gatherv(x, 0, [4] * p),
                    lambda: comm.igatherv(x, 0, [4] * p, timeout=20)),
        "gatherv 3": (lambda: comm.gatherv(x[:3], 0, [3] * p),
                      lambda: comm.igatherv(x[:3], 0, [3] * p, timeout=20)),
        "alltoallv": (lambda: comm.alltoallv(np.arange(2.0 * p), [2] * p, None, [2] * p),
                      lambda: comm.ialltoallv(np.arange(2.0 * p), [2] * p, None, [2] * p,
                                              timeout=20)),
    }
    for _ in range(2):
        for name in pair:
            calls[name][0]()
    try:
        calls[pair[0] if comm.rank == 0 else pair[1]][1]().wait()
    except CollopsError as exc:
        return type(exc).__name__, str(exc)
    return None


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("pair", [("allreduce", "allgather"), ("bcast", "scatter"),
                                  ("gatherv", "gatherv 3"), ("alltoallv", "gatherv")],
                         ids=lambda pair: "-".join(pair))
def test_mismatched_nonblocking_calls_raise(transport, pair):
    per_rank = collops.spawn(_mismatched, 2, pair, transport=transport, timeout=100)
    assert any(r is not None and r[0] == CollectiveMismatch.__name__ for r in per_rank), \
        per_rank
    assert all(r is not None for r in per_rank), per_rank


def _late_peer(comm, polled):
    """Rank 0's prepared non-blocking allreduce, which rank 1 never makes: a timeout, whether
    rank 0 waits for it or polls it (``polled``)."""
    x = np.arange(4.0)
    for _ in range(2):
        comm.allreduce(x, "sum")
    if comm.rank == 0:
        start = time.monotonic()
        try:
            request = comm.iallreduce(x, "sum", timeout=1.0)
            if polled:
                while not request.test():
                    time.sleep(0.001)
            else:
                request.wait()
        except CollectiveTimeout as exc:
            return "timeout", time.monotonic() - start, str(exc)
        return "completed", 0.0, ""
    time.sleep(3.0)
    return "idle", 0.0, ""


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("polled", [False, True], ids=["waited", "polled"])
def test_a_nonblocking_call_nobody_meets_times_out(transport, polled):
    per_rank = collops.spawn(_late_peer, 2, polled, transport=transport, timeout=100)
    outcome, took, text = per_rank[0]
    assert outcome == "timeout", per_rank[0]
    assert 0.9 < took < 30, took
    assert "allreduce" in text and "rank 0" in text, text


@pytest.mark.parametrize("collective", ["allreduce", "bcast", "scatter", "gatherv",
                                        "alltoallv"])
def test_a_dead_peer_ends_a_nonblocking_call_with_peer_failed(collective):
    before, env = collops_segments(), tagged()
    script = SCRIPTS / "dies_mid_collective.py"
    proc = subprocess.run([sys.executable, "-m", "collops", "run", "-n", "3", "--timeout", "50",
                           str(script), "nonblocking", collective], capture_output=True,
                          text=True, timeout=60, env=env)
    assert not left_behind(before), "a shared-memory segment was left behind"
    assert not still_running(str(script), env)
    survivors = {r["rank"]: r for r in json_objects(proc.stdout)}
    assert set(survivors) == {0, 2}, proc.stdout + proc.stderr
    for report in survivors.values():
        assert report["failed"] == 1
        assert report["seconds"] < 5.0


def _outstanding_across_calls(comm, late):
    """A request outstanding on rank 0 while it makes more blocking calls than the direct
    area has slots (rank 1 waits for its request first), and one polled by `test` while its
    peer comes ``late`` seconds after: whether every result matched numpy."""
    p, r = comm.size, comm.rank
    xs = [_data(j, 6) for j in range(p)]
    total = functools.reduce(np.add, xs)
    for _ in range(2):
        comm.allreduce(xs[r], "sum")
    checks = []
    posted = []
    if comm.transport_name == "shm":  # count the calls the compiled runner posted
        from collops.shm import direct

        class Counted(direct.PostedCall):
            __slots__ = ()

            def __init__(self, *args):
                posted.append(1)
                super().__init__(*args)
        direct.PostedCall = Counted  # (one process per rank)
    request = comm.iallreduce(xs[r] * 2, "sum")
    if r == 0:
        checks += [_same(comm.allreduce(xs[r] + k, "sum"), total + k * p) for k in range(40)]
        checks.append(_same(request.wait(), total * 2))
    else:
        checks.append(_same(request.wait(), total * 2))
        checks += [_same(comm.allreduce(xs[r] + k, "sum"), total + k * p) for k in range(40)]
    if r == 1:
        time.sleep(late)
    request = comm.iallreduce(xs[r] * 3, "sum", timeout=30)
    polls = 0
    while not request.test():
        polls += 1
    checks.append(_same(request.wait(), total * 3))
    return checks, polls, len(posted)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_request_outstanding_across_other_calls_and_polled_completes(transport):
    per_rank = collops.spawn(_outstanding_across_calls, 2, 0.3, transport=transport,
                             timeout=100)
    for rank, (checks, _, posted) in enumerate(per_rank):
        assert all(checks), (rank, checks)
        if transport == "shm" and compiled_route():  # posted by the compiled runner as begun
            assert posted >= 2, posted
    assert per_rank[0][1] > 1  # rank 0 polled while rank 1 slept


def _each_its_own_root(comm, collective, n):
    """Both roots' signatures prepared by blocking calls, then each rank starts the
    non-blocking call with itself as the root: the error each rank gets (the general path
    switched off, so the prepared route meets the disagreement), then a good call."""
    p, me = comm.size, comm.rank
    block, whole = np.full(n, 1.0), np.full(n * p, 1.0)
    for root in range(p):
        for _ in range(2):
            if collective == "bcast":
                comm.bcast(block if me == root else None, root)
            else:
                comm.scatter(whole if me == root else None, root)
    _general_off(comm)
    try:
        if collective == "bcast":
            comm.ibcast(block, me, timeout=30).wait()
        else:
            comm.iscatter(whole, me, timeout=30).wait()
        text = "no error"
    except CollectiveMismatch as exc:
        text = str(exc)
    finally:
        _general_on(comm)
    total = comm.allreduce(np.ones(3), timeout=30)  # nothing of the failed call left
    return text, bool(np.array_equal(total, np.full(3, float(p))))


@pytest.mark.parametrize("collective", ["bcast", "scatter"])
@pytest.mark.parametrize("n", [1, 1 << 20], ids=["8B", "8MiB"])
def test_a_root_disagreement_of_a_nonblocking_call_names_both_roots(collective, n):
    per_rank = collops.spawn(_each_its_own_root, 2, collective, n, transport="shm",
                             timeout=100)
    for text, after in per_rank:
        assert "root=0" in text and "root=1" in text, per_rank
        assert after
