"""The communicator scenarios of ``tests/comms/scenarios.py`` under mpiexec (the MPI
transport: dup, split, create, create_group, idup and free over MPI, mpi_native's MPI
communicators freed with the collops ones). Each rank prints ``{"rank": r, "passed": [...],
"pools": n}`` or ``{"rank": r, "error": "..."}``."""

import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import collops  # noqa: E402
from tests.comms import scenarios  # noqa: E402


def main(comm):
    passed = scenarios.run_all(comm, cycles=int(sys.argv[1]))
    with comm.dup() as d:  # mpi_native's own MPI communicators come and go with it
        d.set_algorithm("allreduce", "mpi_native")
        scenarios._check_allreduce(d, 1)
        made = len(comm.transport._pools)
    return passed, made, len(comm.transport._pools), sum(comm.transport._boards_made.values())


if __name__ == "__main__":
    world = collops.init()
    try:
        passed, made, after, boards = main(world)
        print(json.dumps({"rank": world.rank, "passed": passed, "pools": [made, after],
                          "boards": boards}), flush=True)
    except Exception:
        print(json.dumps({"rank": world.rank, "error": traceback.format_exc()}), flush=True)
        raise
