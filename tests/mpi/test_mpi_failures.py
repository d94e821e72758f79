"""Over MPI a dead peer is `PeerFailed` naming it, never a hang, an MPI error inside a call is
a `CollopsError` naming the call, the rank and MPI's message, and a long wait is reported."""

from __future__ import annotations

import numpy as np
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


@pytest.mark.timeout(120)
@pytest.mark.parametrize("wait,algorithm", [("allreduce", "mpi_native"),
                                            ("allreduce", "recursive_doubling"),
                                            ("iallreduce", "mpi_native"),
                                            ("recv", "mpi_native")])
def test_a_rank_that_returns_early_is_named_by_peer_failed(wait, algorithm):
    # the rank that returned waits alive inside MPI_Finalize: its pid says nothing, its
    # node's FINISHED word does (its peers used to wait for their 30 s timeout)
    proc = mpirun(3, "returns_early.py", wait, algorithm, timeout=100)
    got = {r["rank"]: r for r in reports(proc.stdout)}
    assert sorted(got) == [0, 1], proc.stdout + proc.stderr
    for report in got.values():
        assert report["error"] == "PeerFailed", report
        assert report["failed_rank"] == 2, report
        assert "returned from its program" in report["message"], report
        assert report["seconds"] < 25, report  # told, not timed out
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", ["allreduce out", "allgather dtype", "alltoall shape",
                                  "bound allreduce timeout", "allreduce out ring",
                                  "allreduce out recursive_doubling", "gatherv out small",
                                  "gatherv misspelt keyword", "split color"])
def test_the_peers_of_a_rank_that_gave_up_are_told(case):
    # the peers used to wait for their 20 s timeout: MPI's give_up did nothing
    proc = mpirun(3, "gives_up.py", case, timeout=100)
    got = by_rank(proc, 3)
    assert got[1]["error"] == "ArgumentError", got
    for rank in (0, 2):
        assert got[rank]["error"] in ("CollectiveMismatch", "PeerFailed"), got
        assert "rank 1" in got[rank]["message"], got
        assert got[rank]["seconds"] < 10, got
    want = (np.arange(5, dtype=np.int64) * 6).tolist()
    assert all(g["after"] == [want] * 5 for g in got.values()), got
    assert proc.returncode == 0, proc.stderr[-3000:]


#: mpiexec's option making every rank a "node" of its own, so the ranks agree on each call
#: across nodes (`collops.mpi.spanning`), as on a cluster
EVERY_RANK_A_NODE = ("-genv", "COLLOPS_RANKS_PER_NODE", "1")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("n,case", [(2, "allreduce out"), (3, "allgather dtype"),
                                    (4, "bound allreduce timeout"), (3, "gatherv out large"),
                                    (4, "split color"), (3, "alltoall shape"),
                                    (3, "allreduce out recursive_doubling")])
def test_the_peers_on_other_nodes_of_a_rank_that_gave_up_are_told(n, case):
    # a peer on another node, waiting inside the agreement MPI_Allreduce, used to wait for its
    # 20 s timeout; on one machine the job used the node's board whatever the node setting
    proc = mpirun(n, "gives_up.py", case, timeout=100, options=EVERY_RANK_A_NODE)
    got = by_rank(proc, n)
    assert all(g["spans_nodes"] for g in got.values()), got
    assert got[1]["error"] == "ArgumentError", got
    for rank in set(got) - {1}:
        assert got[rank]["error"] in ("CollectiveMismatch", "PeerFailed"), got
        assert "rank 1" in got[rank]["message"], got
        assert got[rank]["seconds"] < 10, got
    want = (np.arange(5, dtype=np.int64) * sum(range(1, n + 1))).tolist()
    assert all(g["after"] == [want] * 5 for g in got.values()), got
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [3, 4])
def test_a_schedule_against_the_agreement_across_nodes_is_a_mismatch_on_every_rank(n):
    # rank 0 runs a schedule, the others mpi_native; rank 0 waited for data the others never
    # sent, and they for its part of the agreement, until every rank's timeout
    proc = mpirun(n, "cross_path.py", timeout=100, options=EVERY_RANK_A_NODE)
    for report in by_rank(proc, n).values():
        for algorithm, error, seconds, message in report["results"]:
            assert error == "CollectiveMismatch", (algorithm, report)
            assert f"allreduce[{algorithm}]" in message, (algorithm, report)  # the cause
            assert seconds < 10, (algorithm, report)
        want = (np.arange(3.0) * n + sum(range(n))).tolist()
        assert report["after"] == [want] * 3, report
    assert proc.returncode == 0, proc.stderr[-3000:]
