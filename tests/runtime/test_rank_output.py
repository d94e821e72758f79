"""The ranks' output under `collops run` and `collops.spawn(transport="shm")`: whole lines,
each exactly once and in its rank's order, also from a rank killed by SIGKILL; stdin to rank 0."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import collops
from collops.runtime.launcher import launch_program
from tests.support.leaks import collops_segments, left_behind

pytestmark = pytest.mark.timeout(120)

LINE = re.compile(r"(?:\[(\d+)\] )?rank (\d+) (out|err) (\d+) (x*)")

# print() with several arguments: under PYTHONUNBUFFERED=1 each piece is a write of its own
CHATTY = """
import os, sys
rank = int(os.environ["COLLOPS_RANK"])
for i in range({count}):
    print("rank", rank, "out", i, "x" * (i % 37))
    if i % 10 == 0:
        print("rank", rank, "err", i, "x" * (i % 37), file=sys.stderr)
    if rank == {killed} and i == {kill_at}:
        sys.stdout.write("an unfinished line")
        os.kill(os.getpid(), 9)
"""


def program(tmp_path: Path, count: int = 1000, killed: int = -1, kill_at: int = -1) -> str:
    path = tmp_path / "chatty.py"
    path.write_text(textwrap.dedent(CHATTY.format(count=count, killed=killed, kill_at=kill_at)))
    return str(path)


def numbers_by_rank(text: str, stream: str, tag: bool) -> dict[int, list[int]]:
    """Every line must be one whole numbered line; the numbers each rank's lines carry."""
    found: dict[int, list[int]] = {}
    for line in text.splitlines():
        match = LINE.fullmatch(line)
        assert match is not None, f"mangled line {line!r}"
        tag_rank, rank, which, number, xs = match.groups()
        assert which == stream and len(xs) == int(number) % 37, line
        assert (tag_rank is not None) == tag and tag_rank in (None, rank), line
        found.setdefault(int(rank), []).append(int(number))
    return found


def expected(count: int, step: int = 1) -> list[int]:
    return list(range(0, count, step))


@pytest.mark.parametrize("tag", [False, True], ids=["plain", "tag-output"])
def test_every_line_of_four_chatty_ranks_arrives_whole_once_and_in_order(
        tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tag: bool) -> None:
    monkeypatch.setenv("PYTHONUNBUFFERED", "1")
    fds_before = set(os.listdir("/proc/self/fd"))
    assert launch_program(4, [program(tmp_path)], tag_output=tag) == 0
    out, err = capfd.readouterr()
    assert numbers_by_rank(out, "out", tag) == {r: expected(1000) for r in range(4)}
    assert numbers_by_rank(err, "err", tag) == {r: expected(1000, 10) for r in range(4)}
    assert set(os.listdir("/proc/self/fd")) == fds_before
    assert not [t for t in threading.enumerate() if t.name == "collops-output"]


@pytest.mark.parametrize("unbuffered", ["1", None], ids=["PYTHONUNBUFFERED=1", "unset"])
def test_a_rank_killed_by_sigkill_loses_none_of_its_complete_lines(
        tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        unbuffered: str | None) -> None:
    if unbuffered is None:
        monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    else:
        monkeypatch.setenv("PYTHONUNBUFFERED", unbuffered)
    before = collops_segments()
    code = launch_program(4, [program(tmp_path, killed=2, kill_at=299)], tag_output=True)
    assert code == 128 + 9
    out, err = capfd.readouterr()
    # the partial last line arrives as it was written; a line break follows it only when
    # another rank's line comes after it
    assert "[2] an unfinished line" in out
    out = out.replace("[2] an unfinished line\n", "").replace("[2] an unfinished line", "")
    by_rank = numbers_by_rank(out, "out", tag=True)
    assert by_rank[2] == expected(300)
    for rank in (0, 1, 3):  # the survivors are ended after a grace: what they wrote, in order
        assert by_rank.get(rank, []) == expected(len(by_rank.get(rank, [])))
    errors = [line for line in err.splitlines() if not line.startswith("collops run:")]
    assert numbers_by_rank("\n".join(errors), "err", tag=True)[2] == expected(300, 10)
    assert left_behind(before) == set()


def test_stdin_goes_to_rank_0_alone(tmp_path: Path) -> None:
    path = tmp_path / "reads.py"
    path.write_text("import os, sys\n"
                    "print(os.environ['COLLOPS_RANK'], repr(sys.stdin.read()))\n")
    proc = subprocess.run([sys.executable, "-m", "collops", "run", "-n", "3", str(path)],
                          input=b"to the first rank\n", capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.decode().splitlines()) == [
        "0 'to the first rank\\n'", "1 ''", "2 ''"]


def test_a_binary_line_and_a_long_line_pass_through_unharmed(
        tmp_path: Path, capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    path = tmp_path / "binary.py"
    path.write_text(textwrap.dedent("""
        import os, sys
        rank = int(os.environ["COLLOPS_RANK"])
        if rank == 0:
            sys.stdout.buffer.write(bytes(range(256)) + b"\\n")
            sys.stdout.buffer.write(b"abcdefghij" * 300_000 + b"\\n")
        else:
            for i in range(2000):
                print("rank", rank, "out", i, "x" * (i % 37))
    """))
    assert launch_program(3, [str(path)]) == 0
    lines = capfdbinary.readouterr().out.split(b"\n")
    assert lines.pop() == b""
    head, tail = bytes(range(256)).split(b"\n")  # it holds one "\n" (and one "\r")
    assert head in lines and tail in lines
    assert b"abcdefghij" * 300_000 in lines
    rest = [line.decode() for line in lines if line.startswith(b"rank ")]
    assert numbers_by_rank("\n".join(rest), "out", tag=False) == {
        1: expected(2000), 2: expected(2000)}


def _print_in_pieces(comm: collops.Comm, count: int) -> int:
    for i in range(count):
        for piece in (f"rank {comm.rank} ", f"out {i} ", "x" * (i % 37), "\n"):
            sys.stdout.write(piece)
            sys.stdout.flush()
        if i % 10 == 0:
            print("rank", comm.rank, "err", i, "x" * (i % 37), file=sys.stderr, flush=True)
    return comm.rank


def test_spawn_over_shm_forwards_whole_lines_too(capfd: pytest.CaptureFixture[str]) -> None:
    fds_before = set(os.listdir("/proc/self/fd"))
    assert collops.spawn(_print_in_pieces, 4, 1000, transport="shm", timeout=60) == [0, 1, 2, 3]
    out, err = capfd.readouterr()
    assert numbers_by_rank(out, "out", tag=False) == {r: expected(1000) for r in range(4)}
    assert numbers_by_rank(err, "err", tag=False) == {r: expected(1000, 10) for r in range(4)}
    assert set(os.listdir("/proc/self/fd")) == fds_before
    assert not [t for t in threading.enumerate() if t.name == "collops-output"]
