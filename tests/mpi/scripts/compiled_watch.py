"""What the watchdog sees while a rank is blocked inside the compiled runner's MPI call.

``python compiled_watch.py`` (3 ranks): every rank makes repeated bound allreduces with
``mpi_native`` and a user operator; in the sixth, rank 1 (which MPICH has combine the
others' values) sleeps 1.5 s inside the operator, so the other ranks sit inside MPI's
allreduce meanwhile. There a thread of theirs asks the transport's watchdog which call the
rank is blocked in (`Watchdog._inside`, what it names when a peer of the node dies): the
compiled runner must have released the GIL (else the thread could not run) and marked the
watchdog's word with its runner and call number. Each rank prints ``{"rank": r,
"compiled": whether its bound allreduce is the compiled runner's, "inside": [what, call]
seen from the thread, or None, "after": [what, call] after the call (None: not inside)}``.
"""

import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import numpy as np  # noqa: E402

import collops  # noqa: E402
from collops.mpi.blocking import Watchdog  # noqa: E402

SLOW = 5  # the call in which rank 1 sleeps
calls = [0]
comm = collops.init()


def add_slowly(a, b):
    if comm.rank == 1 and calls[0] == SLOW:
        time.sleep(1.5)
    return a + b


def seen(watchdog):
    runner, number = watchdog._inside()
    return None if runner is None or not number else [runner.what, runner.current]


ADD = collops.Op(add_slowly, commutative=True)
comm.set_algorithm("allreduce", "mpi_native")
x = np.ones(4)
inside = []
for calls[0] in range(SLOW + 2):
    if calls[0] == SLOW and comm.rank != 1:
        watchdog = Watchdog.of(comm.transport)
        thread = threading.Thread(target=lambda dog=watchdog: (time.sleep(0.7),
                                                               inside.append(seen(dog))))
        thread.start()
    assert np.array_equal(comm.allreduce(x, ADD), x * comm.size)
    if calls[0] == SLOW and comm.rank != 1:
        thread.join()
print(json.dumps({"rank": comm.rank,
                  "compiled": comm.bound_route("allreduce") == "compiled",
                  "inside": inside[0] if inside else None,
                  "after": seen(Watchdog.of(comm.transport))}), flush=True)
