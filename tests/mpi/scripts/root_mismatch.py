"""Every rank believes itself the root of each rooted collective, small and large, with MPI's
own collectives (automatic selection) and with forced schedules: each call must raise
`CollectiveMismatch` naming both roots on every rank, and the communicator stays usable.

Prints one JSON line per rank: ``{"rank": r, "results": [[collective, size, algorithm,
error type, message], ...], "after": sum of a final allreduce}``.
"""

import json

import numpy as np

import collops

CALLS = ("bcast", "scatter", "scatterv", "gather", "reduce")
SIZES = (1, 1 << 20)  # float64 items: 8 B and 8 MiB per block
ALGORITHMS = (None, "schedule")
#: the schedule forced on each collective when ALGORITHMS says "schedule"
SCHEDULES = {"bcast": "linear", "scatter": "linear", "scatterv": "linear", "gather": "linear",
             "reduce": "binomial"}


def call(comm, collective, n, algorithm):
    p, me = comm.size, comm.rank
    kw = {} if algorithm is None else {"algorithm": SCHEDULES[collective]}
    block, whole = np.full(n, float(me)), np.full(n * p, float(me))
    if collective == "bcast":
        return comm.bcast(block, me, timeout=30, **kw)
    if collective == "scatter":
        return comm.scatter(whole, me, timeout=30, **kw)
    if collective == "scatterv":
        return comm.scatterv(whole, [n] * p, me, timeout=30, **kw)
    if collective == "gather":
        return comm.gather(block, me, timeout=30, **kw)
    return comm.reduce(block, root=me, timeout=30, **kw)


def main():
    comm = collops.init()
    results = []
    for algorithm in ALGORITHMS:
        for n in SIZES:
            for collective in CALLS:
                try:
                    call(comm, collective, n, algorithm)
                    results.append([collective, n, algorithm, None, ""])
                except collops.CollopsError as exc:
                    results.append([collective, n, algorithm, type(exc).__name__, str(exc)])
    after = float(comm.allreduce(np.ones(1))[0])
    print(json.dumps({"rank": comm.rank, "results": results, "after": after}), flush=True)


if __name__ == "__main__":
    main()
