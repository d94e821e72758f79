"""Seed 003 on real bindings: ``affinity_tree`` on the ``Comm`` path builds its domains from the
machine and the CPUs the launcher bound the ranks to."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from collops.runtime.commbase import binding_facts
from collops.topology.machine import detect_machine

SCRIPT = Path(__file__).parent / "scripts" / "affinity_binding.py"


def _run(bind_to: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "collops", "run", "-n", "4", "--bind-to",
                           bind_to, "--timeout", "120", str(SCRIPT)],
                          capture_output=True, text=True, timeout=200)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(240)
def test_four_ranks_bound_to_cores_build_the_tree_of_their_binding() -> None:
    out = _run("core")
    cpus = [int(c) for c in out["binding"].split(",")]
    assert len(cpus) == 4  # the launcher bound every rank
    threads = [out["thread_of"][str(c)] for c in cpus]
    assert out["facts"] == {"binding.machine": out["machine"],
                            "binding.mapping": ",".join(map(str, threads))}
    evens = [threads[0], threads[2]]  # the sub-communicator of ranks 0 and 2
    assert out["half"]["binding.mapping"] == ",".join(map(str, evens))
    assert f"machine='{out['machine']}' (the ranks' binding)" in out["explain"]


@pytest.mark.timeout(240)
def test_unbound_ranks_keep_the_stand_in_machine() -> None:
    out = _run("none")
    assert out["facts"] == {} and "machine=''" in out["explain"]


def test_facts_need_every_rank_bound_to_a_known_cpu() -> None:
    machine, thread_of = detect_machine()
    some = sorted(thread_of)[:2]
    assert binding_facts(some) == {
        "binding.machine": "x".join(map(str, machine.shape)),
        "binding.mapping": ",".join(str(thread_of[c]) for c in some)}
    assert binding_facts([some[0], None]) == {}
    assert binding_facts([max(thread_of) + 1000]) == {}
