"""`OutputForwarder`: whole lines from many writers, tags, partial and long lines, cleanup."""

from __future__ import annotations

import os
import re
import tempfile
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from collops.runtime.launcher_output import IDLE, LINE_LIMIT, OutputForwarder

pytestmark = pytest.mark.timeout(60)


class Sinks:
    """Two temporary files standing in for the launcher's stdout and stderr."""

    def __init__(self) -> None:
        self.files = [tempfile.TemporaryFile(), tempfile.TemporaryFile()]

    def fds(self) -> tuple[int, int]:
        return self.files[0].fileno(), self.files[1].fileno()

    def read(self, which: int) -> bytes:
        return os.pread(self.files[which].fileno(), 1 << 30, 0)

    def close(self) -> None:
        for f in self.files:
            f.close()


@pytest.fixture
def sinks() -> Iterator[Sinks]:
    s = Sinks()
    yield s
    s.close()


def tagged(prefix: bytes, data: bytes) -> bytes:
    """``data`` with ``prefix`` before every line (a line ends after ``\\n``)."""
    return b"".join(prefix + part for part in re.findall(rb"[^\n]*\n|[^\n]+$", data))


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def numbered_lines(rank: int, count: int, step: int = 1) -> list[bytes]:
    return [b"rank %d line %d %s\n" % (rank, i, b"x" * (i % 50)) for i in range(0, count, step)]


def writer(fd: int, rank: int, count: int, seed: int) -> threading.Thread:
    """A thread writing numbered lines in random pieces, then closing its pipe."""
    def run() -> None:
        rng = np.random.default_rng(seed)
        for line in numbered_lines(rank, count):
            cuts = sorted(rng.integers(0, len(line), 2))
            for piece in (line[:cuts[0]], line[cuts[0]:cuts[1]], line[cuts[1]:]):
                if piece:
                    write_all(fd, piece)
        os.close(fd)
    return threading.Thread(target=run)


@pytest.mark.parametrize("tag", [False, True], ids=["plain", "tagged"])
def test_lines_written_in_pieces_by_many_ranks_arrive_whole(sinks: Sinks, tag: bool) -> None:
    forwarder = OutputForwarder(tag, *sinks.fds())
    ends = [forwarder.pipes(rank) for rank in range(4)]
    forwarder.start()
    threads = [writer(out, rank, 1000, seed=rank) for rank, (out, _) in enumerate(ends)]
    threads += [writer(err, rank, 100, seed=10 + rank) for rank, (_, err) in enumerate(ends)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    forwarder.close()
    for which, count in ((0, 1000), (1, 100)):
        lines = sinks.read(which).splitlines(keepends=True)
        assert len(lines) == 4 * count
        for rank in range(4):
            prefix = b"[%d] " % rank if tag else b""
            mine = [line for line in lines if line.startswith(prefix + b"rank %d " % rank)]
            assert mine == [prefix + line for line in numbered_lines(rank, count)]


def test_bytes_of_every_value_pass_through_unchanged(sinks: Sinks) -> None:
    data = bytes(range(256)) * 64 + b"no newline at the end"
    forwarder = OutputForwarder(True, *sinks.fds())
    out, err = forwarder.pipes(3)
    forwarder.start()
    write_all(out, data)
    os.close(out)
    os.close(err)
    forwarder.close()
    assert sinks.read(0) == tagged(b"[3] ", data)


def test_a_long_line_stays_whole_while_another_rank_writes_lines(sinks: Sinks) -> None:
    rng = np.random.default_rng(5)
    long_line = bytes(rng.integers(ord("a"), ord("z") + 1, 16 * LINE_LIMIT, dtype=np.uint8))
    forwarder = OutputForwarder(False, *sinks.fds())
    (out0, err0), (out1, err1) = forwarder.pipes(0), forwarder.pipes(1)
    forwarder.start()

    def long_writer() -> None:
        for start in range(0, len(long_line), 4096):
            write_all(out0, long_line[start:start + 4096])
        write_all(out0, b"\n")
        os.close(out0)

    threads = [threading.Thread(target=long_writer), writer(out1, 1, 2000, seed=1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for fd in (err0, err1):
        os.close(fd)
    forwarder.close()
    lines = sinks.read(0).splitlines(keepends=True)
    assert long_line + b"\n" in lines
    assert [line for line in lines if line != long_line + b"\n"] == numbered_lines(1, 2000)


def test_an_unfinished_line_is_written_once_its_rank_is_quiet(sinks: Sinks) -> None:
    forwarder = OutputForwarder(True, *sinks.fds())
    out, err = forwarder.pipes(0)
    forwarder.start()
    write_all(err, b"how many? ")
    deadline = time.monotonic() + 30 * IDLE + 10
    while sinks.read(1) != b"[0] how many? ":
        assert time.monotonic() < deadline, sinks.read(1)
        time.sleep(IDLE / 5)
    write_all(err, b"42\n")
    os.close(out)
    os.close(err)
    forwarder.close()
    assert sinks.read(1) == b"[0] how many? 42\n"


def test_a_rank_does_not_continue_another_ranks_unfinished_line(sinks: Sinks) -> None:
    forwarder = OutputForwarder(False, *sinks.fds())
    (out0, err0), (out1, err1) = forwarder.pipes(0), forwarder.pipes(1)
    forwarder.start()
    write_all(out0, b"first, unfinished")
    os.close(out0)  # its pipe closes: the piece is written as it is
    deadline = time.monotonic() + 20
    while not sinks.read(0):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    write_all(out1, b"second\n")
    for fd in (err0, out1, err1):
        os.close(fd)
    forwarder.close()
    assert sinks.read(0) == b"first, unfinished\nsecond\n"


def test_closing_leaves_no_thread_and_no_descriptor(sinks: Sinks) -> None:
    before = set(os.listdir("/proc/self/fd"))
    forwarder = OutputForwarder(False, *sinks.fds())
    ends = [forwarder.pipes(rank) for rank in range(3)]
    forwarder.start()
    write_all(ends[1][0], b"one line\n")
    for pair in ends:
        for fd in pair:
            os.close(fd)
    forwarder.close()
    assert set(os.listdir("/proc/self/fd")) == before
    assert not [t for t in threading.enumerate() if t.name == "collops-output"]
    assert sinks.read(0) == b"one line\n"


def test_close_returns_when_a_pipe_stays_open_but_quiet(sinks: Sinks) -> None:
    forwarder = OutputForwarder(False, *sinks.fds())
    out, err = forwarder.pipes(0)  # held open, as by a rank's background child
    forwarder.start()
    write_all(out, b"still here\n")
    forwarder.close()
    os.close(out)
    os.close(err)
    assert sinks.read(0) == b"still here\n"
    assert not [t for t in threading.enumerate() if t.name == "collops-output"]
