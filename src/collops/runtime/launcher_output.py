"""Forwarding the ranks' stdout and stderr to the launcher's own, by whole lines.

Each rank writes into one pipe per stream; a single reader thread waits on all of them and
passes a rank's bytes on only up to its last line end (``\\n``, or ``\\r`` for progress
bars), so lines of different ranks never mix even when a rank writes a line in pieces
(``print`` under ``PYTHONUNBUFFERED=1`` writes the text and the newline separately). Bytes
are never decoded or altered; with tagging, ``[rank] `` starts each line, and a rank's
line never continues on the same line as another rank's unfinished one.

A partial last line is written when its rank has been quiet for `IDLE` seconds or its pipe
closes, so output up to a killed rank's death is kept. A line longer than `LINE_LIMIT` is
written in pieces as it arrives, and the stream holds its sink until the line ends (or it
goes quiet, or `HOLD_MAX` passes): the other ranks' lines wait in memory, so the long line
stays whole and nobody's writes ever block on another rank.

With ``report_failures``, a traceback on a rank's stderr is held until the rank exits and then
written in full or as one line (`TracebackReport`); held text still growing after the rank
has been quiet for `TRACEBACK_QUIET` seconds (a program that printed a traceback and went on)
is written as it is.
"""

from __future__ import annotations

import os
import select
import selectors
import sys
import threading
import time

from .launcher_report import TracebackReport, traceback_start

#: seconds a rank must be quiet before its unfinished line is written as it is
IDLE = 0.25
#: bytes of one unfinished line held back before it is written in pieces
LINE_LIMIT = 1 << 16
#: longest time one unfinished line may keep the other ranks' lines waiting
HOLD_MAX = 2.0
#: seconds of silence after which `OutputForwarder.close` stops waiting for pipes to close
DRAIN_GRACE = 1.0
#: seconds a rank whose traceback is held may stay quiet, still running, before it is written
TRACEBACK_QUIET = 2.0
_READ_SIZE = 1 << 16
_LINE_ENDS = (ord("\n"), ord("\r"))


class _Sink:
    """One of the launcher's output streams, and which rank's line it is in the middle of."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.streams: list[_Stream] = []
        self.holder: _Stream | None = None
        self.held_since = 0.0
        self.last: _Stream | None = None
        self.at_line_start = True
        self.broken = False

    def write(self, data: bytes) -> None:
        """Write all of ``data``; once the reader has gone away, drop it."""
        view = memoryview(data)
        while view and not self.broken:
            try:
                view = view[os.write(self.fd, view):]
            except BlockingIOError:
                select.select([], [self.fd], [])
            except OSError:  # the reader closed its end (``| head``) or the fd is gone
                self.broken = True


class _Stream:
    """A rank's stdout or stderr pipe: the bytes read but not yet written."""

    def __init__(self, fd: int, sink: _Sink, prefix: bytes, rank: int,
                 report: bool = False) -> None:
        self.fd = fd
        self.sink = sink
        self.prefix = prefix
        self.rank = rank
        #: whether a traceback on this stream is held (`TracebackReport`)
        self.report = report
        #: the traceback being held, from its first line on
        self.held: bytearray | None = None
        self.pending = bytearray()
        self.open = True
        self.last_read = time.monotonic()


def _after_last_line_end(data: bytearray) -> int:
    return max(data.rfind(b"\n"), data.rfind(b"\r")) + 1


class OutputForwarder:
    """Read every rank's stdout and stderr pipe in one thread; write whole lines to ours."""

    def __init__(self, tag: bool, stdout_fd: int = 1, stderr_fd: int = 2,
                 report_failures: bool = False) -> None:
        self._tag = tag
        self._report = TracebackReport() if report_failures else None
        self._sinks = (_Sink(stdout_fd), _Sink(stderr_fd))
        self._streams: list[_Stream] = []
        self._thread: threading.Thread | None = None
        self._wake: tuple[int, int] | None = None
        self._stopping = False

    def pipes(self, rank: int) -> tuple[int, int]:
        """Make the rank's stdout and stderr pipes; their write ends, for the rank to use."""
        prefix = f"[{rank}] ".encode() if self._tag else b""
        ends = []
        for sink in self._sinks:
            read_fd, write_fd = os.pipe()
            stream = _Stream(read_fd, sink, prefix, rank,
                             self._report is not None and sink is self._sinks[1])
            sink.streams.append(stream)
            self._streams.append(stream)
            ends.append(write_fd)
        return ends[0], ends[1]

    def read_ends(self) -> list[int]:
        """The launcher's ends of every pipe (a forked rank closes them)."""
        return [stream.fd for stream in self._streams]

    def start(self) -> None:
        """Start forwarding (after the last rank is started: no fork while it runs)."""
        sys.stdout.flush()
        sys.stderr.flush()
        self._wake = os.pipe()
        self._thread = threading.Thread(target=self._run, name="collops-output", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Forward what is left, until every pipe is closed or quiet for `DRAIN_GRACE`; close."""
        try:
            if self._thread is None and self._streams:
                self.start()
            if self._thread is not None and self._wake is not None:
                self._stopping = True
                os.write(self._wake[1], b"\0")
                self._thread.join()
        finally:
            for fd in [*self.read_ends(), *(self._wake or ())]:
                os.close(fd)
            self._streams.clear()
            self._wake = None

    # ---- the reader thread -------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._forward_until_done()
        except OSError:  # close() gave up waiting (a second Ctrl-C) and closed the pipes
            pass

    def _forward_until_done(self) -> None:
        assert self._wake is not None
        last_read = time.monotonic()
        with selectors.DefaultSelector() as selector:
            selector.register(self._wake[0], selectors.EVENT_READ)
            for stream in self._streams:
                selector.register(stream.fd, selectors.EVENT_READ, stream)
            while any(stream.open for stream in self._streams):
                now = time.monotonic()
                if self._stopping and now - last_read > DRAIN_GRACE:
                    break
                for key, _ in selector.select(self._timeout(now, last_read)):
                    if key.data is None:
                        os.read(key.fd, 64)
                        continue
                    stream = key.data
                    chunk = os.read(stream.fd, _READ_SIZE)
                    last_read = stream.last_read = time.monotonic()
                    if chunk:
                        stream.pending += chunk
                    else:
                        stream.open = False
                        selector.unregister(stream.fd)
                self._forward_all(time.monotonic())
        for stream in self._streams:  # pipes still open after the grace: what was read goes
            stream.open = False
        self._forward_all(time.monotonic())

    def _timeout(self, now: float, last_read: float) -> float | None:
        """Seconds until an unfinished line or a hold is due, or the drain ends; None: never."""
        due = [last_read + DRAIN_GRACE] if self._stopping else []
        for sink in self._sinks:
            if sink.holder is not None:
                due += [sink.holder.last_read + IDLE, sink.held_since + HOLD_MAX]
            else:
                due += [stream.last_read + IDLE for stream in sink.streams if stream.pending]
            due += [stream.last_read + TRACEBACK_QUIET for stream in sink.streams
                    if stream.held is not None]
        return max(0.0, min(due) - now) + 0.001 if due else None

    def _forward_all(self, now: float) -> None:
        for sink in self._sinks:
            while self._forward_sink(sink, now):
                pass

    def _forward_sink(self, sink: _Sink, now: float) -> bool:
        """Write what each stream of the sink may write now; True if a hold ended."""
        released = False
        for stream in sink.streams:
            if sink.holder in (None, stream):
                released |= self._forward(stream, now)
        return released

    def _forward(self, stream: _Stream, now: float) -> bool:
        """Write the stream's bytes that may go now (its sink is free or its own); True if
        the stream gave up a hold."""
        if stream.report:
            self._hold_traceback(stream, now)
        sink, data = stream.sink, stream.pending
        quiet = not stream.open or now - stream.last_read >= IDLE
        holding = sink.holder is stream
        if quiet or holding:
            end = len(data)
        else:
            end = _after_last_line_end(data)
            if len(data) - end >= LINE_LIMIT:
                end = len(data)
        finished = bool(end) and data[end - 1] in _LINE_ENDS
        if end:
            self._write(stream, bytes(data[:end]))
            del data[:end]
        if quiet or finished or (holding and now - sink.held_since > HOLD_MAX):
            sink.holder = None
            return holding
        if end and not holding:
            sink.holder, sink.held_since = stream, now
        return False

    def _hold_traceback(self, stream: _Stream, now: float) -> None:
        """Move a traceback from the stream's pending bytes to its held ones; once the rank
        has exited, write it in full or as one line (quiet but running: in full)."""
        data = stream.pending
        if stream.held is None:
            at = traceback_start(data)
            if at < 0:
                return
            if at:
                self._write(stream, bytes(data[:at]))  # whole lines: ``at`` starts one
            stream.held = bytearray(data[at:])
        else:
            stream.held += data
        data.clear()
        if stream.open and now - stream.last_read < TRACEBACK_QUIET:
            return
        held, stream.held = bytes(stream.held), None
        assert self._report is not None
        line = None if stream.open else self._report.one_line(stream.rank, held)
        if line is None:
            self._write(stream, held)
            return
        sink = stream.sink
        if not sink.at_line_start:
            sink.write(b"\n")
        sink.write(line)
        sink.last, sink.at_line_start = None, True

    def _write(self, stream: _Stream, data: bytes) -> None:
        sink = stream.sink
        if sink.last not in (None, stream) and not sink.at_line_start:
            sink.write(b"\n")  # another rank's unfinished line ended: start ours apart
            sink.at_line_start = True
        if stream.prefix:
            body = data[:-1].replace(b"\n", b"\n" + stream.prefix) + data[-1:]
            if sink.at_line_start or sink.last is not stream:
                body = stream.prefix + body
            data = body
        sink.write(data)
        sink.last = stream
        sink.at_line_start = data.endswith(b"\n")
