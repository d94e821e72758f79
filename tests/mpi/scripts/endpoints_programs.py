"""A tests/endpoints module's programs (``test_p2p``, ``test_am_buffers``: argv[1]) run
unchanged on an MPI job: the module's ``run`` is replaced by one that runs a program on a
communicator of the job's first ``tasks`` ranks (a split of the world) and gives every rank
the results. Each rank prints ``{"rank": r, "passed": [...]}`` or ``{"rank": r, "error":
"..."}``."""

import importlib
import inspect
import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import collops  # noqa: E402
from collops.endpoints import Client  # noqa: E402

module = importlib.import_module(f"tests.endpoints.{sys.argv[1]}")
world = collops.init()
COLLECTIVES = ["ambroadcast", "amscatter", "amgather", "amreduce"]


def run(program, tasks, transport, *args, contexts=1):
    """``program(client, *args)`` on ranks 0…tasks-1 (then the module's ``finish``, if it
    has one); every rank gets the list of their results."""
    comm = world if tasks == world.size else world.split(0 if world.rank < tasks else None)
    mine = None
    if comm is not None:
        client = Client(sys.argv[1], comm)
        client.create_contexts(contexts)
        try:
            mine = program(client, *args)
            if hasattr(module, "finish"):
                module.finish(client)
        finally:
            client.close()
    return world.allgather_object(mine)[:tasks]


def programs():
    """``(name, call)`` for each test of the module taking a transport first."""
    for name, test in inspect.getmembers(module, inspect.isfunction):
        parameters = list(inspect.signature(test).parameters)
        if not name.startswith("test_"):
            continue
        if parameters == ["transport", "tasks"]:
            yield name, lambda test=test: [test("mpi", n) for n in range(3, world.size + 1)]
        elif parameters == ["transport", "collective"]:
            yield name, lambda test=test: [test("mpi", c) for c in COLLECTIVES]
        elif parameters == ["transport"]:
            yield name, lambda test=test: test("mpi")


module.run = run
report = {"rank": world.rank, "passed": []}
try:
    for name, call in programs():
        call()
        report["passed"].append(name)
except Exception as exc:
    report["error"] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
finally:
    print(json.dumps(report), flush=True)
