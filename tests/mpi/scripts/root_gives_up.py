"""A bcast's and a scatterv's root with a mistake only it sees (``out`` of the wrong size, counts
that do not fit ``x``), with MPI's own collectives and with schedules: the root raises
`ArgumentError`, the others `CollectiveMismatch` quoting it, and an allreduce works after.

Prints one JSON line per rank: ``{"rank": r, "results": [[case, algorithm, error type,
message], ...], "after": sum of a final allreduce}``.
"""

import json

import numpy as np

import collops

ALGORITHMS = (None, "linear")


def bcast(comm, algorithm):
    if comm.rank == 0:
        return comm.bcast(np.ones(5), out=np.empty(4), algorithm=algorithm, timeout=20)
    return comm.bcast(None, algorithm=algorithm, timeout=20)


def scatterv(comm, algorithm):
    if comm.rank == 0:
        return comm.scatterv(np.ones(6), [1] * comm.size, algorithm=algorithm, timeout=20)
    return comm.scatterv(None, None, algorithm=algorithm, timeout=20)


def main():
    comm = collops.init()
    results = []
    for algorithm in ALGORITHMS:
        for case in (bcast, scatterv):
            try:
                case(comm, algorithm)
                results.append([case.__name__, algorithm, None, ""])
            except collops.CollopsError as exc:
                results.append([case.__name__, algorithm, type(exc).__name__, str(exc)])
    after = float(comm.allreduce(np.ones(1), timeout=20)[0])
    print(json.dumps({"rank": comm.rank, "results": results, "after": after}), flush=True)


main()
