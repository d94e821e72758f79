"""Failure scenarios under mpiexec: ``python failures.py SCENARIO``.

* ``raises``: the last rank raises after an allreduce; the others wait in a barrier. The job
  must end with that rank's traceback and a non-zero status (no hang).
* ``timeout`` / ``native_timeout``: rank 1 arrives 2 s late to an allreduce that rank 0 gives
  0.5 s (a schedule, then MPI's own); rank 0 must raise `CollectiveTimeout`.
  ``native_comm_timeout``: the same with MPI's own, rank 0's limit being its communicator's
  (``comm.timeout``) rather than the call's.
* ``mismatch`` / ``schedule_mismatch``: rank 0 calls allreduce while the others call bcast
  (automatic selection, which picks mpi_native, then forced schedules); the ranks that detect
  it raise `CollectiveMismatch` saying what each called.

Every rank that gets that far prints ``{"rank": r, "error": type, "message": text}`` (or
``"error": null``), then the ranks meet in MPI's own barrier and exit normally.
"""

import json
import sys
import time

import numpy as np
from mpi4py import MPI

import collops


def timeout(comm, algorithm, **params):
    if comm.rank == 1:
        time.sleep(2)
    return comm.allreduce(np.ones(2), timeout=0.5 if comm.rank == 0 else 30,
                          algorithm=algorithm, **params)


def comm_timeout(comm, algorithm, **params):
    if comm.rank == 0:
        comm.timeout = 0.5
    else:
        time.sleep(2)
    return comm.allreduce(np.ones(2), algorithm=algorithm, **params)


def mismatch(comm, forced):
    if comm.rank == 0:
        return comm.allreduce(np.ones(4), timeout=3,
                              algorithm="recursive_doubling" if forced else None)
    return comm.bcast(np.ones(2), timeout=3, algorithm="binomial" if forced else None)


SCENARIOS = {
    "timeout": lambda comm: timeout(comm, "recursive_doubling"),
    "native_timeout": lambda comm: timeout(comm, "mpi_native", check=0),
    "native_comm_timeout": lambda comm: comm_timeout(comm, "mpi_native", check=0),
    "mismatch": lambda comm: mismatch(comm, False),
    "schedule_mismatch": lambda comm: mismatch(comm, True),
}


def main():
    scenario = sys.argv[1]
    comm = collops.init()
    if scenario == "raises":
        comm.allreduce(np.ones(4))
        if comm.rank == comm.size - 1:
            raise RuntimeError(f"rank {comm.rank} gives up")
        comm.barrier()
        return
    try:
        SCENARIOS[scenario](comm)
        report = {"rank": comm.rank, "error": None}
    except collops.CollopsError as exc:
        report = {"rank": comm.rank, "error": type(exc).__name__, "message": str(exc)}
    print(json.dumps(report), flush=True)
    MPI.COMM_WORLD.Barrier()


main()
