"""tests/p2p's message tests run unchanged on an MPI job: each test's ``run(fn, p)`` runs
``fn`` on a communicator of the job's first ``p`` ranks (the world itself when ``p`` is its
size, a split otherwise) and gives every rank the results. Each rank prints
``{"rank": r, "passed": [...]}`` or ``{"rank": r, "error": "..."}``."""

import inspect
import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import collops  # noqa: E402
from tests.p2p import test_messages  # noqa: E402

world = collops.init()


def run(fn, p, *args):
    """``fn(comm, *args)`` on ranks 0…p-1; every rank gets the list of their results."""
    comm = world if p == world.size else world.split(0 if world.rank < p else None)
    if comm is not None:  # MPI's communicators for mpi_native are made by a blocking call
        comm.barrier()  # on a communicator's first collective: not behind a pending send
    mine = fn(comm, *args) if comm is not None else None
    return world.allgather_object(mine)[:p]


run.transport = "mpi"
passed = []
try:
    for name, test in inspect.getmembers(test_messages, inspect.isfunction):
        if name.startswith("test_") and list(inspect.signature(test).parameters) == ["run"]:
            test(run)
            passed.append(name)
    print(json.dumps({"rank": world.rank, "passed": passed}), flush=True)
except Exception as exc:
    print(json.dumps({"rank": world.rank, "passed": passed,
                      "error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"}),
          flush=True)
