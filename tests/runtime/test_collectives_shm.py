"""The shared-memory transport's waiting under pinning and oversubscription, and the launcher.

The correctness of every algorithm over ``shm`` at 2 and 3 ranks is the registry contract
(`tests/contract`); here the same contract runs at 4 ranks pinned or not and at 8 ranks on a
2-core machine, where ranks must yield to peers on their own core instead of spinning.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import collops
from tests.support.contract import check_reports, run_contract

ROOT = Path(__file__).resolve().parents[2]


def _check(collectives, p, seed, bind_to="auto", names=None):
    def keep(collective, name):
        return collective in collectives and (names is None or name in names
                                              or name.startswith("shm_"))

    per_rank = collops.spawn(run_contract, p, seed, keep, transport="shm", timeout=170,
                             bind_to=bind_to)
    check_reports(per_rank, "shm", p, seed, keep)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("bind_to", ["none", "core"])
def test_four_ranks_pinned_or_not(bind_to):
    # pinned ranks yield at once to a peer on their own core; unpinned ones spin first
    _check({"allreduce", "bcast", "scatter", "scan", "barrier"}, 4, seed=5, bind_to=bind_to)


@pytest.mark.timeout(180)
def test_oversubscribed_eight_ranks():
    # every schedule waits through the engine's one wait: automatic selection, the shm
    # protocols (each with its own waits) and one schedule per collective stand for them all
    _check({"allreduce", "alltoall", "allgatherv", "bcast", "reduce_scatter", "gather"}, 8,
           seed=4, names={"auto", "ring", "binomial", "pairwise"})


@pytest.mark.timeout(120)
def test_launcher_runs_the_demo_program():
    proc = subprocess.run(
        [sys.executable, "-m", "collops", "run", "-n", "3", "--timeout", "100",
         str(ROOT / "examples" / "collectives.py"), "300"],
        capture_output=True, text=True, timeout=110)
    assert proc.returncode == 0, proc.stderr
    assert "all results equal numpy's" in proc.stdout
    assert proc.stdout.count(" yes ") == 16
