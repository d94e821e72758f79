"""collops features over MPI, checked on every rank under mpiexec.

`collops.init()` picks MPI by itself; node detection; mpi_native offered and chosen; its
builder refuses to make a schedule; sub-communicators; concurrent non-blocking calls waited
in reverse order (more of them than the transport has MPI communicators per collops one);
MINLOC on MPI's own pair type and on a user-defined operator; the user's MPI messages on
COMM_WORLD untouched by collops traffic. Each rank prints ``{"rank": r, "passed": [...]}``
or ``{"rank": r, "error": "..."}``.
"""

import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import collops  # noqa: E402
from collops.algorithms import algorithms, get_algorithm, make_spec  # noqa: E402
from collops.errors import ScheduleError  # noqa: E402
from collops.mpi.native import mpi_reduction  # noqa: E402

passed = []


def check(name):
    def record(fn):
        fn()
        passed.append(name)
        return fn
    return record


def main(comm):
    me, p = comm.rank, comm.size

    @check("init picks mpi")
    def _():
        assert comm.transport_name == "mpi" and p == MPI.COMM_WORLD.size
        caps = comm.transport.capabilities()
        assert caps.node_of_rank == (0,) * p, caps.node_of_rank  # one host
        assert "mpi" in caps.resources

    @check("mpi_native offered and chosen")
    def _():
        assert all(any(a.name == "mpi_native" for a in algorithms(c))
                   for c in collops.COLLECTIVES)
        x = np.arange(10.0) * (me + 1)
        np.testing.assert_array_equal(comm.allreduce(x), np.arange(10.0) * p * (p + 1) / 2)
        assert comm.last_algorithm == "mpi_native", comm.last_algorithm

    @check("no schedule from mpi_native")
    def _():
        alg = get_algorithm("bcast", "mpi_native")
        try:
            alg.build(0, make_spec("bcast", p, count=4))
        except ScheduleError as exc:
            assert "not a schedule" in str(exc)
        else:
            raise AssertionError("building mpi_native's schedule did not raise")

    @check("sub-communicators")
    def _():
        half = comm.split(me % 2, key=-me)
        members = [r for r in range(p) if r % 2 == me % 2][::-1]
        assert half.rank == members.index(me)
        for alg in ("mpi_native", None, "ring"):
            got = half.allreduce(np.full(3, me, np.int64), algorithm=alg)
            np.testing.assert_array_equal(got, np.full(3, sum(members)))
            gathered = half.allgather(np.array([me]), algorithm=alg if alg != "ring" else None)
            np.testing.assert_array_equal(gathered, members)
        twin = comm.dup()
        got = twin.reduce_scatter_block(np.arange(2 * p, dtype=np.int32), algorithm="mpi_native")
        np.testing.assert_array_equal(got, np.arange(2 * me, 2 * me + 2) * p)

    @check("in-place allgather and gather (MPI_IN_PLACE)")
    def _():
        for n in (3, 70_001):
            expected = np.concatenate([np.arange(n) * (r + 2.0) for r in range(p)])
            out = np.zeros(n * p)
            out[me * n:(me + 1) * n] = np.arange(n) * (me + 2.0)
            got = comm.allgather(out[me * n:(me + 1) * n], out=out, algorithm="mpi_native")
            np.testing.assert_array_equal(got, expected)
            out = np.zeros(n * p)
            out[me * n:(me + 1) * n] = np.arange(n) * (me + 2.0)
            mine = out[me * n:(me + 1) * n] if me == 0 else np.arange(n) * (me + 2.0)
            got = comm.gather(mine, 0, out=out if me == 0 else None, algorithm="mpi_native")
            if me == 0:
                np.testing.assert_array_equal(got, expected)

    @check("in-place allreduce and reduce (MPI_IN_PLACE)")
    def _():
        for n in (3, 70_001):
            expected = sum(np.arange(n) * (r + 2.0) for r in range(p))
            x = np.arange(n) * (me + 2.0)
            got = comm.allreduce(x, "sum", out=x, algorithm="mpi_native")
            assert got.ctypes.data == x.ctypes.data
            np.testing.assert_array_equal(x, expected)
            x = np.arange(n) * (me + 2.0)
            got = comm.reduce(x, "sum", 1 % p, out=x if me == 1 % p else None,
                              algorithm="mpi_native")
            if me == 1 % p:
                np.testing.assert_array_equal(got, expected)

    @check("concurrent non-blocking calls")
    def _():
        for i in range(12):
            big = np.arange(20_000, dtype=np.float64) + i if me == 0 else None
            r1 = comm.ibcast(big, algorithm="mpi_native")
            r2 = comm.iallreduce(np.full(5, me + i), algorithm="mpi_native")
            r3 = comm.iallgather(np.array([me, i]), algorithm="ring")
            r4 = comm.ialltoall(np.arange(p) + 10 * me, algorithm="mpi_native")
            np.testing.assert_array_equal(r4.wait(), np.arange(p) * 10 + me)
            np.testing.assert_array_equal(r3.wait(), np.array([[r, i] for r in range(p)])
                                          .reshape(-1))
            np.testing.assert_array_equal(r2.wait(), np.full(5, p * (p - 1) // 2 + p * i))
            np.testing.assert_array_equal(r1.wait(), np.arange(20_000, dtype=np.float64) + i)

    @check("MINLOC on MPI's pair type and on a user operator")
    def _():
        for value, index, builtin in ((np.float32, np.int32, True),
                                      (np.float64, np.int64, False)):
            dtype = collops.pair_dtype(value, index)
            _, mpi_op = mpi_reduction(MPI, collops.MINLOC, dtype)
            assert (mpi_op == MPI.MINLOC) == builtin, (dtype, mpi_op)
            values = (np.arange(6) * (me + 1)) % 4
            mine = collops.pairs(values.astype(value), np.full(6, me, index))
            got = comm.allreduce(mine, collops.MINLOC, algorithm="mpi_native")
            table = np.array([(np.arange(6) * (r + 1)) % 4 for r in range(p)])
            np.testing.assert_array_equal(got["value"], table.min(axis=0))
            np.testing.assert_array_equal(got["index"], table.argmin(axis=0))

    @check("user messages untouched")
    def _():
        world = MPI.COMM_WORLD
        if p > 1 and me == 0:
            world.send("user's message", dest=1, tag=0)
        comm.allreduce(np.ones(3), algorithm="recursive_doubling")
        comm.bcast(np.ones(50_000) if me == 0 else None, algorithm="binomial")
        if p > 1 and me == 1:
            assert world.recv(source=0, tag=0) == "user's message"


comm = collops.init()
try:
    main(comm)
    print(json.dumps({"rank": comm.rank, "passed": passed}), flush=True)
except Exception as exc:
    print(json.dumps({"rank": comm.rank, "passed": passed,
                      "error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"}),
          flush=True)
