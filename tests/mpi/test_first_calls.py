"""A communicator's first ``mpi_native`` calls begun in opposite orders on the ranks (MPI
allows it for non-blocking calls on different communicators) complete, under real
``mpiexec`` (`scripts/first_calls.py`): its MPI communicators are made without blocking. And
running out of MPI's communicators is a `CommunicatorLimit` (`scripts/mpi_limit.py`)."""

from __future__ import annotations

import pytest

pytest.importorskip("mpi4py")

from tests.mpi.harness import MPIEXEC, by_rank, mpirun  # noqa: E402

pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich)")


@pytest.mark.timeout(150)
@pytest.mark.parametrize("ranks,per_node", [(2, None), (3, None), (4, "2"), (2, "1")])
def test_first_native_calls_on_two_communicators_in_opposite_orders_complete(ranks, per_node):
    # before: rank 0 blocked making the first communicator's MPI communicators, rank 1 the
    # second's, each waiting for the other for ever. Across "nodes" (COLLOPS_RANKS_PER_NODE)
    # the agreement channel comes with the pool
    options = () if per_node is None else ("-genv", "COLLOPS_RANKS_PER_NODE", per_node)
    proc = mpirun(ranks, "first_calls.py", "6", timeout=120, options=options)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank, report in by_rank(proc, ranks).items():
        assert report["cycles"] == 6 and report["wrong"] == [], (rank, report)
        assert report["pools"] == 1, (rank, report)  # the freed communicators' pools went


@pytest.mark.timeout(120)
def test_a_first_native_call_a_member_never_begins_times_out_naming_the_making():
    proc = mpirun(2, "first_calls.py", "late", timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    reports = by_rank(proc, 2)
    kind, message = reports[0]["error"]
    assert kind == "CollectiveTimeout", reports
    assert "rank 0" in message and "allreduce[mpi_native]" in message, message
    assert "MPI communicators to be made" in message, message
    assert reports[1]["error"] == [None, ""], reports
    assert reports[0]["after"] and reports[1]["after"], reports


@pytest.mark.timeout(150)
def test_running_out_of_mpi_communicators_is_a_communicator_limit_and_free_gives_them_back():
    proc = mpirun(2, "mpi_limit.py", timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank, report in by_rank(proc, 2).items():
        kind, message = report["error"]
        assert kind == "CommunicatorLimit", report
        assert f"rank {rank}" in message and "free()" in message, message
        assert report["live"] > 300, report  # MPICH's 2,048 contexts, 4 per communicator
        assert report["after"], report


@pytest.mark.timeout(150)
@pytest.mark.parametrize("ranks,per_node", [(4, "2"), (3, "1"), (2, None)])
def test_first_hier_calls_on_two_communicators_in_opposite_orders_complete(ranks, per_node):
    # hier's node and leader communicators per slot were split by the first hier call on
    # each: the same wait for ever across "nodes". Within one node they are the call's own
    options = () if per_node is None else ("-genv", "COLLOPS_RANKS_PER_NODE", per_node)
    proc = mpirun(ranks, "first_calls.py", "4", "hier", timeout=120, options=options)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank, report in by_rank(proc, ranks).items():
        assert report["cycles"] == 4 and report["wrong"] == [], (rank, report)
        assert report["pools"] == 1, (rank, report)


@pytest.mark.timeout(150)
@pytest.mark.parametrize("ranks,per_node,algorithm", [(3, None, "mpi_native"),
                                                      (2, None, "hier"), (4, "2", "hier")])
def test_idups_begun_and_waited_in_any_order_on_three_communicators(ranks, per_node,
                                                                     algorithm):
    # each rank begins and waits its idups in an order of its own: their agreements end in
    # different orders on different ranks, and each rank made the new communicator's MPI
    # communicators by blocking calls where its agreement ended (rank 0 the first's, rank 1
    # the second's: for ever, in 3 runs of 3). Now they are begun at the idup, without
    # blocking, and the board waits for the first blocking call
    options = () if per_node is None else ("-genv", "COLLOPS_RANKS_PER_NODE", per_node)
    args = ("idups", "25") + (("hier",) if algorithm == "hier" else ())
    proc = mpirun(ranks, "first_calls.py", *args, timeout=120, options=options)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank, report in by_rank(proc, ranks).items():
        assert report["wrong"] == [] and report["pools"] == 1, (rank, report)


@pytest.mark.timeout(120)
def test_a_first_call_waiting_for_its_mpi_communicators_says_so_in_a_stall_report():
    proc = mpirun(2, "first_calls.py", "stalled", timeout=90,
                  options=("-genv", "COLLOPS_STALL_REPORT", "0.5"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert all(r["right"] for r in by_rank(proc, 2).values())
    assert "rank 0 has waited" in proc.stderr and "allreduce[mpi_native]" in proc.stderr
    assert "MPI communicators to be made" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.timeout(120)
def test_an_idup_that_fails_leaves_none_of_its_mpi_requests_watched():
    # a finished request left watched ends every later wait of the transport at once
    proc = mpirun(2, "first_calls.py", "idup_given_up", timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    reports = by_rank(proc, 2)
    assert reports[0]["error"] == "CollectiveTimeout", reports
    assert reports[0]["watched"] == 0 and reports[1]["watched"] == 0, reports
    assert reports[0]["pool"] == 8, reports  # its agreement's first call's, still in flight
