"""Rank 1 is killed (SIGKILL) while the others wait for a non-blocking allreduce whose
signature was prepared (its request started from the prepared call)."""

import json
import os
import signal
import sys
import time

import numpy as np

import collops

comm = collops.init()
x = np.ones(4)
for _ in range(3):  # prepared and bound
    comm.allreduce(x, "sum")
comm.barrier()
if comm.rank == 1:
    time.sleep(0.2)  # let the others start their requests first
    os.kill(os.getpid(), signal.SIGKILL)
start = time.monotonic()
try:
    comm.iallreduce(x, "sum").wait()
except collops.PeerFailed as exc:
    print(json.dumps({"rank": comm.rank, "failed": exc.failed_rank,
                      "seconds": time.monotonic() - start - 0.2}), flush=True)
    sys.exit(3)
print(json.dumps({"rank": comm.rank, "failed": None}), flush=True)
