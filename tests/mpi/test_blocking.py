"""Blocking ``mpi_native`` calls (MPI's blocking collective, mismatches caught before it) and
``hier`` (node-local phases and one among node leaders)."""

from __future__ import annotations

import pytest

pytest.importorskip("mpi4py")

from tests.mpi.harness import MPIEXEC, by_rank, mpirun  # noqa: E402

pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich)")


@pytest.mark.timeout(150)
@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("nodes", ["one node", "a node per rank"])
def test_blocking_calls_run_mpis_blocking_collectives_and_refuse_mismatches(n, nodes):
    # before: every blocking call started a non-blocking execution (MPI_I… polled from
    # Python) after a separate fingerprint allreduce. Across nodes (COLLOPS_RANKS_PER_NODE=1),
    # a call made blocking on one rank and non-blocking on another used to hang
    options = ("-genv", "COLLOPS_RANKS_PER_NODE", "1") if nodes == "a node per rank" else ()
    proc = mpirun(n, "blocking.py", timeout=130, options=options)
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
        # a large bcast into ``out`` on every rank: two board entries the first time at each
        # root (the general path: its envelope's and its data phase's), then one (every rank
        # knows the data's signature: the data goes in the envelope's call, `run_known`); a
        # node per rank agrees in messages instead
        calls, entries = report["board_entries"]
        assert entries == (calls + min(calls, n) if nodes == "one node" else 0), report
        assert report["bound_bcast"], report  # a whole small bcast in one bound call
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.timeout(200)
@pytest.mark.parametrize("n", [3, 4])
def test_hier_runs_node_phases_and_a_leaders_phase_against_numpy(n):
    # COLLOPS_RANKS_PER_NODE=2 makes "nodes" of ranks {0, 1}, {2, 3} on one machine; the
    # interleaved sub-communicator's nodes are not contiguous blocks of its ranks
    proc = mpirun(n, "hier.py", timeout=180,
                  options=("-genv", "COLLOPS_RANKS_PER_NODE", "2"))
    for report in by_rank(proc, n).values():
        assert report["nodes"] == [r // 2 for r in range(n)], report
        assert report["checked"] == 2 * 3 * 2 * (5 + 2 * n), report
        assert report["ran"] == ["hier"], report
        assert report["cycles"] == 40, report
        assert report["bound_hier"][0] > 0 and not report["bound_hier"][1], report
    assert proc.returncode == 0, proc.stderr[-3000:]
