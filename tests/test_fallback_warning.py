"""The loud fallback: without its compiled runners, the first shm communicator of a process
warns once with a `collops.PerformanceWarning`; a normal install, or ``COLLOPS_COMPILED=0``
(the user's choice), does not."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

import collops
from collops import compiled, config

#: a program that (optionally) blocks the compiled runners' import, then runs an allreduce
#: on 2 shm ranks twice and checks it against numpy
PROGRAM = textwrap.dedent("""
    import importlib.abc
    import sys

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name in ("collops.shm._direct", "collops.shm._stream", "collops.runtime._slots"):
                raise ImportError(f"{name} blocked by the test")
            return None

    if sys.argv[1] == "block":
        sys.meta_path.insert(0, Blocker())

    import numpy as np

    import collops

    def work(comm):
        x = np.arange(5.0) * (comm.rank + 1)
        return [comm.allreduce(x).tolist() for _ in range(2)], comm.allgather_object(comm.rank)

    expected = (np.arange(5.0) * 3).tolist()
    assert collops.spawn(work, 2, transport="shm", timeout=60) == [([expected] * 2, [0, 1])] * 2
    print("ok")
""")


def _run(mode: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env}, check=True)


@pytest.mark.usefixtures("compiled_on")  # a test of the compiled route
def test_missing_runners_warn_once_per_rank_naming_cause_and_fix():
    result = _run("block")
    assert result.stdout.strip() == "ok"
    assert result.stderr.count("PerformanceWarning") == 2  # one per rank, not per call
    assert "collops.shm._direct blocked by the test" in result.stderr
    assert "C compiler" in result.stderr and "COLLOPS_COMPILED=0" in result.stderr


def test_choosing_the_pure_python_path_does_not_warn():
    result = _run("block", COLLOPS_COMPILED="0")
    assert result.stdout.strip() == "ok" and "PerformanceWarning" not in result.stderr


def test_a_normal_install_does_not_warn():
    result = _run("normal")
    assert result.stdout.strip() == "ok" and "PerformanceWarning" not in result.stderr
    assert all(r.present for r in compiled.runner_status())


@pytest.fixture
def missing_direct(monkeypatch):
    """The ``_direct`` runner as if it had not loaded, and no warning given yet."""
    from collops.shm import direct

    monkeypatch.setattr(direct, "_direct", None)
    monkeypatch.setattr(compiled, "_warned", False)


def test_the_status_reports_the_missing_runner(missing_direct):
    status = {r.module: r for r in compiled.runner_status()}
    assert not status["collops.shm._direct"].present
    assert "not loaded" in (status["collops.shm._direct"].error or "")
    assert status["collops.shm._stream"].present


@pytest.mark.usefixtures("compiled_on")  # a test of the compiled route
def test_the_warning_is_a_user_warning_given_once(missing_direct):
    assert issubclass(collops.PerformanceWarning, UserWarning)
    with pytest.warns(collops.PerformanceWarning, match="collops.shm._direct"):
        compiled.warn_if_interpreted()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled.warn_if_interpreted()


def test_the_user_choice_silences_it(missing_direct, monkeypatch):
    monkeypatch.setattr(config, "settings", dataclasses.replace(config.settings, compiled=False))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled.warn_if_interpreted()
