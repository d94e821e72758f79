"""Rank 1 is killed (SIGKILL) while the others are inside an allreduce that needs it.

``python dies_mid_collective.py [nonblocking [COLLECTIVE]]``: with ``nonblocking``, the
allreduce (or COLLECTIVE: bcast, scatter, gatherv or alltoallv, rooted at the rank that dies)
is a non-blocking one whose signature was prepared first (its request started from the
prepared call), waited for."""

import json
import os
import signal
import sys
import time

import numpy as np

import collops

nonblocking = sys.argv[1:2] == ["nonblocking"]
collective = sys.argv[2] if len(sys.argv) > 2 else "allreduce"
comm = collops.init()
x = np.ones(4)
p = comm.size
counts = [2] * p
calls = {  # collective -> (blocking, non-blocking), rooted at rank 1
    "allreduce": (lambda: comm.allreduce(x, "sum"), lambda: comm.iallreduce(x, "sum")),
    "bcast": (lambda: comm.bcast(x, 1), lambda: comm.ibcast(x, 1)),
    "scatter": (lambda: comm.scatter(np.ones(4 * p), 1),
                lambda: comm.iscatter(np.ones(4 * p), 1)),
    "gatherv": (lambda: comm.gatherv(np.ones(2), 1, counts),
                lambda: comm.igatherv(np.ones(2), 1, counts)),
    "alltoallv": (lambda: comm.alltoallv(np.ones(2 * p), counts, None, counts),
                  lambda: comm.ialltoallv(np.ones(2 * p), counts, None, counts)),
}
blocking_call, nonblocking_call = calls[collective]
if nonblocking:
    for _ in range(3):  # prepared and bound
        blocking_call()
comm.barrier()
if comm.rank == 1:
    time.sleep(0.2)  # let the others enter the collective (start their requests) first
    os.kill(os.getpid(), signal.SIGKILL)
start = time.monotonic()
try:
    if nonblocking:
        nonblocking_call().wait()
    else:
        comm.allreduce(np.ones(1000), algorithm="ring")
except collops.PeerFailed as exc:
    print(json.dumps({"rank": comm.rank, "failed": exc.failed_rank,
                      "seconds": time.monotonic() - start - 0.2}), flush=True)
    sys.exit(3)
print(json.dumps({"rank": comm.rank, "failed": None}), flush=True)
