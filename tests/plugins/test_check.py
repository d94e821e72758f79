"""`collops check` finds each kind of mistake and names the rank and the step."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

FILES = Path(__file__).parent / "files"


def _check(algorithm: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "collops", "check", "--plugin", str(FILES / "broken.py"),
         "--collective", "allgather", "--algorithm", algorithm, "--nprocs", "1-4",
         "--sizes", "0,3"], capture_output=True, text=True, timeout=200, env=dict(os.environ))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("algorithm, words", [
    ("extra_send", r"rank \d: send #\d+ to \d is never received"),
    ("recv_first", r"schedules can deadlock: a cycle of waits through rank \d step \d+"),
    ("racy", r"rank \d: steps \d+ and \d+ touch overlapping elements of RECV concurrently"),
    ("forgets_own", r"rank 0: output elements 0\.\.2 \(of 3\) never written"),
])
def test_each_kind_of_mistake_is_named_with_rank_and_step(algorithm: str, words: str) -> None:
    done = _check(algorithm)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith(f"FAIL  allgather.{algorithm}")
    assert __import__("re").search(words, done.stdout), done.stdout
    assert "hint:" in done.stdout


@pytest.mark.timeout(240)
def test_every_built_in_schedule_passes_the_checker() -> None:
    done = subprocess.run([sys.executable, "-m", "collops", "check", "--nprocs", "1-5",
                           "--sizes", "0,5"], capture_output=True, text=True, timeout=230)
    assert done.returncode == 0, done.stdout[-4000:]
    lines = done.stdout.splitlines()
    assert lines and all(line.startswith("ok ") for line in lines)


def test_a_wrong_result_is_reported_with_the_element_and_numpy_s_value() -> None:
    import numpy as np

    import collops
    from collops.algorithms.registry import Algorithm
    from collops.check import check_algorithm

    def off_by_one(rank, spec, params):  # a bcast whose receivers skip the first element
        b = collops.builder_for(rank, spec)
        n = spec.count
        if rank == spec.root:
            b.copy(collops.RECV(0, n), collops.SEND(0, n))
            for peer in range(spec.size):
                if peer != rank:
                    b.send(peer, collops.SEND(0, n))
        else:
            b.recv(spec.root, collops.RECV(0, n))
            if n > 1:
                b.copy(collops.RECV(0, 1), collops.RECV(n - 1, 1), after=[0])
        return b.build()

    alg = Algorithm("bcast", "off_by_one", "wrong", off_by_one)
    report = check_algorithm(alg, [2], [4])
    assert not report.ok
    text = str(report.problems[0])
    assert "rank 1: output element 0 is" in text and "numpy says" in text
    assert np.dtype(np.int32).name in text
