"""PAMI's point-to-point and active-message collectives on endpoints over MPI:
tests/endpoints/test_p2p's and test_am_buffers' programs under real ``mpiexec -n 4``
(`scripts/endpoints_p2p.py`, `scripts/endpoints_am.py`)."""

from __future__ import annotations

import inspect

import pytest

pytest.importorskip("mpi4py")

from tests.endpoints import test_am_buffers, test_p2p  # noqa: E402
from tests.mpi.harness import MPIEXEC, by_rank, mpirun  # noqa: E402

pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich)")


@pytest.mark.timeout(200)
def test_the_point_to_point_programs_pass_over_mpi():
    proc = mpirun(4, "endpoints_p2p.py", timeout=180)
    expected = sorted(name for name, test in inspect.getmembers(test_p2p, inspect.isfunction)
                      if name.startswith("test_")
                      and list(inspect.signature(test).parameters)[:1] == ["transport"])
    for report in by_rank(proc, 4).values():
        assert "error" not in report, report["error"]
        assert sorted(report["passed"]) == expected
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.timeout(200)
def test_the_active_message_collective_programs_pass_over_mpi():
    """tests/endpoints/test_am_buffers' programs (named buffers, the root's callback, PAMI's
    completion order, buffers too small) under ``mpiexec -n 4``."""
    proc = mpirun(4, "endpoints_am.py", timeout=180)
    expected = sorted(name for name, test in inspect.getmembers(test_am_buffers,
                                                                 inspect.isfunction)
                      if name.startswith("test_")
                      and list(inspect.signature(test).parameters)[:1] == ["transport"])
    for report in by_rank(proc, 4).values():
        assert "error" not in report, report["error"]
        assert sorted(report["passed"]) == expected
    assert proc.returncode == 0, proc.stderr[-3000:]
