"""The contract of every algorithm the MPI transport offers, in one MPI job.

Run as ``mpiexec -n P python contract.py SEED``. Each rank runs `run_contract` (every
algorithm the registry offers on MPI, ``mpi_native`` included, and automatic selection,
checked against numpy); rank 0 gathers the reports through mpi4py, independently of collops,
and prints them as one JSON line: ``{"reports": [...]}``.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import collops  # noqa: E402
from tests.support.contract import run_contract  # noqa: E402


def main() -> None:
    """Run this rank's part and have rank 0 print every rank's report."""
    from mpi4py import MPI

    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    report = run_contract(collops.init(), seed)
    reports = MPI.COMM_WORLD.gather(report, 0)
    if MPI.COMM_WORLD.rank == 0:
        print(json.dumps({"reports": reports}), flush=True)


if __name__ == "__main__":
    main()
