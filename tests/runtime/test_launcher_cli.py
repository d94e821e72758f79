"""``collops run`` from the shell: Ctrl-C pressed any number of times ends the job with 130 and
no internal traceback; ``--timeout`` must be positive; ``collops --version``."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import collops
from collops.runtime.launcher import EXIT_INTERRUPTED
from tests.support.leaks import collops_segments, left_behind

pytestmark = pytest.mark.timeout(90)

#: a rank that records its pid, then sleeps; it ignores SIGTERM, so the launcher is still
#: ending the job (waiting for the ranks, then killing them) when the next SIGINTs arrive
SLEEPER = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(os.path.join(sys.argv[1], "pid" + os.environ["COLLOPS_RANK"]), "w").write(str(os.getpid()))
time.sleep(60)
"""


def _collops(*args: str, **kwargs: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "collops", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kwargs)  # type: ignore[call-overload]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("interrupts,gap", [(1, 0.0), (2, 0.05), (2, 0.3), (6, 0.02)])
def test_any_number_of_interrupts_end_the_job_with_130(tmp_path: Path, interrupts: int,
                                                      gap: float) -> None:
    program = tmp_path / "sleeper.py"
    program.write_text(textwrap.dedent(SLEEPER))
    before = collops_segments()
    launcher = _collops("run", "-n", "2", str(program), str(tmp_path))
    deadline = time.monotonic() + 30
    while not all((tmp_path / f"pid{r}").exists() for r in range(2)):
        assert time.monotonic() < deadline and launcher.poll() is None
        time.sleep(0.05)
    time.sleep(0.2)
    for _ in range(interrupts):
        launcher.send_signal(signal.SIGINT)
        time.sleep(gap)
    out, err = launcher.communicate(timeout=30)
    text = err.decode()
    assert launcher.returncode == EXIT_INTERRUPTED, text
    assert "Traceback" not in text and "_Interrupted" not in text, text
    assert "SIGINT" in text, text
    for r in range(2):
        assert not _alive(int((tmp_path / f"pid{r}").read_text()))
    assert left_behind(before) == set()


@pytest.mark.parametrize("value", ["0", "-1", "-0.5", "nan"])
def test_a_timeout_that_is_not_positive_is_a_usage_error(tmp_path: Path, value: str) -> None:
    program = tmp_path / "never.py"
    program.write_text("raise SystemExit('the program must not start')\n")
    launcher = _collops("run", "-n", "2", f"--timeout={value}", str(program))
    out, err = launcher.communicate(timeout=30)
    assert launcher.returncode == 2, err
    assert "--timeout" in err.decode() and value in err.decode(), err
    assert b"must not start" not in err


def test_a_positive_timeout_is_accepted(tmp_path: Path) -> None:
    program = tmp_path / "quick.py"
    program.write_text("import collops\nprint(collops.init().allreduce([1])[0])\n")
    launcher = _collops("run", "-n", "2", "--timeout", "0.5e2", str(program))
    out, err = launcher.communicate(timeout=60)
    assert launcher.returncode == 0, err
    assert out.split() == [b"2", b"2"]


@pytest.mark.timeout(60)
def test_a_missing_program_or_no_ranks_is_said_once_before_any_rank_starts(
        tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.py")
    for args, said in ((["-n", "3", missing], f"no such program file: {missing!r}"),
                       (["-n", "3", "python", missing], "no such program file"),
                       (["-n", "0", missing], "-n must be at least 1")):
        launcher = _collops("run", *args)
        out, err = launcher.communicate(timeout=30)
        assert launcher.returncode == 2, err
        assert err.decode().count(said) == 1 and out == b"", err
    # ``python -c`` and ``python -m`` name no file
    launcher = _collops("run", "-n", "2", "python", "-c", "print('ran')")
    out, err = launcher.communicate(timeout=30)
    assert launcher.returncode == 0, err
    assert out.split() == [b"ran", b"ran"]


def test_version_prints_the_version() -> None:
    launcher = _collops("--version")
    out, err = launcher.communicate(timeout=30)
    assert launcher.returncode == 0, err
    assert out.decode().split() == ["collops", collops.__version__]

