"""Unmodified mpi4py programs: ``collops run --mpi4py`` (script, ``python script``,
``python -m``), and under a real mpiexec, where collops.MPI is mpi4py's own MPI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mpi4py_heat.py"
SCRIPTS = Path(__file__).parent / "scripts"
COLLOPS = [sys.executable, "-m", "collops"]


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("COLLOPS_", "PMI_", "OMPI_", "PMIX_", "HYDRA_"))}


def _run(*command: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(list(command), capture_output=True, text=True, timeout=100,
                          env=_environment(), cwd=cwd, stdin=subprocess.DEVNULL)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("form", [[str(EXAMPLE)], ["python", str(EXAMPLE)],
                                  ["python", "-m", "mpi4py", str(EXAMPLE)],
                                  ["python", "-m", "mpi4py_heat"]],
                         ids=["script", "python-script", "python-m-mpi4py", "python-m-module"])
def test_the_example_runs_unmodified_under_collops_run(form):
    proc = _run(*COLLOPS, "run", "-n", "3", "--mpi4py", *form, cwd=EXAMPLE.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "48 cells over 3 ranks" in proc.stdout and "20 tasks done" in proc.stdout


@pytest.mark.timeout(60)
def test_without_the_option_mpi4py_is_the_real_one():
    code = "import mpi4py, sys; print('shim' in mpi4py.__file__)"
    proc = _run(*COLLOPS, "run", "-n", "1", "python", "-c", code)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stdout + proc.stderr


@pytest.mark.timeout(60)
def test_abort_ends_the_job_with_its_code():
    proc = _run(*COLLOPS, "run", "-n", "3", "--mpi4py", str(SCRIPTS / "abort.py"))
    assert proc.returncode == 7, proc.stdout + proc.stderr


def _mpiexec() -> str | None:
    beside = Path(sys.executable).with_name("mpiexec")
    return str(beside) if beside.exists() else None


@pytest.mark.timeout(120)
@pytest.mark.skipif(_mpiexec() is None, reason="no mpiexec (pip install mpich)")
def test_under_mpiexec_collops_mpi_is_mpi4py_mpi():
    pytest.importorskip("mpi4py")
    proc = _run(str(_mpiexec()), "-n", "2", sys.executable, str(SCRIPTS / "same_module.py"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # mpiexec may forward the ranks' lines run together: read every {...} wherever it is
    lines = sorted((json.loads(found) for found in re.findall(r"\{[^{}]*\}", proc.stdout)),
                   key=lambda d: d["rank"])
    assert lines == [{"rank": 0, "same": True, "sum": 3}, {"rank": 1, "same": True, "sum": 3}]
    proc = _run(str(_mpiexec()), "-n", "2", sys.executable, str(EXAMPLE))
    assert proc.returncode == 0 and "32 cells over 2 ranks" in proc.stdout, proc.stderr
