"""Ranks on separate "nodes" run one call by different paths, under mpiexec.

``python cross_path.py``: for each schedule algorithm, rank 0 runs an allreduce with it while
the others run it with ``mpi_native`` (which agrees on the call across nodes first); every
rank must raise `CollectiveMismatch` long before its timeout, and the next allreduce must be
right. Each rank prints ``{"rank": r, "results": [[algorithm, error, seconds, message],
...], "after": [values]}``.
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import collops  # noqa: E402

ALGORITHMS = ("ring", "recursive_doubling", "reduce_bcast")
TIMEOUT = 20.0

comm = collops.init()
results, after = [], []
for algorithm in ALGORITHMS:
    start = time.monotonic()
    try:
        comm.allreduce(np.ones(4), algorithm=algorithm if comm.rank == 0 else "mpi_native",
                       timeout=TIMEOUT)
        results.append([algorithm, None, time.monotonic() - start, ""])
    except collops.CollopsError as exc:
        results.append([algorithm, type(exc).__name__, time.monotonic() - start, str(exc)])
    mine = np.arange(3.0) + comm.rank
    after.append(comm.allreduce(mine, algorithm="mpi_native", timeout=TIMEOUT).tolist())
print(json.dumps({"rank": comm.rank, "results": results, "after": after}), flush=True)
MPI.COMM_WORLD.Barrier()
