"""The point-to-point message tests under a real ``mpiexec`` (4 ranks: the world and splits of
it), through `tests/mpi/scripts/p2p.py`; that they are MPI's own messages, and a dead peer,
through `tests/mpi/scripts/p2p_mapping.py`."""

from __future__ import annotations

import inspect

import pytest

pytest.importorskip("mpi4py")

from tests.mpi.harness import MPIEXEC, by_rank, mpirun, reports  # noqa: E402
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


@pytest.mark.timeout(150)
def test_messages_are_mpis_own_on_each_communicators_mpi_communicator():
    proc = mpirun(3, "p2p_mapping.py", "mapping", timeout=120)
    wanted = {"world_group", "split_group", "tag_ub", "dup_free", "blocking_order"}
    seen = set()
    for report in by_rank(proc, 3).values():
        assert "error" not in report, report["error"]
        assert all(report["checks"].values()), report
        seen.update(report["checks"])
    assert seen == wanted | {f"{c}_{k}" for c in ("world", "split")
                             for k in ("tag", "bytes", "data")}
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.timeout(90)
def test_a_receive_waiting_for_a_rank_that_dies_raises_peer_failed_within_two_seconds():
    proc = mpirun(2, "p2p_mapping.py", "dies", timeout=60,
                  options=("-disable-auto-cleanup",))
    got = {r["rank"]: r for r in reports(proc.stdout)}
    assert set(got) == {0}, proc.stdout + proc.stderr
    assert got[0]["error"] == "PeerFailed" and got[0]["failed_rank"] == 1, got[0]
    assert "rank 1" in got[0]["message"] and got[0]["seconds"] < 10, got[0]  # told, not timed out
