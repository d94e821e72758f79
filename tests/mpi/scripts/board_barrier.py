"""A blocking ``mpi_native`` barrier on the node's board (`collops.mpi.board`): it still
synchronises; it runs MPI's barrier only after a rank sent point-to-point messages (its
runner's mark of the transport's sends moves then, and only then); and a small bcast's root
that deferred a mismatched call raises it when the communicator is freed.

Prints one JSON line per rank: ``{"rank": r, "waited": s, "marks": [...], "sends": [...],
"free": [error type, message]}``.
"""

import gc
import json
import time

import numpy as np

import collops
from collops.mpi.blocking import BlockingCall


def marks():
    """The marks of this process's barrier runners (sends counted at their last MPI barrier)."""
    return sorted(int(o.mark[0]) for o in gc.get_objects()
                  if isinstance(o, BlockingCall) and o.collective == "barrier" and o.barrier)


def main():
    comm = collops.init()
    transport = comm.transport
    for _ in range(5):
        comm.barrier()
    start = time.monotonic()
    if comm.rank == 1:
        time.sleep(0.3)
    comm.barrier()
    waited = time.monotonic() - start
    seen, sends = [marks()], [transport._sends]
    for _ in range(3):
        comm.barrier()
    seen.append(marks())
    sends.append(transport._sends)
    if comm.rank == 0:
        comm.send(np.arange(4.0), 1)
    elif comm.rank == 1:
        comm.recv(np.empty(4), 0)
    comm.barrier()  # rank 0 flags its send: every rank runs MPI's barrier
    seen.append(marks())
    sends.append(transport._sends)
    for _ in range(3):
        comm.barrier()
    seen.append(marks())
    sends.append(transport._sends)
    # a deferred bcast found mismatched when the communicator is freed
    sub = comm.dup()
    for _ in range(4):
        sub.bcast(np.ones(1), 0, out=None if sub.rank == 0 else np.empty(1))
    sub.barrier()
    try:
        if sub.rank == 0:
            sub.bcast(np.ones(1), 0)
        else:
            sub.allreduce(np.ones(1))
    except collops.CollectiveMismatch:
        pass
    try:
        sub.free()
        freed = [None, ""]
    except collops.CollopsError as exc:
        freed = [type(exc).__name__, str(exc)]
    after = float(comm.allreduce(np.ones(1))[0])
    print(json.dumps({"rank": comm.rank, "waited": waited, "marks": seen, "sends": sends,
                      "free": freed, "freed": sub.freed, "after": after}), flush=True)


if __name__ == "__main__":
    main()
