"""Running a script of ``tests/mpi/scripts`` under real ``mpiexec`` and reading its output."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.leaks import left_behind, shm_names, still_running, tagged
from tests.support.output import json_objects

SCRIPTS = Path(__file__).parent / "scripts"


def _mpiexec() -> str | None:
    beside = Path(sys.executable).with_name("mpiexec")
    return str(beside) if beside.exists() else shutil.which("mpiexec")


MPIEXEC = _mpiexec()


def environment() -> dict[str, str]:
    """The caller's environment without collops settings, so ``init()`` must detect MPI."""
    return {k: v for k, v in os.environ.items() if not k.startswith("COLLOPS_")}


def mpirun(n: int, script: str, *args: str, timeout: float = 80,
           options: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Run ``scripts/script`` on ``n`` ranks (``options``: mpiexec's); fail (not hang) past
    ``timeout`` seconds."""
    assert MPIEXEC is not None
    path = SCRIPTS / script
    before, env = shm_names(""), tagged(environment())
    proc = subprocess.run([MPIEXEC, *options, "-n", str(n), sys.executable, str(path), *args],
                          capture_output=True, text=True, timeout=timeout, env=env,
                          stdin=subprocess.DEVNULL)
    left = still_running(str(path), env)
    assert not left, f"processes left behind: {left}"
    assert not left_behind(before, ""), f"shared memory left behind: {left_behind(before, '')}"
    return proc


reports = json_objects


def by_rank(proc: subprocess.CompletedProcess, n: int) -> dict[int, dict[str, Any]]:
    """The per-rank reports of a job, checked to come from every rank."""
    got = {r["rank"]: r for r in reports(proc.stdout)}
    assert sorted(got) == list(range(n)), proc.stdout + proc.stderr
    return got
