"""Over MPI a dead peer is `PeerFailed` naming it, never a hang, an MPI error inside a call is
a `CollopsError` naming the call, the rank and MPI's message, and a long wait is reported."""

from __future__ import annotations

import pytest

pytest.importorskip("mpi4py")

from tests.mpi.harness import MPIEXEC, by_rank, mpirun, reports  # noqa: E402

pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich)")

ALGORITHMS = ["mpi_native", "recursive_doubling"]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_rank_that_dies_is_named_by_peer_failed_when_the_launcher_keeps_the_job(algorithm):
    # -disable-auto-cleanup: MPICH's launcher leaves the survivors running (they used to wait
    # for ever inside MPI)
    proc = mpirun(2, "dead_peer.py", "exits", algorithm, timeout=60,
                  options=("-disable-auto-cleanup",))
    got = {r["rank"]: r for r in reports(proc.stdout)}
    assert set(got) == {0}, proc.stdout + proc.stderr
    assert got[0]["error"] == "PeerFailed", got[0]
    assert got[0]["failed_rank"] == 1 and "rank 1" in got[0]["message"], got[0]
    # MPI_Finalize would wait for the dead rank: the survivor ends the job instead
    assert "rank 0 aborts the job instead of finalizing MPI" in proc.stderr, proc.stderr
    assert proc.returncode != 0


@pytest.mark.timeout(90)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_an_mpi_error_inside_a_call_names_the_call_the_rank_and_mpis_message(algorithm):
    proc = mpirun(2, "dead_peer.py", "mpi_error", algorithm, timeout=60)
    for rank, report in by_rank(proc, 2).items():
        assert report["error"] == "TransportError", report
        message = report["message"]
        assert message.startswith(f"rank {rank}: allreduce[{algorithm}] call #1"), message
        assert "MPI error: Invalid communicator" in message, message
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_rank_waiting_past_the_threshold_reports_the_stall_once(algorithm):
    proc = mpirun(2, "dead_peer.py", "late", algorithm, timeout=60)
    for report in by_rank(proc, 2).values():
        assert report["error"] is None, report  # and the result was checked against numpy
    stalls = [line for line in proc.stderr.splitlines() if "collops: stall:" in line]
    assert len(stalls) == 1, proc.stderr
    assert "rank 0 has waited" in stalls[0] and f"allreduce[{algorithm}] #1" in stalls[0]
    assert proc.returncode == 0, proc.stderr[-3000:]
