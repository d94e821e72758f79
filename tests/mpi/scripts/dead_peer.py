"""Failures inside a call under mpiexec: ``python dead_peer.py SCENARIO ALGORITHM``.

* ``exits``: rank 1 leaves (``os._exit``) while rank 0 waits for it in an allreduce; run under
  ``mpiexec -disable-auto-cleanup``, which leaves the survivors running. Rank 0 must raise
  `PeerFailed` naming rank 1 (and then end the job, as MPI_Finalize would wait for rank 1).
* ``mpi_error``: every rank swaps the MPI communicators under the transport for a freed one,
  so MPI fails inside the next allreduce; it must raise a `CollopsError` naming the call, the
  rank and MPI's message. The communicators are put back, and the job ends normally.
* ``late``: rank 1 spends 1.5 s in user code before the allreduce, with a stall report
  threshold of 0.5 s; rank 0 reports the stall once on stderr and the call completes.

Rank 0 (every rank for ``mpi_error``) prints ``{"rank": r, "error": type, "message": text,
"failed_rank": r}`` and the result is checked against numpy where the call succeeds.
"""

import json
import os
import sys
import time

import numpy as np
from mpi4py import MPI

import collops


def main():
    scenario, algorithm = sys.argv[1], sys.argv[2]
    if scenario == "late":
        os.environ["COLLOPS_STALL_REPORT"] = "0.5"
        collops.reload_settings()
    comm = collops.init()
    x = np.arange(4.0) + comm.rank
    first = comm.allreduce(x, algorithm=algorithm)
    assert np.array_equal(first, sum(np.arange(4.0) + r for r in range(comm.size)))
    if scenario == "late" and comm.rank == 1:
        time.sleep(1.5)
    if scenario == "exits" and comm.rank == 1:
        time.sleep(0.3)
        os._exit(3)
    transport = comm.transport
    kept = transport.comm, transport._pools
    if scenario == "mpi_error":
        freed = transport.comm.Dup()
        freed.Free()  # now MPI_COMM_NULL
        transport.comm = freed
        transport._pools = {key: [freed] * len(pool) for key, pool in kept[1].items()}
    try:
        second = comm.allreduce(x, algorithm=algorithm, timeout=30)
        assert np.array_equal(second, first)
        report = {"rank": comm.rank, "error": None}
    except collops.CollopsError as exc:
        report = {"rank": comm.rank, "error": type(exc).__name__, "message": str(exc),
                  "failed_rank": getattr(exc, "failed_rank", None)}
    print(json.dumps(report), flush=True)
    if scenario == "mpi_error":
        transport.comm, transport._pools = kept
        MPI.COMM_WORLD.Barrier()


main()
