"""PAMI's point-to-point and active-message collectives on endpoints over MPI:
tests/endpoints/test_p2p's and test_am_buffers' programs under real ``mpiexec -n 4``
(`scripts/endpoints_programs.py`)."""

from __future__ import annotations

import inspect

import pytest

pytest.importorskip("mpi4py")

from tests.endpoints import test_am_buffers, test_p2p  # noqa: E402
from tests.mpi.harness import MPIEXEC, by_rank, mpirun  # noqa: E402

pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich)")


@pytest.mark.timeout(200)
@pytest.mark.parametrize("module", [test_p2p, test_am_buffers],
                         ids=["point_to_point", "active_message_collectives"])
def test_the_endpoint_programs_pass_over_mpi(module):
    name = module.__name__.rsplit(".", 1)[1]
    proc = mpirun(4, "endpoints_programs.py", name, timeout=180)
    expected = sorted(n for n, test in inspect.getmembers(module, inspect.isfunction)
                      if n.startswith("test_")
                      and list(inspect.signature(test).parameters)[:1] == ["transport"])
    for report in by_rank(proc, 4).values():
        assert "error" not in report, report["error"]
        assert sorted(report["passed"]) == expected
    assert proc.returncode == 0, proc.stderr[-3000:]
