"""The collective correctness suite under mpiexec: every algorithm the MPI transport offers.

Run as ``mpiexec -n P python suite.py SEED``. Each rank makes every call of every case with
every eligible algorithm (``mpi_native`` included) and with automatic selection; rank 0
gathers the results (through mpi4py, independently of collops), checks them against numpy
and prints one JSON summary line: ``{"ran": n, "algorithms": [...], "failures": [...]}``.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import collops  # noqa: E402
from collops.algorithms import COLLECTIVES, algorithms  # noqa: E402
from tests.runtime.harness import call_collective  # noqa: E402
from tests.support.cases import assert_matches, cases_for, make_case  # noqa: E402

#: cases whose messages exceed the transport's eager limit (the two-message protocol)
LARGE = {"bcast": 6000, "allreduce": 6000, "allgatherv": 5000, "alltoallv": 5000,
         "reduce_scatter": 5000, "gatherv": 5000, "scatter": 5000}


def cases(collective, p, seed):
    """The usual cases, plus one large one for some collectives."""
    out = cases_for(collective, p, seed=seed)
    if collective in LARGE:
        out.append(make_case(collective, p, LARGE[collective], uneven=True, seed=seed + 99))
    return out


def offered(collective):
    """The algorithms the MPI transport offers for ``collective``."""
    return [a for a in algorithms(collective) if a.needs <= {"mpi"}]


def main():
    from mpi4py import MPI

    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    comm = collops.init()
    world = MPI.COMM_WORLD
    p = comm.size
    ran, failures, names = 0, [], set()
    for collective in COLLECTIVES:
        for case in cases(collective, p, seed):
            for alg in [*offered(collective), None]:
                if alg is not None and not alg.eligible(case.specs[0]):
                    continue
                name = alg.name if alg else None
                try:
                    mine = call_collective(comm, case, name)
                    error = None
                except Exception as exc:  # reported by rank 0 below
                    mine, error = None, f"rank {comm.rank}: {type(exc).__name__}: {exc}"
                got = world.gather((mine, error), 0)
                ran += 1
                names.add(f"{collective}.{name or 'auto:' + str(comm.last_algorithm)}")
                if comm.rank != 0:
                    continue
                errors = [e for _, e in got if e]
                try:
                    if errors:
                        raise AssertionError("; ".join(errors))
                    assert_matches(case, [r for r, _ in got])
                except AssertionError as exc:
                    failures.append(f"{collective}[{name}] {case.id}: {exc}"[:2000])
    if comm.rank == 0:
        print(json.dumps({"ran": ran, "algorithms": sorted(names), "failures": failures}))


if __name__ == "__main__":
    main()
