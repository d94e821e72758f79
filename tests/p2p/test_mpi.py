"""The point-to-point message tests under a real ``mpiexec`` (4 ranks: the world and splits of
it), through `tests/mpi/scripts/p2p.py`."""

from __future__ import annotations

import inspect

import pytest

pytest.importorskip("mpi4py")

from tests.mpi.harness import MPIEXEC, by_rank, mpirun  # noqa: E402
from tests.p2p import test_messages  # noqa: E402

pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich)")

RUN_TESTS = sorted(name for name, fn in inspect.getmembers(test_messages, inspect.isfunction)
                   if name.startswith("test_") and list(inspect.signature(fn).parameters)
                   == ["run"])


@pytest.mark.timeout(300)
def test_every_message_test_passes_over_mpi():
    proc = mpirun(4, "p2p.py", timeout=280)
    for report in by_rank(proc, 4).values():
        assert "error" not in report, report["error"]
        assert sorted(report["passed"]) == RUN_TESTS
    assert proc.returncode == 0, proc.stderr[-3000:]
