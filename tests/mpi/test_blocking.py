"""Blocking ``mpi_native`` calls: MPI's blocking collective, mismatches caught before it."""

from __future__ import annotations

import pytest

pytest.importorskip("mpi4py")

from tests.mpi.harness import MPIEXEC, by_rank, mpirun  # noqa: E402

pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich)")


@pytest.mark.timeout(150)
@pytest.mark.parametrize("n", [2, 4])
def test_blocking_calls_run_mpis_blocking_collectives_and_refuse_mismatches(n):
    # before: every blocking call started a non-blocking execution (MPI_I… polled from
    # Python) after a separate fingerprint allreduce
    proc = mpirun(n, "blocking.py", timeout=130)
    for rank, report in by_rank(proc, n).items():
        assert report["checked"] == 81, report
        assert report["executions"] == [0, 1], report  # none for the blocking calls
        for case, error, message in report["results"]:
            assert error == "CollectiveMismatch", (rank, case, error, message)
            assert "before MPI_Allreduce" in message, message
        words = {case: message for case, _, message in report["results"]}
        assert "blocking and non-blocking collectives never match" in \
            words["blocking vs non-blocking"]
        assert "(count: " in words["count"]
        assert report["after"] == n, report  # the communicator is still usable
    assert proc.returncode == 0, proc.stderr[-3000:]
