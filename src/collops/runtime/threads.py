"""Ranks as threads: what `collops.spawn` does on the inproc transport.

Each rank runs ``fn(comm, *args)`` in a daemon thread. When its function ends, the rank tells
the fabric whether it returned or what it raised, so that peers still waiting for it raise
`PeerFailed` naming it (`collops.transport.inproc`), as ranks of the `shm` transport do when a
process exits. With ``timeout=``, a job still running at the deadline is stopped: the error
names the ranks not heard from and where each running rank is, and the fabric is stopped,
which wakes every rank waiting inside collops and makes it raise `CollectiveTimeout`. A thread
busy in user code outside collops cannot be interrupted from Python; the error then says so,
and the thread, a daemon, ends with the interpreter.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
import time
import traceback
from collections.abc import Callable
from types import FrameType
from typing import Any

from ..errors import CollectiveTimeout, PeerFailed, RankFailed
from ..transport.inproc import Fabric
from .comm import Comm

#: seconds the threads of a stopped job get to raise and end
STOP_GRACE = 2.0
_COLLOPS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_LIBRARY_DIRS = tuple({sysconfig.get_paths()[k] + os.sep for k in ("stdlib", "purelib",
                                                                     "platlib")})


class ThreadJob:
    """``nprocs`` threads running ``fn(comm, *args)`` over one `Fabric`."""

    def __init__(self, fn: Callable[..., Any], nprocs: int, args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args
        self.fabric = Fabric(nprocs)
        self.results: list[Any] = [None] * nprocs
        #: rank -> (what it raised, its formatted traceback), in the order they failed
        self.failures: dict[int, tuple[BaseException, str]] = {}
        self.threads = [threading.Thread(target=self._run, args=(r,), name=f"collops-rank-{r}",
                                         daemon=True) for r in range(nprocs)]

    def _run(self, rank: int) -> None:
        try:
            self.results[rank] = self.fn(Comm(self.fabric.endpoint(rank)), *self.args)
        except BaseException as exc:  # noqa: BLE001 - reported by `run`
            self.failures[rank] = (exc, traceback.format_exc())
            self.fabric.mark_failed(rank, f"it raised {type(exc).__name__}: {exc}",
                                    exc.failed_rank if isinstance(exc, PeerFailed) else None)
        else:
            self.fabric.mark_returned(rank)

    def run(self, timeout: float | None) -> list[Any]:
        """Start every rank and wait for all: their results by rank, `RankFailed` for the
        first rank that failed, or `CollectiveTimeout` (every thread stopped) at ``timeout``."""
        for t in self.threads:
            t.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in self.threads:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        running = [r for r, t in enumerate(self.threads) if t.is_alive()]
        if running:
            raise self._stop(running, timeout)
        if self.failures:
            rank = self._root_cause()
            exc, text = self.failures[rank]
            raise RankFailed(rank, text, type(exc).__name__) from exc
        return self.results

    def _root_cause(self) -> int:
        """The lowest failing rank whose error is not merely a consequence (PeerFailed)."""
        primary = [r for r, (e, _) in self.failures.items() if not isinstance(e, PeerFailed)]
        return min(primary) if primary else min(self.failures)

    def _stop(self, running: list[int], timeout: float | None) -> CollectiveTimeout:
        """Stop the job; the error describing where ``running`` ranks were."""
        whereabouts = {r: self._whereabouts(r) for r in running}
        where = [f"rank {r} {text}" for r, (_, text) in whereabouts.items()]
        # the ranks others wait for, and those that never entered a call
        awaited = {p for r in running for p in self.fabric.awaited_by(r)}
        silent = sorted(awaited | {r for r, (inside, _) in whereabouts.items() if not inside})
        failed = ""
        if self.failures:
            rank = self._root_cause()
            exc = self.failures[rank][0]
            failed = f"; rank {rank} had raised {type(exc).__name__}: {exc}"
        self.fabric.stop(f"collops.spawn stopped the job: it did not finish within {timeout:g} s")
        grace = time.monotonic() + STOP_GRACE
        for r in running:
            self.threads[r].join(max(0.0, grace - time.monotonic()))
        stuck = [r for r in running if self.threads[r].is_alive()]
        end = ("every running rank was stopped" if not stuck else
               f"ranks {stuck} could not be stopped: a thread running code outside collops "
               "cannot be interrupted (it is a daemon thread and ends with the interpreter)")
        return CollectiveTimeout(
            f"collops.spawn: the job did not finish within {timeout:g} s; not heard from: "
            f"ranks {silent}; still running: {'; '.join(where)}{failed}; {end}")

    def _whereabouts(self, rank: int) -> tuple[bool, str]:
        """Whether rank ``rank``'s thread is inside a collops call, and where: the call and the
        ranks it waits for, or the user code it runs."""
        frame = sys._current_frames().get(self.threads[rank].ident or -1)
        if frame is None:
            return False, "(not started)"
        user = _innermost_own_frame(frame)
        entry = _call_entry(user)
        if entry is not None:
            awaited = self.fabric.awaited_by(rank)
            return True, f"in {entry.f_code.co_qualname}" + (
                f", waiting for ranks {awaited}" if awaited else "")
        code = user.f_code
        return False, (f"outside collops, in {code.co_qualname} "
                       f"({os.path.basename(code.co_filename)}:{user.f_lineno})")


def _innermost_own_frame(frame: FrameType) -> FrameType:
    """The innermost frame not in the standard library or an installed package (a lock's
    wait is), or the outermost frame."""
    while frame.f_back is not None and _in_library(frame):
        frame = frame.f_back
    return frame


def _call_entry(frame: FrameType) -> FrameType | None:
    """The outermost of the collops frames from ``frame`` outwards, if user code called it:
    the collops call a thread is in."""
    entry: FrameType | None = None
    outer: FrameType | None = frame
    while outer is not None and outer.f_code.co_filename.startswith(_COLLOPS_DIR):
        entry, outer = outer, outer.f_back
    return entry if outer is not None and not _in_library(outer) else None


def _in_library(frame: FrameType) -> bool:
    return frame.f_code.co_filename.startswith(_LIBRARY_DIRS)
