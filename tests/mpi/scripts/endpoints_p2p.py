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


test_p2p.run = run
passed = []
try:
    for name, test in inspect.getmembers(test_p2p, inspect.isfunction):
        parameters = list(inspect.signature(test).parameters)
        if not name.startswith("test_") or parameters[:1] != ["transport"]:
            continue
        if parameters == ["transport", "tasks"]:
            for tasks in range(3, world.size + 1):
                test("mpi", tasks)
        elif parameters == ["transport"]:
            test("mpi")
        else:
            continue
        passed.append(name)
    print(json.dumps({"rank": world.rank, "passed": passed}), flush=True)
except Exception as exc:
    print(json.dumps({"rank": world.rank, "passed": passed,
                      "error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"}),
          flush=True)
