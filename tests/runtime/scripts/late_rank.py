"""Rank 1 spends ``LATE_SECONDS`` in user code before an allreduce; the call then completes.

The algorithm is ``COLLOPS_ALLREDUCE_ALGORITHM``'s (or the default), so a test can run the
same program over a native collective and over a schedule.
"""

import os
import time

import numpy as np

import collops

comm = collops.init()
x = np.arange(8.0) + comm.rank
comm.allreduce(x)  # call #0: everyone is there
if comm.rank == 1:
    time.sleep(float(os.environ.get("LATE_SECONDS", "2")))
out = comm.allreduce(x)  # call #1: rank 0 waits for rank 1
expected = sum(np.arange(8.0) + r for r in range(comm.size))
assert np.array_equal(out, expected), (out, expected)
print(f"rank {comm.rank} ok {comm.last_algorithm}", flush=True)
