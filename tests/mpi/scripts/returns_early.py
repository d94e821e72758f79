"""A rank returns from its program early: ``python returns_early.py WAIT ALGORITHM``.

After one allreduce every rank checks against numpy, the last rank returns (its process then
waits inside ``MPI_Finalize``, alive), and the others wait for it in ``WAIT``:

* ``allreduce``: a timed allreduce of ``ALGORITHM`` (blocking: on the node's board for
  ``mpi_native``, for its messages for a schedule);
* ``iallreduce``: a non-blocking allreduce of ``ALGORITHM``, waited for;
* ``recv``: a point-to-point receive from it (``ALGORITHM`` unused).

Each waiting rank prints ``{"rank": r, "error": type, "failed_rank": r, "message": text,
"seconds": time to the error}``; it must be `PeerFailed` naming the rank that returned, well
before the call's 30 s timeout. The job then ends normally.
"""

import json
import sys
import time

import numpy as np

import collops


def main():
    wait, algorithm = sys.argv[1], sys.argv[2]
    comm = collops.init()
    x = np.arange(4.0) + comm.rank
    first = comm.allreduce(x, algorithm=algorithm)
    assert np.array_equal(first, sum(np.arange(4.0) + r for r in range(comm.size)))
    leaver = comm.size - 1
    if comm.rank == leaver:
        return
    start = time.monotonic()
    try:
        if wait == "allreduce":
            comm.allreduce(x, algorithm=algorithm, timeout=30)
        elif wait == "iallreduce":
            comm.iallreduce(x, algorithm=algorithm, timeout=30).wait()
        else:
            comm.recv(source=leaver, timeout=30)
        report = {"rank": comm.rank, "error": None}
    except collops.CollopsError as exc:
        report = {"rank": comm.rank, "error": type(exc).__name__, "message": str(exc),
                  "failed_rank": getattr(exc, "failed_rank", None)}
    report["seconds"] = time.monotonic() - start
    print(json.dumps(report), flush=True)


main()
