"""Three ranks of an MPI job that disagree on a rooted call's root (nobody names itself, or a
third rank names another root) all raise `CollectiveMismatch` naming both roots, for bcast,
scatter, scatterv, gather and reduce at 8 B and 8 MiB (issue 14's root-mismatch matrix on
MPI; `tests/properties/test_calls_across_ranks.py` holds the same on threads and shm)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("mpi4py")

from tests.mpi.harness import MPIEXEC, by_rank, mpirun  # noqa: E402

pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich)")

#: the root each rank names, by scenario (as in scripts/root_disagreements.py)
ROOTS = {"no root": (1, 0, 0), "a third rank": (2, 0, 2)}


@pytest.mark.timeout(300)
def test_ranks_disagreeing_on_the_root_all_raise_collective_mismatch_over_mpi():
    proc = mpirun(3, "root_disagreements.py", timeout=280)
    got = by_rank(proc, 3)
    for rank, report in got.items():
        assert report["after"] == 3.0, report  # the communicator is still usable
        assert len(report["results"]) == 20, report
        for scenario, collective, n, error, message in report["results"]:
            case = (rank, scenario, collective, n)
            assert error == "CollectiveMismatch", (case, error, message)
            roots = re.search(r"root: (\d) vs (\d)", message)
            assert roots and int(roots[1]) == ROOTS[scenario][rank] != int(roots[2]), (
                case, message)
    assert proc.returncode == 0, proc.stderr[-3000:]
