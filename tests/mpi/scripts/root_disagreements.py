"""Three ranks disagree on each rooted call's root in two ways — nobody names itself (rank 0
names rank 1, the others rank 0), or rank 2 is the root for all but rank 1, which names rank
0 — small and large: every rank's call must raise `CollectiveMismatch` naming both roots,
and the communicator stays usable.

Prints one JSON line per rank: ``{"rank": r, "results": [[scenario, collective, size, error
type, message], ...], "after": sum of a final allreduce}``.
"""

import json

import numpy as np

import collops

CALLS = ("bcast", "scatter", "scatterv", "gather", "reduce")
SIZES = (1, 1 << 20)  # float64 items: 8 B and 8 MiB per block
#: the root each rank names, by scenario
ROOTS = {"no root": (1, 0, 0), "a third rank": (2, 0, 2)}


def call(comm, collective, n, root):
    p, me = comm.size, comm.rank
    block, whole = np.full(n, float(me)), np.full(n * p, float(me))
    if collective == "bcast":
        return comm.bcast(block, root, timeout=30)
    if collective == "scatter":
        return comm.scatter(whole, root, timeout=30)
    if collective == "scatterv":
        return comm.scatterv(whole, [n] * p, root, timeout=30)
    if collective == "gather":
        return comm.gather(block, root, timeout=30)
    return comm.reduce(block, root=root, timeout=30)


def main():
    comm = collops.init()
    results = []
    for scenario, roots in ROOTS.items():
        for n in SIZES:
            for collective in CALLS:
                try:
                    call(comm, collective, n, roots[comm.rank])
                    results.append([scenario, collective, n, None, ""])
                except collops.CollopsError as exc:
                    results.append([scenario, collective, n, type(exc).__name__, str(exc)])
    after = float(comm.allreduce(np.ones(1))[0])
    print(json.dumps({"rank": comm.rank, "results": results, "after": after}), flush=True)


if __name__ == "__main__":
    main()
