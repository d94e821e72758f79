"""Repeated blocking ``mpi_native`` calls through the compiled whole call, under mpiexec.

``python compiled_calls.py``: every rank makes repeated blocking calls of each collective the
compiled runner covers (barrier, bcast, allreduce, reduce, allgather, alltoall, gather, scan,
exscan, reduce_scatter_block), with ``mpi_native`` set on the communicator, over dtypes with
MPI's built-in types and operators and without (float16 and a non-commutative user
operator: a user-defined ``MPI.Op``), into a new array and into ``out``, and checks each
result against numpy. Then the routes the compiled runner hands back to Python: calls with
a time limit, a call made while a non-blocking one is in flight; calls that ask for
``mpi_native`` by name (bound under their own key); and a mismatch between two
bound calls (one rank's allreduce against the others' allgather), which must raise
`CollectiveMismatch` on every rank before MPI's call, the communicator staying usable.
Last, `BlockingCall.failed` (what the runner calls with an error code MPI returns) and
`_native.load`'s refusals: handles of another MPI, a library not loaded.

Each rank prints ``{"rank": r, "checked": n, "compiled": {collective: whether its bound
call is the compiled runner's}, "named": whether allgathers asking for mpi_native by name
matched numpy and ran compiled, "mismatch": [error, message], "after": value,
"failed": [error, message], "refused": [...], "libmpi": number of libmpi files mapped}``.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import collops  # noqa: E402

try:
    from collops.mpi import _native  # noqa: E402
except ImportError:
    _native = None

FIRST = collops.Op(lambda a, b: a.copy(), commutative=False)  # the lower rank's value
DTYPES = (np.float64, np.int32, np.float16)


def values(rank, n, i, dtype):
    return ((np.arange(n) % 7) + 3 * rank + i).astype(dtype)


def is_compiled(comm, collective):
    return _native is not None and comm.bound_route(collective) == "compiled"


def check_collectives(comm, compiled):
    """Each collective, repeated, against numpy; the number of checks."""
    me, p, checked = comm.rank, comm.size, 0
    for c in ("barrier", "bcast", "allreduce", "reduce", "allgather", "alltoall", "gather",
              "scan", "exscan", "reduce_scatter_block"):
        comm.set_algorithm(c, "mpi_native")
    for dtype in DTYPES:
        for n in (1, 5):
            for op in ("sum", "max", FIRST):
                fold = {"sum": lambda xs, dtype=dtype: np.sum(xs, axis=0, dtype=dtype),
                        "max": lambda xs: np.max(xs, axis=0),
                        FIRST: lambda xs: xs[0]}[op]
                for i in range(6):  # from the second call on, the whole-call binding
                    everyone = np.array([values(r, n, i, dtype) for r in range(p)])
                    x = everyone[me]
                    out = np.empty_like(x) if i % 2 else None
                    got = comm.allreduce(x, op, out=out)
                    assert np.array_equal(got, fold(everyone)), (dtype, n, op, i, got)
                    assert out is None or got is out
                    got = comm.reduce(x, op, root=p - 1, out=out if me == p - 1 else None)
                    assert (got is None) if me != p - 1 else np.array_equal(
                        got, fold(everyone))
                    got = comm.scan(x, op, out=out)
                    assert np.array_equal(got, fold(everyone[: me + 1]))
                    got = comm.exscan(x, op)
                    assert me == 0 or np.array_equal(got, fold(everyone[:me]))
                    blocks = np.concatenate([values(me, n, d, dtype) for d in range(p)])
                    got = comm.reduce_scatter_block(blocks, op)
                    want = fold(np.array([np.concatenate([values(r, n, d, dtype)
                                                          for d in range(p)])
                                          for r in range(p)]))
                    assert np.array_equal(got, want[me * n: (me + 1) * n])
                    checked += 5
                    compiled["allreduce"] = is_compiled(comm, "allreduce")
                    compiled["scan"] = is_compiled(comm, "scan")
                    compiled["reduce_scatter_block"] = is_compiled(comm,
                                                                   "reduce_scatter_block")
                    if me == p - 1:
                        compiled["reduce"] = is_compiled(comm, "reduce")
                    if me:
                        compiled["exscan"] = is_compiled(comm, "exscan")
            for i in range(6):
                everyone = np.array([values(r, n, i, dtype) for r in range(p)])
                x = everyone[me]
                out = np.empty(p * n, dtype) if i % 2 else None
                got = comm.allgather(x, out=out)
                assert np.array_equal(got, everyone.reshape(-1)) and (out is None or got is out)
                got = comm.gather(x, root=0)
                assert (got is None) if me else np.array_equal(got, everyone.reshape(-1))
                blocks = np.concatenate([values(me, n, d, dtype) for d in range(p)])
                got = comm.alltoall(blocks, out=out)
                want = np.concatenate([values(r, n, me, dtype) for r in range(p)])
                assert np.array_equal(got, want) and (out is None or got is out)
                root = (i // 3) % p  # three calls from each root: bound from the second
                want = everyone[root]
                if me == root:
                    mine = want.copy()
                    got = comm.bcast(mine, root, out=mine if i % 3 == 0 else out[:n]
                                     if out is not None else None)
                    assert np.shares_memory(got, mine) == (i % 3 == 0)  # in place
                else:
                    got = comm.bcast(None, root, out=None if out is None else out[:n])
                assert np.array_equal(got, want), (me, root, got, want)
                comm.barrier()
                checked += 5
                for c in ("allgather", "alltoall", "barrier"):
                    compiled[c] = is_compiled(comm, c)
                if me == 0:
                    compiled["gather"] = is_compiled(comm, "gather")
                if i % 3:
                    compiled["bcast"] = is_compiled(comm, "bcast")
    return checked


def handed_back(comm):
    """The routes handed back to Python: a time limit, a call in flight; the checks made."""
    me, p, checked = comm.rank, comm.size, 0
    x = values(me, 3, 0, np.float64)
    want = sum(values(r, 3, 0, np.float64) for r in range(p))
    for _ in range(4):
        assert np.array_equal(comm.allreduce(x, timeout=30), want)
        request = comm.iallreduce(2 * x, algorithm="mpi_native")
        assert np.array_equal(comm.allreduce(x), want)  # bound, with a call in flight
        assert np.array_equal(request.wait(), 2 * want)
        checked += 3
    return checked


def named(comm):
    """Repeated allgathers asking for ``mpi_native`` by name: whether they matched numpy and
    the last ran compiled, bound under (collective, algorithm)."""
    me, p, ok = comm.rank, comm.size, True
    for i in range(4):
        everyone = np.array([values(r, 2, i, np.int64) for r in range(p)])
        ok &= np.array_equal(comm.allgather(everyone[me], algorithm="mpi_native"),
                             everyone.reshape(-1))
    return bool(ok and _native is not None
                and comm.bound_route("allgather", "mpi_native") == "compiled")


def mismatch(comm):
    """Rank 0's bound allreduce against the others' bound allgather."""
    x = np.ones(1)
    try:
        if comm.rank == 0:
            comm.allreduce(x)
        else:
            comm.allgather(x)
    except collops.CollopsError as exc:
        return [type(exc).__name__, str(exc)]
    return [None, ""]


def main():
    comm = collops.init()
    compiled = {}
    checked = check_collectives(comm, compiled)
    checked += handed_back(comm)
    by_name = named(comm)
    got = mismatch(comm)
    after = comm.allreduce(np.ones(1))
    runner = comm._bound_calls["allreduce"][4].compiled
    try:
        runner.failed(7, MPI.ERR_OTHER)
        failed = [None, ""]
    except collops.CollopsError as exc:
        failed = [type(exc).__name__, str(exc)]
    refused = []
    if _native is not None:
        size, world = MPI._sizeof(MPI.Comm), MPI.COMM_WORLD.handle
        byte, double, total = MPI.BYTE.handle, MPI.DOUBLE.handle, MPI.SUM.handle
        refused = [_native.load(MPI.__file__, size, world, double, double, total),
                   _native.load(MPI.__file__, size + 4, world, byte, double, total),
                   _native.load("/nonexistent/libmpi.so.12", size, world, byte, double,
                                total)]
    with open("/proc/self/maps") as maps:
        libmpi = {line.split()[-1] for line in maps if "/libmpi" in line}
    print(json.dumps({"rank": comm.rank, "checked": checked, "compiled": compiled,
                      "named": by_name, "mismatch": got, "after": float(after[0]), "failed": failed,
                      "refused": refused, "libmpi": sorted(libmpi)}), flush=True)
    MPI.COMM_WORLD.Barrier()


main()
