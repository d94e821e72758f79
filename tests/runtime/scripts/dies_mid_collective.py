"""Rank 1 is killed (SIGKILL) while the others are inside an allreduce that needs it."""

import json
import os
import signal
import sys
import time

import numpy as np

import collops

comm = collops.init()
comm.barrier()
if comm.rank == 1:
    time.sleep(0.2)  # let the others enter the collective first
    os.kill(os.getpid(), signal.SIGKILL)
start = time.monotonic()
try:
    comm.allreduce(np.ones(1000), algorithm="ring")
except collops.PeerFailed as exc:
    print(json.dumps({"rank": comm.rank, "failed": exc.failed_rank,
                      "seconds": time.monotonic() - start - 0.2}), flush=True)
    sys.exit(3)
print(json.dumps({"rank": comm.rank, "failed": None}), flush=True)
