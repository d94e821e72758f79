"""``mpi_native``'s compiled whole call (`collops.mpi.compiled`, ``collops.mpi._native``):
results against numpy, the routes handed back to Python, errors still named, the watchdog's
view, and the MPI library it takes its functions from."""

from __future__ import annotations

import importlib.util

import pytest

pytest.importorskip("mpi4py")

from tests.mpi.harness import MPIEXEC, by_rank, mpirun  # noqa: E402

pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich)")
BUILT = importlib.util.find_spec("collops.mpi._native") is not None
COVERED = {"allreduce", "scan", "reduce_scatter_block", "allgather", "alltoall", "barrier",
           "bcast"}


@pytest.mark.timeout(200)
@pytest.mark.parametrize(("n", "route", "nodes"), [
    (2, "compiled", "one node"), (3, "compiled", "one node"), (2, "python", "one node"),
    (3, "python", "one node"), (3, "compiled", "a node per rank")])
def test_bound_calls_match_numpy_hand_back_and_name_their_errors(n, route, nodes):
    # a node per rank (COLLOPS_RANKS_PER_NODE=1): no board, every call's agreement handed
    # back to Python's messages (`BlockingCall.finish`) before the compiled MPI call
    if route == "compiled" and not BUILT:
        pytest.skip("collops.mpi._native is not built (no mpi.h)")
    options = ("-genv", "COLLOPS_COMPILED", "0") if route == "python" else ()
    if nodes == "a node per rank":
        options += ("-genv", "COLLOPS_RANKS_PER_NODE", "1")
    proc = mpirun(n, "compiled_calls.py", timeout=180, options=options)
    for rank, report in by_rank(proc, n).items():
        assert report["checked"] == 720 + 12, report
        # which bound calls ran compiled: every covered one on the compiled route (the
        # rooted ones where this rank is the root, exscan beyond rank 0), none on Python's
        expected = COVERED | ({"reduce"} if rank == n - 1 else set()) \
            | ({"gather"} if rank == 0 else set()) | ({"exscan"} if rank else set())
        compiled = {c for c, yes in report["compiled"].items() if yes}
        assert compiled == (expected if route == "compiled" else set()), report["compiled"]
        assert report["named"] == (route == "compiled"), report
        error, message = report["mismatch"]
        assert error == "CollectiveMismatch", report
        mine, theirs = ("allreduce", "allgather") if rank == 0 else ("allgather", "allreduce")
        if nodes == "one node":  # each rank reads the others' entries on the board
            assert f"rank {rank}: called {mine}[mpi_native]" in message, message
            assert f"checked before MPI_{mine.capitalize()}" in message, message
        else:  # in messages, a third rank may hear of it from a peer that gave the call up
            assert f"called {mine}[mpi_native]" in message or \
                "gave the call up: it raised CollectiveMismatch" in message, message
        assert f"called {theirs}[mpi_native]" in message, message
        assert report["after"] == n, report  # the communicator is still usable
        error, message = report["failed"]
        assert error == "TransportError", report
        assert message.startswith(f"rank {rank}: allreduce[mpi_native] call #7 "
                                  "(MPI_Allreduce) failed: MPI error"), message
        # handles of another MPI, a library not loaded: refused; one libmpi in the process
        assert report["refused"] == ([False] * 3 if BUILT else []), report
        assert len(report["libmpi"]) == 1, report
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.timeout(120)
@pytest.mark.skipif(not BUILT, reason="collops.mpi._native is not built (no mpi.h)")
def test_a_rank_blocked_in_the_compiled_call_shows_the_watchdog_which():
    proc = mpirun(3, "compiled_watch.py", timeout=100)
    for rank, report in by_rank(proc, 3).items():
        assert report["compiled"], report
        # the sleeping rank was never blocked; the others were, inside call #5, the GIL free
        assert report["inside"] == (None if rank == 1 else ["allreduce[mpi_native]", 5]), \
            report
        assert report["after"] is None, report
    assert proc.returncode == 0, proc.stderr[-3000:]
