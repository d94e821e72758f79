"""Every facade collective, each form, checked inside the ranks against numpy.

A case runs on one rank with a facade communicator and returns ``(label, got, expected)``
triples: ``expected`` is computed with numpy from every rank's input (each rank can make
them all: `data` is a pure function of the rank), never by collops.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce as fold
from typing import Any

import numpy as np

from collops import MPI

Case = Callable[[Any], list[tuple[str, Any, Any]]]
CASES: dict[str, Case] = {}


def case(fn: Case) -> Case:
    """Register a case by its name."""
    CASES[fn.__name__.removeprefix("case_")] = fn
    return fn


def data(rank: int, n: int, dtype: Any = np.float64) -> np.ndarray:
    """Rank ``rank``'s input: distinct per rank and element."""
    return (np.arange(n) * (rank + 1) + 3 * rank + 1).astype(dtype)


def forms(comm: Any, blocking: Callable[..., Any], nonblocking: Callable[..., Any],
          persistent: Callable[..., Any] | None, make: Callable[[], tuple[Any, ...]],
          read: Callable[[tuple[Any, ...]], Any]) -> list[tuple[str, Any]]:
    """Run one call in its blocking, I… and …_init forms (twice started) on fresh buffers."""
    out = []
    bufs = make()
    blocking(*bufs)
    out.append(("blocking", read(bufs)))
    bufs = make()
    nonblocking(*bufs).Wait()
    out.append(("nonblocking", read(bufs)))
    if persistent is not None:
        bufs = make()
        request = persistent(*bufs)
        for start in range(2):
            request.Start()
            request.Wait()
            out.append((f"persistent start {start}", read(bufs)))
        request.Free()
    return out


def _all(comm: Any, n: int, dtype: Any = np.float64) -> list[np.ndarray]:
    return [data(r, n, dtype) for r in range(comm.Get_size())]


@case
def case_allreduce(comm: Any) -> list[tuple[str, Any, Any]]:
    results = []
    for op, fn in ((MPI.SUM, np.add), (MPI.MAX, np.maximum), (MPI.PROD, np.multiply)):
        expected = fold(fn, _all(comm, 5))
        for label, got in forms(comm, lambda s, r, op=op: comm.Allreduce(s, r, op),
                                lambda s, r, op=op: comm.Iallreduce(s, r, op),
                                lambda s, r, op=op: comm.Allreduce_init(s, r, op),
                                lambda: (data(comm.rank, 5), np.zeros(5)), lambda b: b[1]):
            results.append((f"{op} {label}", got, expected))
    inplace = data(comm.rank, 5)
    comm.Allreduce(MPI.IN_PLACE, [inplace, MPI.DOUBLE], op=MPI.SUM)
    results.append(("IN_PLACE", inplace, fold(np.add, _all(comm, 5))))
    ints = np.zeros(4, np.intc)
    comm.Allreduce([data(comm.rank, 4, np.intc), MPI.INT], [ints, MPI.INT], op=MPI.BXOR)
    results.append(("BXOR int", ints, fold(np.bitwise_xor, _all(comm, 4, np.intc))))
    return results


@case
def case_bcast(comm: Any) -> list[tuple[str, Any, Any]]:
    results = []
    for root in range(comm.size):
        def make(root: int = root) -> tuple[np.ndarray]:
            return (data(comm.rank, 6) if comm.rank == root else np.zeros(6),)
        for label, got in forms(comm, lambda b, root=root: comm.Bcast(b, root),
                                lambda b, root=root: comm.Ibcast(b, root),
                                lambda b, root=root: comm.Bcast_init(b, root), make,
                                lambda b: b[0]):
            results.append((f"root {root} {label}", got, data(root, 6)))
    raw = bytearray(data(0, 3).tobytes()) if comm.rank == 0 else bytearray(24)
    comm.Bcast([raw, 3, MPI.DOUBLE], root=0)
    results.append(("bytearray", np.frombuffer(raw, np.float64), data(0, 3)))
    return results


@case
def case_reduce(comm: Any) -> list[tuple[str, Any, Any]]:
    results = []
    root = comm.size - 1
    expected = fold(np.minimum, _all(comm, 4))
    for label, got in forms(comm, lambda s, r: comm.Reduce(s, r, MPI.MIN, root),
                            lambda s, r: comm.Ireduce(s, r, MPI.MIN, root),
                            lambda s, r: comm.Reduce_init(s, r, MPI.MIN, root),
                            lambda: (data(comm.rank, 4), np.zeros(4)), lambda b: b[1]):
        results.append((label, got if comm.rank == root else expected, expected))
    buf = data(comm.rank, 4)
    comm.Reduce(MPI.IN_PLACE if comm.rank == 0 else buf, buf if comm.rank == 0 else None,
                op=MPI.SUM, root=0)
    if comm.rank == 0:
        results.append(("IN_PLACE", buf, fold(np.add, _all(comm, 4))))
    return results


@case
def case_scan_exscan(comm: Any) -> list[tuple[str, Any, Any]]:
    results = []
    mine = _all(comm, 3)[: comm.rank + 1]
    for label, got in forms(comm, comm.Scan, comm.Iscan, comm.Scan_init,
                            lambda: (data(comm.rank, 3), np.zeros(3)), lambda b: b[1]):
        results.append(("scan " + label, got, fold(np.add, mine)))
    for label, got in forms(comm, comm.Exscan, comm.Iexscan, comm.Exscan_init,
                            lambda: (data(comm.rank, 3), np.full(3, -7.0)), lambda b: b[1]):
        expected = fold(np.add, mine[:-1]) if comm.rank else np.full(3, -7.0)
        results.append(("exscan " + label, got, expected))
    inplace = data(comm.rank, 3)
    comm.Scan(MPI.IN_PLACE, inplace, op=MPI.MAX)
    results.append(("scan IN_PLACE", inplace, fold(np.maximum, mine)))
    return results


@case
def case_reduce_scatter(comm: Any) -> list[tuple[str, Any, Any]]:
    p, results = comm.size, []
    total = fold(np.add, _all(comm, 2 * p))
    for label, got in forms(comm, comm.Reduce_scatter_block, comm.Ireduce_scatter_block,
                            comm.Reduce_scatter_block_init,
                            lambda: (data(comm.rank, 2 * p), np.zeros(2)), lambda b: b[1]):
        results.append(("block " + label, got, total[2 * comm.rank:2 * comm.rank + 2]))
    counts = [r + 1 for r in range(p)]
    n = sum(counts)
    total = fold(np.add, _all(comm, n))
    start = sum(counts[:comm.rank])
    for label, got in forms(comm, lambda s, r: comm.Reduce_scatter(s, r, counts),
                            lambda s, r: comm.Ireduce_scatter(s, r, counts),
                            lambda s, r: comm.Reduce_scatter_init(s, r, counts),
                            lambda: (data(comm.rank, n), np.zeros(counts[comm.rank])),
                            lambda b: b[1]):
        results.append(("v " + label, got, total[start:start + counts[comm.rank]]))
    inplace = data(comm.rank, 2 * p)
    comm.Reduce_scatter_block(MPI.IN_PLACE, inplace)
    results.append(("block IN_PLACE", inplace[:2],
                    fold(np.add, _all(comm, 2 * p))[2 * comm.rank:2 * comm.rank + 2]))
    return results


@case
def case_gather_scatter(comm: Any) -> list[tuple[str, Any, Any]]:
    p, results = comm.size, []
    root = 0
    gathered = np.concatenate(_all(comm, 3))
    for label, got in forms(comm, lambda s, r: comm.Gather(s, r, root),
                            lambda s, r: comm.Igather(s, r, root),
                            lambda s, r: comm.Gather_init(s, r, root),
                            lambda: (data(comm.rank, 3), np.zeros(3 * p)), lambda b: b[1]):
        results.append(("gather " + label, got if comm.rank == root else gathered, gathered))
    for label, got in forms(comm, comm.Allgather, comm.Iallgather, comm.Allgather_init,
                            lambda: (data(comm.rank, 3), np.zeros(3 * p)), lambda b: b[1]):
        results.append(("allgather " + label, got, gathered))
    whole = data(7, 2 * p)
    for label, got in forms(comm, lambda s, r: comm.Scatter(s, r, root),
                            lambda s, r: comm.Iscatter(s, r, root),
                            lambda s, r: comm.Scatter_init(s, r, root),
                            lambda: (whole.copy(), np.zeros(2)), lambda b: b[1]):
        results.append(("scatter " + label, got, whole[2 * comm.rank:2 * comm.rank + 2]))
    inplace = np.zeros(3 * p)
    inplace[3 * comm.rank:3 * comm.rank + 3] = data(comm.rank, 3)
    comm.Allgather(MPI.IN_PLACE, inplace)
    results.append(("allgather IN_PLACE", inplace, gathered))
    return results


@case
def case_vector(comm: Any) -> list[tuple[str, Any, Any]]:
    p, results, root = comm.size, [], 0
    counts = [r + 1 for r in range(p)]
    displs = [3 * r + 1 for r in range(p)]  # gaps between the blocks
    size = displs[-1] + counts[-1] + 1
    expected = np.full(size, -1.0)
    for r in range(p):
        expected[displs[r]:displs[r] + counts[r]] = data(r, counts[r])
    mine = data(comm.rank, counts[comm.rank])
    for label, got in forms(comm, lambda s, r: comm.Gatherv(s, r, root),
                            lambda s, r: comm.Igatherv(s, r, root),
                            lambda s, r: comm.Gatherv_init(s, r, root),
                            lambda: (mine.copy(), [np.full(size, -1.0), (counts, displs),
                                                   MPI.DOUBLE]), lambda b: b[1][0]):
        results.append(("gatherv " + label, got if comm.rank == root else expected, expected))
    for label, got in forms(comm, comm.Allgatherv, comm.Iallgatherv, comm.Allgatherv_init,
                            lambda: (mine.copy(), [np.full(size, -1.0), counts, displs,
                                                   MPI.DOUBLE]), lambda b: b[1][0]):
        results.append(("allgatherv " + label, got, expected))
    for label, got in forms(comm, lambda s, r: comm.Scatterv(s, r, root),
                            lambda s, r: comm.Iscatterv(s, r, root),
                            lambda s, r: comm.Scatterv_init(s, r, root),
                            lambda: ([expected.copy(), (counts, displs), MPI.DOUBLE],
                                     np.zeros(counts[comm.rank])), lambda b: b[1]):
        results.append(("scatterv " + label, got, mine))
    # alltoallv: rank r sends j+1 elements to rank j, from gapped send blocks
    scounts = [j + 1 for j in range(p)]
    sdispls = [2 * sum(scounts[:j]) for j in range(p)]
    send = np.arange(2 * sum(scounts), dtype=np.float64) + 100 * comm.rank
    rcounts = [comm.rank + 1] * p
    rdispls = [(comm.rank + 2) * j for j in range(p)]
    rsize = rdispls[-1] + rcounts[-1]
    want = np.full(rsize, -1.0)
    for j in range(p):
        theirs = np.arange(2 * sum(scounts), dtype=np.float64) + 100 * j
        start = 2 * sum(scounts[:comm.rank])
        want[rdispls[j]:rdispls[j] + rcounts[j]] = theirs[start:start + comm.rank + 1]
    for label, got in forms(comm, comm.Alltoallv, comm.Ialltoallv, comm.Alltoallv_init,
                            lambda: ([send, (scounts, sdispls), MPI.DOUBLE],
                                     [np.full(rsize, -1.0), (rcounts, rdispls), MPI.DOUBLE]),
                            lambda b: b[1][0]):
        results.append(("alltoallv " + label, got, want))
    return results


@case
def case_vector_in_place(comm: Any) -> list[tuple[str, Any, Any]]:
    """IN_PLACE v-collectives whose blocks have gaps: the gaps keep what they held."""
    p, me, results, root = comm.size, comm.rank, [], 0
    counts = [r + 1 for r in range(p)]
    displs = [3 * r + 1 for r in range(p)]
    size = displs[-1] + counts[-1] + 1
    expected = np.full(size, -1.0)
    for r in range(p):
        expected[displs[r]:displs[r] + counts[r]] = data(r, counts[r])

    mine = data(me, counts[me])

    def own() -> np.ndarray:
        buf = np.full(size, -1.0)
        buf[displs[me]:displs[me] + counts[me]] = mine
        return buf

    for label, got in forms(comm, lambda b: comm.Allgatherv(MPI.IN_PLACE, b),
                            lambda b: comm.Iallgatherv(MPI.IN_PLACE, b),
                            lambda b: comm.Allgatherv_init(MPI.IN_PLACE, b),
                            lambda: ([own(), (counts, displs), MPI.DOUBLE],),
                            lambda b: b[0][0]):
        results.append(("allgatherv " + label, got, expected))
    for label, got in forms(comm, lambda b: comm.Gatherv(
                                MPI.IN_PLACE if me == root else mine, b, root),
                            lambda b: comm.Igatherv(
                                MPI.IN_PLACE if me == root else mine, b, root),
                            None, lambda: ([own(), (counts, displs), MPI.DOUBLE],),
                            lambda b: b[0][0]):
        results.append(("gatherv " + label, got if me == root else expected, expected))
    # alltoallv IN_PLACE: rank me's block for rank j (j + me + 1 elements) at rdispls[j]
    rcounts = [j + me + 1 for j in range(p)]
    rdispls = [sum(rcounts[:j]) + 2 * j for j in range(p)]  # a gap of 2 before each block
    rsize = rdispls[-1] + rcounts[-1] + 1

    def blocks(rank: int, round_: int) -> np.ndarray:
        """Rank ``rank``'s buffer before the call: block j holds what goes to rank j."""
        mine = [j + rank + 1 for j in range(p)]
        at = [sum(mine[:j]) + 2 * j for j in range(p)]
        buf = np.full(at[-1] + mine[-1] + 1, -1.0)
        for j in range(p):
            buf[at[j]:at[j] + mine[j]] = 1000 * round_ + 100 * rank + 10 * j + np.arange(mine[j])
        return buf

    def received(round_: int) -> np.ndarray:
        want = np.full(rsize, -1.0)
        for j in range(p):
            want[rdispls[j]:rdispls[j] + rcounts[j]] = \
                1000 * round_ + 100 * j + 10 * me + np.arange(rcounts[j])
        return want

    buf = blocks(me, 0)
    comm.Alltoallv(MPI.IN_PLACE, [buf, (rcounts, rdispls), MPI.DOUBLE])
    results.append(("alltoallv blocking", buf, received(0)))
    buf = blocks(me, 0)
    comm.Ialltoallv(MPI.IN_PLACE, [buf, (rcounts, rdispls), MPI.DOUBLE]).Wait()
    results.append(("alltoallv nonblocking", buf, received(0)))
    buf = blocks(me, 0)
    request = comm.Alltoallv_init(MPI.IN_PLACE, [buf, (rcounts, rdispls), MPI.DOUBLE])
    for round_ in range(2):  # each start reads the buffer as it is then
        buf[...] = blocks(me, round_)
        request.Start()
        request.Wait()
        results.append((f"alltoallv persistent start {round_}", buf.copy(), received(round_)))
    request.Free()
    return results


@case
def case_alltoall(comm: Any) -> list[tuple[str, Any, Any]]:
    p, results = comm.size, []
    expected = np.concatenate([data(j, 2 * p)[2 * comm.rank:2 * comm.rank + 2]
                               for j in range(p)])
    for label, got in forms(comm, comm.Alltoall, comm.Ialltoall, comm.Alltoall_init,
                            lambda: (data(comm.rank, 2 * p), np.zeros(2 * p)), lambda b: b[1]):
        results.append((label, got, expected))
    inplace = data(comm.rank, 2 * p)
    comm.Alltoall(MPI.IN_PLACE, inplace)
    results.append(("IN_PLACE", inplace, expected))
    return results


@case
def case_barrier_and_requests(comm: Any) -> list[tuple[str, Any, Any]]:
    comm.Barrier()
    comm.Ibarrier().Wait()
    a, b = np.zeros(2), np.zeros(2)
    requests = [comm.Iallreduce(data(comm.rank, 2), a), comm.Iallreduce(data(comm.rank, 2), b,
                                                                          MPI.MAX)]
    MPI.Request.Waitall(requests)
    nulls = [bool(r) for r in requests]
    c = np.zeros(2)
    pending = [comm.Iallreduce(data(comm.rank, 2), c)]
    index = MPI.Request.Waitany(pending)
    status = MPI.Status()
    flag = pending[0].Test(status)
    return [("Waitall sum", a, fold(np.add, _all(comm, 2))),
            ("Waitall max", b, fold(np.maximum, _all(comm, 2))),
            ("null after Waitall", nulls, [False, False]),
            ("Waitany", (index, c.tolist()), (0, fold(np.add, _all(comm, 2)).tolist())),
            ("Test on a null request", (flag, status.Get_source(), status.Get_tag()),
             (True, MPI.ANY_SOURCE, MPI.ANY_TAG)),
            ("Testall of none", MPI.Request.Testall([]), True)]


def _matrix(rank: int) -> np.ndarray:
    return np.array([[rank + 1.0, 1.0], [2.0, rank - 1.0]])


@case
def case_user_op(comm: Any) -> list[tuple[str, Any, Any]]:
    """A non-commutative (associative) operator: 2×2 matrix products, in rank order."""
    def matmul(inbuf: Any, inoutbuf: Any, datatype: Any) -> Any:
        if datatype is None:
            return inbuf @ inoutbuf
        a = np.frombuffer(inbuf, dtype=np.float64).reshape(-1, 2, 2)
        b = np.frombuffer(inoutbuf, dtype=np.float64).reshape(-1, 2, 2)
        b[...] = a @ b
        return None

    op = MPI.Op.Create(matmul, commute=False)
    got = np.zeros(4)
    comm.Allreduce(_matrix(comm.rank).reshape(-1), got, op=op)
    expected = fold(np.matmul, [_matrix(r) for r in range(comm.size)])
    obj = comm.allreduce(_matrix(comm.rank), op=op)
    flag = op.Is_commutative()
    op.Free()
    return [("buffers", got, expected.reshape(-1)), ("objects", obj, expected),
            ("commutative flag", (flag, MPI.SUM.Is_commutative()), (False, True))]


@case
def case_objects(comm: Any) -> list[tuple[str, Any, Any]]:
    p, r = comm.size, comm.rank
    objs = [{"rank": q, "items": list(range(q))} for q in range(p)]
    return [("bcast", comm.bcast(objs[0] if r == 0 else None, root=0), objs[0]),
            ("gather", comm.gather(objs[r], root=0), objs if r == 0 else None),
            ("scatter", comm.scatter(objs if r == 0 else None, root=0), objs[r]),
            ("allgather", comm.allgather(objs[r]), objs),
            ("alltoall", comm.alltoall([(r, j) for j in range(p)]), [(j, r) for j in range(p)]),
            ("reduce", comm.reduce(r + 1, op=MPI.PROD, root=0),
             fold(lambda x, y: x * y, range(1, p + 1)) if r == 0 else None),
            ("allreduce", comm.allreduce([r]), list(range(p))),
            ("allreduce MAX", comm.allreduce(r, op=MPI.MAX), p - 1),
            ("scan", comm.scan(r + 1), sum(range(1, r + 2))),
            ("exscan", comm.exscan(r + 1), sum(range(1, r + 1)) if r else None),
            ("barrier", comm.barrier(), None)]


@case
def case_communicators(comm: Any) -> list[tuple[str, Any, Any]]:
    p, r = comm.size, comm.rank
    dup = comm.Dup()
    compare = MPI.Comm.Compare(comm, dup) if hasattr(MPI.Comm, "Compare") else None
    odd = comm.Split(r % 2, key=-r)
    odd_ranks = [q for q in range(p) if q % 2 == r % 2]
    got_total = odd.allreduce(r)
    none = comm.Split(MPI.UNDEFINED if r == 0 else 1, key=r)
    group = comm.Get_group()
    sub = group.Incl(list(range(p - 1, -1, -1)))
    created = comm.Create(sub)
    created_rank = created.Get_rank()
    shared = comm.Split_type(MPI.COMM_TYPE_SHARED)
    results = [("Compare dup", compare, MPI.CONGRUENT),
               ("Compare self", comm.Compare(comm), MPI.IDENT),
               ("Split size", odd.Get_size(), len(odd_ranks)),
               ("Split order by key", odd.Get_rank(), sorted(odd_ranks, reverse=True).index(r)),
               ("Split allreduce", got_total, sum(odd_ranks)),
               ("Split UNDEFINED", bool(none), r != 0),
               ("Group size/rank", (group.Get_size(), group.Get_rank()), (p, r)),
               ("Create reversed", created_rank, p - 1 - r),
               ("Translate_ranks", MPI.Group.Translate_ranks(sub, [0], group), [p - 1]),
               ("Group compare", MPI.Group.Compare(sub, group),
                MPI.IDENT if p == 1 else MPI.SIMILAR),
               ("Split_type shared", shared.Get_size(), p)]
    info = MPI.Info.Create()
    asked = [comm.Split_type(MPI.COMM_TYPE_HW_GUIDED, info=info)]  # no level asked: COMM_NULL
    info.Set("mpi_hw_resource_type", "mpi_numa")  # a level collops does not know: COMM_NULL
    asked.append(comm.Split_type(MPI.COMM_TYPE_HW_GUIDED, info=info))
    info.Set("mpi_hw_resource_type", "mpi_shared_memory")
    asked.append(comm.Split_type(MPI.COMM_TYPE_HW_GUIDED if r == 0 else MPI.UNDEFINED,
                                 key=-r, info=info))
    guided = asked[-1]
    results.append(("Split_type HW_GUIDED", ([bool(c) for c in asked],
                                             guided.Get_size() if guided else None),
                    ([False, False, r == 0], 1 if r == 0 else None)))
    unguided = comm.Split_type(MPI.COMM_TYPE_HW_UNGUIDED, info=MPI.Info.Create())
    results.append(("Split_type HW_UNGUIDED on one node", unguided == MPI.COMM_NULL, True))
    if guided:
        guided.Free()
    evens = group.Range_incl([(0, p - 1, 2)])
    if r % 2 == 0:  # collective over the group's members only, over the comm it came from
        made = MPI.Intracomm.Create_from_group(evens, stringtag="cases")
        results.append(("Create_from_group", (made.Get_size(), made.allreduce(r)),
                        (len(range(0, p, 2)), sum(range(0, p, 2)))))
        made.Free()
    alone = MPI.Intracomm.Create_from_group(MPI.COMM_SELF.Get_group())
    results.append(("Create_from_group of COMM_SELF's group",
                     (alone.Get_size(), MPI.Comm.Compare(alone, MPI.COMM_SELF)),
                     (1, MPI.CONGRUENT)))
    alone.Free()
    parent = MPI.Comm.Get_parent()
    results.append(("Get_parent", (isinstance(parent, MPI.Intercomm), parent == MPI.COMM_NULL,
                                   MPI.Intercomm() == MPI.COMM_NULL), (True, True, True)))
    for c in (dup, odd, created, shared):
        c.Free()
    if none:
        none.Free()
    results.append(("freed is null", bool(dup), False))
    return results


def run_cases(comm: Any) -> dict[str, list[tuple[str, Any, Any]]]:
    """Every case on this rank: name -> its triples (an exception's text where it raised)."""
    from collops.facade.comm import wrap
    facade = wrap(comm)
    out: dict[str, Any] = {}
    for name, fn in CASES.items():
        try:
            out[name] = fn(facade)
        except Exception as exc:  # reported by the test of that case, with its rank
            import traceback
            out[name] = f"rank {comm.rank}: {exc!r}\n{traceback.format_exc()}"
    return out


from . import (  # noqa: E402, F401  (register their cases)
    cases_alltoallw,
    cases_datatypes,
    cases_p2p,
    cases_requests,
    cases_specs,
)
