"""The collective correctness suite over the shared-memory transport, on real processes.

Each test starts one job per (collective, size) that runs every registered algorithm on every
case in a loop (processes are expensive to start), then checks each result against numpy.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import collops
from collops.algorithms import algorithms, all_algorithms
from tests.runtime.harness import call_collective
from tests.support.cases import assert_matches, cases_for

ROOT = Path(__file__).resolve().parents[2]
COLLECTIVES = sorted({a.collective for a in all_algorithms() if not a.needs})


def _run_all(comm, collective, p, seed):
    out = []
    for alg in algorithms(collective):
        if alg.needs:
            continue
        for i, case in enumerate(cases_for(collective, p, seed=seed)):
            if alg.eligible(case.specs[0]):
                out.append((alg.name, i, call_collective(comm, case, alg.name)))
    return out


def _check(collective, p, seed, transport="shm", bind_to="auto"):
    per_rank = collops.spawn(_run_all, p, collective, p, seed, transport=transport, timeout=120,
                             bind_to=bind_to)
    cases = cases_for(collective, p, seed=seed)
    seen = set()
    for k, (name, i, _) in enumerate(per_rank[0]):
        seen.add(name)
        results = [per_rank[r][k][2] for r in range(p)]
        try:
            assert_matches(cases[i], results)
        except AssertionError as exc:
            raise AssertionError(f"{collective}[{name}] case {cases[i].id}: {exc}") from exc
    assert seen, f"no algorithm of {collective} ran at p={p}"


@pytest.mark.timeout(180)
@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("p", [2, 3, 4])
def test_every_algorithm_over_shm(collective, p):
    _check(collective, p, seed=3)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("bind_to", ["none", "core"])
@pytest.mark.parametrize("collective", ["allreduce", "bcast", "scatter", "scan", "barrier"])
def test_four_ranks_pinned_or_not(collective, bind_to):
    # pinned ranks yield at once to a peer on their own core; unpinned ones spin first
    _check(collective, 4, seed=5, bind_to=bind_to)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("collective", ["allreduce", "alltoall", "allgatherv", "bcast",
                                        "reduce_scatter", "gather"])
def test_oversubscribed_eight_ranks(collective):
    _check(collective, 8, seed=4)


@pytest.mark.timeout(120)
def test_launcher_runs_the_demo_program():
    proc = subprocess.run(
        [sys.executable, "-m", "collops", "run", "-n", "3", "--timeout", "100",
         str(ROOT / "examples" / "collectives.py"), "300"],
        capture_output=True, text=True, timeout=110)
    assert proc.returncode == 0, proc.stderr
    assert "all results equal numpy's" in proc.stdout
    assert proc.stdout.count(" yes ") == 16
