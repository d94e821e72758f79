"""`launch_program`: exit statuses, tagged output, failures, timeouts, Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from collops.runtime.launcher import EXIT_INTERRUPTED, EXIT_TIMEOUT, launch_program
from tests.support.leaks import collops_segments, left_behind

pytestmark = pytest.mark.timeout(60)

PRELUDE = """
import os, sys, time
import numpy as np
from collops.shm.transport import ShmTransport
t = ShmTransport.from_env()
def wait(handles):
    while not all(h.done for h in handles):
        t.wait_for_activity(1.0)
"""


def script(tmp_path: Path, body: str) -> str:
    """Write a rank program (the prelude attaches its transport) and return its path."""
    path = tmp_path / "program.py"
    path.write_text(PRELUDE + textwrap.dedent(body))
    return str(path)


RING = """
    right, left = (t.rank + 1) % t.size, (t.rank - 1) % t.size
    out = np.zeros(1, dtype=np.int64)
    wait([t.isend(right, 1, memoryview(np.array([t.rank], dtype=np.int64)).cast("B")),
          t.irecv(left, 1, memoryview(out).cast("B"))])
    assert out[0] == left
    print(f"rank {t.rank} of {t.size} got {out[0]}")
    t.close()
"""


def test_a_successful_program_exits_0_and_tags_its_lines(tmp_path: Path,
                                                         capfd: pytest.CaptureFixture[str]
                                                         ) -> None:
    assert launch_program(3, [script(tmp_path, RING)], tag_output=True) == 0
    lines = sorted(capfd.readouterr().out.splitlines())
    assert lines == [f"[{r}] rank {r} of 3 got {(r - 1) % 3}" for r in range(3)]


def test_the_environment_describes_the_job(tmp_path: Path,
                                           capfd: pytest.CaptureFixture[str]) -> None:
    body = 'print(os.environ["COLLOPS_TRANSPORT"], os.environ["COLLOPS_RANK"], ' \
           'os.environ["COLLOPS_SIZE"], t.rank, t.size)\n'
    assert launch_program(2, [script(tmp_path, body)]) == 0
    assert sorted(capfd.readouterr().out.splitlines()) == ["shm 0 2 0 2", "shm 1 2 1 2"]


def test_exit_status_is_the_first_failing_ranks(tmp_path: Path) -> None:
    # rank 2 fails only well after rank 1 has (a fixed delay from its own start would not
    # order them on a loaded machine, where one rank's start can lag another's by seconds)
    marker = tmp_path / "rank1-failing"
    body = f"""
    if t.rank == 1:
        open({str(marker)!r}, "w").close()
        sys.exit(3)
    if t.rank == 2:
        while not os.path.exists({str(marker)!r}):
            time.sleep(0.01)
        time.sleep(0.5)
        sys.exit(5)
    """
    assert launch_program(3, [script(tmp_path, body)]) == 3


def test_an_exception_ends_the_job_promptly_with_its_traceback(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    body = """
    if t.rank == 1:
        raise RuntimeError("rank one gives up")
    wait([t.irecv(1, 0, memoryview(bytearray(8)))])  # never sent
    """
    start = time.monotonic()
    assert launch_program(2, [script(tmp_path, body)], tag_output=True) == 1
    assert time.monotonic() - start < 15
    err = capfd.readouterr().err
    assert "[1] RuntimeError: rank one gives up" in err
    assert "rank 1 exited with status 1" in err
    assert "rank 0: PeerFailed — rank 1 died" in err  # a follow-on: one line


def test_a_rank_killed_by_a_signal_gives_128_plus_signal(tmp_path: Path) -> None:
    body = """
    if t.rank == 0:
        os.kill(os.getpid(), 9)
    wait([t.irecv(0, 0, memoryview(bytearray(8)))])
    """
    assert launch_program(2, [script(tmp_path, body)]) == 128 + 9


def test_a_timeout_kills_every_rank(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    start = time.monotonic()
    assert launch_program(2, [script(tmp_path, "time.sleep(30)\n")], timeout=2) == EXIT_TIMEOUT
    assert time.monotonic() - start < 10
    assert "timed out after 2 s" in capfd.readouterr().err


def test_ctrl_c_of_the_launcher_ends_every_rank(tmp_path: Path) -> None:
    program = script(tmp_path, """
    open(os.environ["PIDS"] + str(t.rank), "w").write(str(os.getpid()))
    time.sleep(30)
    """)
    before = collops_segments()
    launcher = subprocess.Popen(
        [sys.executable, "-c", "import sys; from collops.runtime.launcher import launch_program;"
         f"sys.exit(launch_program(2, [{program!r}]))"],
        env={**os.environ, "PIDS": str(tmp_path / "pid")},
        stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while not all((tmp_path / f"pid{r}").exists() for r in range(2)):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.2)
    launcher.send_signal(signal.SIGINT)
    assert launcher.wait(timeout=20) == EXIT_INTERRUPTED
    assert launcher.stderr is not None and b"SIGINT" in launcher.stderr.read()
    for r in range(2):
        pid = int((tmp_path / f"pid{r}").read_text())
        assert not Path(f"/proc/{pid}").exists() or "Z" in _state(pid)
    assert left_behind(before) == set()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return "Z"
