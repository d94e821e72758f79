"""tests/endpoints/test_p2p's programs run unchanged on an MPI job: the module's ``run`` is
replaced by one that runs a program on a communicator of the job's first ``tasks`` ranks
(a split of the world) and gives every rank the results. Each rank prints
``{"rank": r, "passed": [...]}`` or ``{"rank": r, "error": "..."}``."""

import inspect
import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import collops  # noqa: E402
from collops.endpoints import Client  # noqa: E402
from tests.endpoints import test_p2p  # noqa: E402

world = collops.init()


def run(program, tasks, transport, contexts=1):
    """``program(client)`` on ranks 0…tasks-1 (then `test_p2p.finish`); every rank gets the
    list of their results."""
    comm = world if tasks == world.size else world.split(0 if world.rank < tasks else None)
    mine = None
    if comm is not None:
        client = Client("p2p", comm)
        client.create_contexts(contexts)
        try:
            mine = program(client)
            test_p2p.finish(client)
        finally:
            client.close()
    return world.allgather_object(mine)[:tasks]


def programs():
    """``(name, call)`` for each test of test_p2p taking a transport (and a task count)."""
    for name, test in inspect.getmembers(test_p2p, inspect.isfunction):
        parameters = list(inspect.signature(test).parameters)
        if not name.startswith("test_"):
            continue
        if parameters == ["transport", "tasks"]:
            yield name, lambda test=test: [test("mpi", n) for n in range(3, world.size + 1)]
        elif parameters == ["transport"]:
            yield name, lambda test=test: test("mpi")


test_p2p.run = run
report = {"rank": world.rank, "passed": []}
try:
    for name, call in programs():
        call()
        report["passed"].append(name)
except Exception as exc:
    report["error"] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
finally:
    print(json.dumps(report), flush=True)
