"""Ranks that call allreduce with another op, dtype or count, or another collective:
``python mismatch_words.py ALGORITHM`` (``auto`` for automatic selection, which picks MPI's
own, or a schedule's name). Rank 1 differs from rank 0 in one field per case.

Prints one JSON line per rank: ``{"rank": r, "results": [[case, error type, message], ...]}``;
then the ranks meet in MPI's own barrier and exit normally.
"""

import json
import sys

import numpy as np
from mpi4py import MPI

import collops

CASES = {
    "op": {"op": "max"},
    "dtype": {"dtype": ">f8"},
    "count": {"n": 16},
}


def allreduce(comm, algorithm, n=8, op="sum", dtype="f8"):
    return comm.allreduce(np.ones(n, np.dtype(dtype)), op=op, algorithm=algorithm, timeout=5)


def main():
    algorithm = None if sys.argv[1] == "auto" else sys.argv[1]
    comm = collops.init()
    results = []
    for case, change in CASES.items():
        try:
            allreduce(comm, algorithm, **(change if comm.rank == 1 else {}))
            results.append([case, None, ""])
        except collops.CollopsError as exc:
            results.append([case, type(exc).__name__, str(exc)])
        MPI.COMM_WORLD.Barrier()  # a mismatched call may leave messages: start afresh
        comm = comm.split(0)
    print(json.dumps({"rank": comm.rank, "results": results}), flush=True)
    MPI.COMM_WORLD.Barrier()


main()
