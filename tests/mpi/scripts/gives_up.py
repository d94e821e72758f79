"""One rank gives a call up under mpiexec: ``python gives_up.py CASE``.

``CASE`` is one of `tests/properties/test_one_rank_gives_up`'s (an argument only rank 1 sees
is wrong, on MPI's default algorithms: ``mpi_native`` on the node's board), or
``allreduce out <algorithm>`` for a schedule's messages. Each rank prints ``{"rank": r,
"error": type, "message": text, "failed_rank": r, "seconds": time to its error, "after":
five allreduces' results, "spans_nodes": whether the world's calls agree across nodes (no
board: ``COLLOPS_RANKS_PER_NODE`` split the job)}``.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import collops  # noqa: E402
from tests.properties import test_one_rank_gives_up as cases  # noqa: E402


def schedule_case(comm, algorithm):
    """An allreduce of ``algorithm`` whose ``out`` is of the wrong shape on rank 1 only."""
    start = time.monotonic()
    x = np.arange(8.0) * (comm.rank + 1)
    try:
        comm.allreduce(x, "sum", out=np.empty(3) if comm.rank == cases.BAD else None,
                       algorithm=algorithm, timeout=cases.CALL_TIMEOUT)
        got = {"error": None}
    except collops.CollopsError as exc:
        got = {"error": type(exc).__name__, "message": str(exc),
               "failed_rank": getattr(exc, "failed_rank", None)}
    got["seconds"] = time.monotonic() - start
    mine = np.arange(5, dtype=np.int64) * (comm.rank + 1)
    got["after"] = [comm.allreduce(mine, "sum", algorithm=algorithm,
                                   timeout=cases.CALL_TIMEOUT).tolist() for _ in range(5)]
    return got


comm = collops.init()
case = sys.argv[1]
if case.startswith("allreduce out "):
    report = schedule_case(comm, case.split()[-1])
else:
    report = cases._one_rank(comm, case)
report["spans_nodes"] = comm.transport.board(tuple(comm._group), comm.context) is None
print(json.dumps({"rank": comm.rank, **report}), flush=True)
