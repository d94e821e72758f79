"""Rank 1 is killed (SIGKILL) while the others are inside an allreduce that needs it.

``python dies_mid_collective.py [nonblocking]``: with ``nonblocking``, the allreduce is a
non-blocking one whose signature was prepared first (its request started from the prepared
call), waited for."""

import json
import os
import signal
import sys
import time

import numpy as np

import collops

nonblocking = sys.argv[1:] == ["nonblocking"]
comm = collops.init()
x = np.ones(4)
if nonblocking:
    for _ in range(3):  # prepared and bound
        comm.allreduce(x, "sum")
comm.barrier()
if comm.rank == 1:
    time.sleep(0.2)  # let the others enter the collective (start their requests) first
    os.kill(os.getpid(), signal.SIGKILL)
start = time.monotonic()
try:
    if nonblocking:
        comm.iallreduce(x, "sum").wait()
    else:
        comm.allreduce(np.ones(1000), algorithm="ring")
except collops.PeerFailed as exc:
    print(json.dumps({"rank": comm.rank, "failed": exc.failed_rank,
                      "seconds": time.monotonic() - start - 0.2}), flush=True)
    sys.exit(3)
print(json.dumps({"rank": comm.rank, "failed": None}), flush=True)
