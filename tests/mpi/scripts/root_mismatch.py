"""Ranks disagree on the root of each rooted collective, small and large: every rank believes
itself the root (the default scenario, with MPI's own collectives under automatic selection
and with forced schedules), or, on 3 ranks, nobody names itself (``no root``: rank 0 names
rank 1, the others rank 0) or a third rank names another root (``a third rank``: rank 2 is
the root for all but rank 1, which names rank 0). Each call must raise `CollectiveMismatch`
naming both roots on every rank, and the communicator stays usable.

Usage: ``root_mismatch.py [SCENARIO]``. Prints one JSON line per rank: ``{"rank": r,
"results": [[collective, size, algorithm, error type, message], ...], "after": sum of a
final allreduce}``.
"""

import json
import sys

import numpy as np

import collops

CALLS = ("bcast", "scatter", "scatterv", "gather", "reduce")
SIZES = (1, 1 << 20)  # float64 items: 8 B and 8 MiB per block
ALGORITHMS = (None, "schedule")
#: the schedule forced on each collective when ALGORITHMS says "schedule"
SCHEDULES = {"bcast": "linear", "scatter": "linear", "scatterv": "linear", "gather": "linear",
             "reduce": "binomial"}
#: the root each rank names, by scenario (None: its own rank)
SCENARIOS = {"each its own": None, "no root": (1, 0, 0), "a third rank": (2, 0, 2)}


def root_of(scenario, rank):
    """The root ``rank`` names in ``scenario``."""
    roots = SCENARIOS[scenario]
    return rank if roots is None else roots[rank]


def call(comm, collective, n, algorithm, root):
    p, me = comm.size, comm.rank
    kw = {} if algorithm is None else {"algorithm": SCHEDULES[collective]}
    block, whole = np.full(n, float(me)), np.full(n * p, float(me))
    if collective == "bcast":
        return comm.bcast(block, root, timeout=30, **kw)
    if collective == "scatter":
        return comm.scatter(whole, root, timeout=30, **kw)
    if collective == "scatterv":
        return comm.scatterv(whole, [n] * p, root, timeout=30, **kw)
    if collective == "gather":
        return comm.gather(block, root, timeout=30, **kw)
    return comm.reduce(block, root=root, timeout=30, **kw)


def main():
    comm = collops.init()
    scenario = sys.argv[1] if len(sys.argv) > 1 else "each its own"
    root = root_of(scenario, comm.rank)
    results = []
    for algorithm in ALGORITHMS if scenario == "each its own" else (None,):
        for n in SIZES:
            for collective in CALLS:
                try:
                    call(comm, collective, n, algorithm, root)
                    results.append([collective, n, algorithm, None, ""])
                except collops.CollopsError as exc:
                    results.append([collective, n, algorithm, type(exc).__name__, str(exc)])
    after = float(comm.allreduce(np.ones(1))[0])
    print(json.dumps({"rank": comm.rank, "results": results, "after": after}), flush=True)


if __name__ == "__main__":
    main()
