"""Mismatches involving ``mpi_native``'s calls that do not wait for every rank's entry on the
node's board: a small bcast's root and a small 2-rank reduce's non-root (they enter MPI at
once and check the others' entries at their next call, `collops.mpi.board`) and a barrier
(its agreement is the barrier).

Every case first repeats the matched calls, so each rank's calls run bound (the compiled
route, where the extension runs), then makes the mismatched call ``bad``, then two more calls
(``next``, ``after``), recording for each rank what each of the three raised. No call has a
time limit (a limit takes the general route, where nobody defers); a hang is the harness's
timeout.

Usage: ``deferred_mismatch.py CASE SIZE`` (SIZE: float64 items). Prints one JSON line per
rank: ``{"rank": r, "compiled": bool, "results": [[step, error type, message], ...]}``.
"""

import json
import sys

import numpy as np

import collops
from collops.mpi import compiled

WARM = 4


def bcast(comm, n, root, dtype=np.float64):
    """A broadcast of ``n`` items from ``root`` into a fresh array."""
    x = np.full(n, float(comm.rank + 1), dtype)
    return comm.bcast(x, root, out=None if comm.rank == root else np.empty(n, dtype))


def allreduce(comm, n, op="sum"):
    return comm.allreduce(np.full(n, 1.0), op, out=np.empty(n))


#: case -> (warm-up calls, the mismatched call of ``rank`` of ``size``)
CASES = {
    # the root broadcasts, the others reduce
    "kind": (lambda c, n: (bcast(c, n, 0), allreduce(c, n)),
             lambda c, n: bcast(c, n, 0) if c.rank == 0 else allreduce(c, n)),
    # every rank names itself the root (rank 0, root 0, defers; the others wait)
    "root": (lambda c, n: [bcast(c, n, r) for r in reversed(range(c.size))],
             lambda c, n: bcast(c, n, c.rank)),
    # the last rank names another root (root 0 defers, rank 1 sees two roots)
    "third": (lambda c, n: [bcast(c, n, r) for r in reversed(range(c.size))],
              lambda c, n: bcast(c, n, 1 if c.rank == c.size - 1 else 0)),
    # the readers' out arrays hold another dtype (float32): the root's envelope says float64
    "dtype": (lambda c, n: bcast(c, n, 0),
              lambda c, n: bcast(c, n, 0, np.float64 if c.rank == 0 else np.float32)),
    # rank 1 reduces to root 0 (on 2 ranks it defers), rank 0 allreduces
    "reduce": (lambda c, n: (c.reduce(np.ones(n), "sum", 0, out=np.empty(n) if c.rank == 0
                                      else None), allreduce(c, n)),
               lambda c, n: allreduce(c, n) if c.rank == 0 else c.reduce(np.ones(n), "sum", 0)),
    # a barrier against a reduction
    "barrier": (lambda c, n: (c.barrier(), allreduce(c, n)),
                lambda c, n: c.barrier() if c.rank == 0 else allreduce(c, n)),
    # the reductions' operators differ (a control: nobody defers, the communicator lives)
    "op": (lambda c, n: (allreduce(c, n), allreduce(c, n, "max")),
           lambda c, n: allreduce(c, n, "sum" if c.rank == 0 else "max")),
}


def main():
    case, n = sys.argv[1], int(sys.argv[2])
    comm = collops.init()
    warm, bad = CASES[case]
    for _ in range(WARM):
        warm(comm, n)
    comm.barrier()  # every entry of the warm-up checked: a root's next bcast defers
    results = []
    steps = (("bad", lambda: bad(comm, n)), ("next", lambda: allreduce(comm, 1)),
             ("after", lambda: comm.barrier()))
    for step, run in steps:
        try:
            run()
            results.append([step, None, ""])
        except collops.CollopsError as exc:
            results.append([step, type(exc).__name__, str(exc)])
    print(json.dumps({"rank": comm.rank, "compiled": compiled.available(
        comm.transport._MPI), "results": results}), flush=True)


if __name__ == "__main__":
    main()
