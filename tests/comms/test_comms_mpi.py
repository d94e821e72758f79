"""The communicator scenarios in an MPI job (real mpiexec, the MPI transport)."""

from __future__ import annotations

import pytest

from tests.mpi.harness import MPIEXEC, by_rank, mpirun

pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="needs mpiexec (the mpi extra)")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("n", [2, 3])
def test_communicators_come_and_go_under_mpiexec(n):
    # three ranks on two cores make each MPI call slow: fewer dup-free cycles there
    proc = mpirun(n, "communicators.py", "300" if n == 2 else "60", timeout=280)
    for report in by_rank(proc, n).values():
        assert "error" not in report, report["error"]
        assert len(report["passed"]) == 7, report
        made, after = report["pools"]
        assert made == after + 1  # the dup's MPI communicators freed with it
        # a freed communicator's board serves the next over its ranks: as many boards as
        # communicators live at once (40 in `many_live`, a few more), not one per dup
        assert report["boards"] < 60, report
    assert proc.returncode == 0, proc.stderr[-3000:]
