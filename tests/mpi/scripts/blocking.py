"""Blocking ``mpi_native`` calls run MPI's blocking collective, under mpiexec.

``python blocking.py``: every rank makes blocking calls of each collective (several times,
so the whole-call binding is used too) with ``mpi_native`` and checks them against numpy;
it counts the non-blocking executions started meanwhile (there must be none: a blocking call
posts no MPI request to poll), then makes one non-blocking call (one execution). Then rank 0
makes a call blocking that rank 1 makes non-blocking (MPI's blocking and non-blocking
collectives never match), and a call with another count: both must raise
`CollectiveMismatch` before MPI moves a byte, and the communicator stays usable.
A broadcast too large for its envelope posts on the node's fingerprint board twice the first
time at a root (its envelope's entry and its data phase's, whose algorithm a rank may choose
otherwise), then once when every rank passes ``out`` (the data goes in the envelope's call):
``board_entries`` counts the entries of repeated 40,000-element broadcasts into ``out``, each
checked against numpy.

Each rank prints ``{"rank": r, "checked": n, "executions": [blocking, non-blocking],
"results": [[case, error, message], ...], "after": value, "board_entries": [calls,
entries], "bound_bcast": whether small repeated broadcasts matched numpy, bound}``.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import collops  # noqa: E402
from collops.mpi import blocking, board, native  # noqa: E402

started = [0]
entries = set()  # the keys (call and phase) posted on a board
_enter, _post = board.Board.enter, board.Board.post


def counting_enter(self, key, *args, **kwargs):
    entries.add(key)
    return _enter(self, key, *args, **kwargs)


def counting_post(self, key, *args, **kwargs):
    entries.add(key)
    return _post(self, key, *args, **kwargs)


board.Board.enter, board.Board.post = counting_enter, counting_post
_run_known = blocking.BlockingCall.run_known


def counting_run_known(self, signature, envelope_send, envelope_recv, data, seq, timeout):
    # its entry is posted by the compiled runner where there is one, past `Board.enter`
    ended = _run_known(self, signature, envelope_send, envelope_recv, data, seq, timeout)
    if ended is not None:
        entries.add(board.call_key(seq, 0, True))
    return ended


blocking.BlockingCall.run_known = counting_run_known
_init = native.NativeExecution.__init__


def counting_init(self, *args, **kwargs):
    started[0] += 1
    _init(self, *args, **kwargs)


native.NativeExecution.__init__ = counting_init


def mine(rank, n, i):
    return (np.arange(n) % 13 + 100 * rank + i).astype(np.float64)


def check_every_collective(comm):
    """Blocking calls of each collective against numpy; the number of checks made."""
    me, p, checked = comm.rank, comm.size, 0
    kw = {"algorithm": "mpi_native"}
    for n in (1, 1000, 40_000):
        for i in range(3):  # the later calls go through the whole-call binding
            everyone = [mine(r, n, i) for r in range(p)]
            x = everyone[me]
            assert np.array_equal(comm.allreduce(x, **kw), sum(everyone))
            assert np.array_equal(comm.allreduce(x), sum(everyone))  # automatic selection
            got = comm.reduce(x, root=p - 1, **kw)
            assert (got is None) if me != p - 1 else np.array_equal(got, sum(everyone))
            assert np.array_equal(comm.allgather(x, **kw), np.concatenate(everyone))
            assert np.array_equal(comm.allgather(x), np.concatenate(everyone))
            blocks = np.concatenate([mine(me, n, d) for d in range(p)])
            want = np.concatenate([mine(r, n, me) for r in range(p)])
            assert np.array_equal(comm.alltoall(blocks, **kw), want)
            assert np.array_equal(comm.bcast(x if me == 1 else None, 1, **kw), everyone[1])
            assert np.array_equal(comm.bcast(x if me == 0 else None), everyone[0])
            out = x.copy()
            comm.allreduce(out, out=out, **kw)  # in place: MPI_IN_PLACE
            assert np.array_equal(out, sum(everyone))
            comm.barrier(**kw)
            comm.barrier()
            checked += 9
    return checked


def large_bcasts(comm, calls):
    """``calls`` broadcasts too large for the envelope, into ``out``, against numpy: the
    board entries they made."""
    comm.set_algorithm("bcast", "mpi_native")
    out = np.empty(40_000)
    before = len(entries)
    for i in range(calls):
        want = mine(i % comm.size, 40_000, i)
        got = comm.bcast(want if comm.rank == i % comm.size else None, i % comm.size,
                         out=out)
        assert np.array_equal(got, want)
    comm.set_algorithm("bcast", None)
    return len(entries) - before


def small_bcasts(comm):
    """Repeated small broadcasts (the whole-call binding) into ``out``, into a new array and
    in place at the root, changing signature now and then: whether each matched numpy and
    the last ran bound to ``mpi_native``."""
    comm.set_algorithm("bcast", "mpi_native")
    ok = True
    for i in range(8):
        for shape in ((1,), (3, 2), (1,)):
            want = mine(0, 6, i)[: int(np.prod(shape))].reshape(shape)
            out = np.empty(shape) if i % 2 else None
            if comm.rank == 0:
                x = want.copy()
                got = comm.bcast(x, 0, out=x if i % 4 == 0 else out)
                ok &= np.shares_memory(got, x) == (i % 4 == 0)  # in place: x is out
            else:
                got = comm.bcast(None, 0, out=out)
            ok &= got.shape == shape and np.array_equal(got, want)
            ok &= out is None or np.shares_memory(got, out)
    ok &= comm.bound_calls().get("bcast") == "mpi_native"
    comm.set_algorithm("bcast", None)
    return bool(ok)


def main():
    comm = collops.init()
    me = comm.rank
    checked = check_every_collective(comm)
    bcasts = 6
    board_entries = [bcasts, large_bcasts(comm, bcasts)]
    bound_bcast = small_bcasts(comm)
    blocking = started[0]
    got = comm.iallreduce(np.ones(3), algorithm="mpi_native").wait()
    assert np.array_equal(got, np.full(3, comm.size))
    executions = [blocking, started[0] - blocking]
    results = []
    cases = {
        "blocking vs non-blocking": lambda: (
            comm.allreduce(np.ones(4), algorithm="mpi_native") if me == 0
            else comm.iallreduce(np.ones(4), algorithm="mpi_native").wait()),
        "count": lambda: comm.allreduce(np.ones(4 if me == 0 else 8), algorithm="mpi_native"),
    }
    for case, call in cases.items():
        try:
            call()
            results.append([case, None, ""])
        except collops.CollopsError as exc:
            results.append([case, type(exc).__name__, str(exc)])
    after = comm.allreduce(np.ones(1), algorithm="mpi_native")
    print(json.dumps({"rank": me, "checked": checked, "executions": executions,
                      "results": results, "after": float(after[0]),
                      "board_entries": board_entries, "bound_bcast": bound_bcast}),
          flush=True)
    MPI.COMM_WORLD.Barrier()


main()
