"""The progress engine: runs one rank's schedule over a transport.

A schedule is compiled once into a `Plan` — plain Python lists, byte offsets precomputed, the
successors of each step and its number of predecessors — and cached with it, so replaying a
call costs a short loop: post every ready step, complete the local ones at once, and on each
poll test the pending sends and receives, releasing their successors.

An `Execution` is one run of a plan on concrete buffers. It never blocks: `poll` advances it
and tells whether it is done. Blocking (``wait``) belongs to the caller, who sleeps in the
transport's `wait_for_activity` between polls. All executions of one transport are polled
together (`Progress`), so concurrent non-blocking collectives complete in any order.

Errors carry the rank, the collective, the algorithm and the step: a message of the wrong
size or from a mismatched call, a timeout naming the ranks not heard from.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..algorithms.fingerprint import mismatch
from ..datatypes import address_of
from ..errors import (
    CollectiveMismatch,
    CollectiveTimeout,
    CollopsError,
    MessageSizeMismatch,
    PeerFailed,
)
from ..ops import Op
from ..schedule.local import apply_reduce
from ..schedule.table import Schedule, StepKind
from ..transport.base import Handle, Transport
from .failure_site import locate_failure
from .stall import note_wait

_BYTE = np.dtype(np.uint8)
#: copies at least this large first check whether source and destination are the same bytes
_IN_PLACE_CHECK = 4096
SEND, RECV, COPY, REDUCE = (int(StepKind.SEND), int(StepKind.RECV), int(StepKind.COPY),
                            int(StepKind.REDUCE))

def _bytes_of(area: np.ndarray) -> memoryview:
    """A flat byte memoryview of a contiguous array (empty areas share one view)."""
    if not area.size:
        return _NO_BYTES
    if area.dtype.kind in "biuf":
        return memoryview(area).cast("B")  # type: ignore[arg-type]
    return memoryview(area.view(_BYTE))  # type: ignore[arg-type]


_NO_BYTES = memoryview(bytearray())


class Plan:
    """A schedule compiled for fast replay at one element size."""

    __slots__ = ("schedule", "n", "kind", "peer", "seq", "src_buf", "src_lo", "src_hi",
                 "dst_buf", "dst_lo", "dst_hi", "op", "flags", "succ", "indeg", "roots",
                 "itemsize", "nbytes")

    def __init__(self, schedule: Schedule, itemsize: int) -> None:
        s = schedule
        self.schedule = s
        self.n = len(s)
        self.itemsize = itemsize
        self.kind: list[int] = s.kind.tolist()
        self.peer: list[int] = s.peer.tolist()
        self.seq: list[int] = s.seq.tolist()
        self.src_buf: list[int] = s.src_buf.tolist()
        self.dst_buf: list[int] = s.dst_buf.tolist()
        count = s.count.astype(np.int64)
        self.src_lo: list[int] = (s.src_off * itemsize).tolist()
        self.src_hi: list[int] = ((s.src_off + count) * itemsize).tolist()
        self.dst_lo: list[int] = (s.dst_off * itemsize).tolist()
        self.dst_hi: list[int] = ((s.dst_off + count) * itemsize).tolist()
        self.nbytes: list[int] = (count * itemsize).tolist()
        self.op: list[int] = s.op.tolist()
        self.flags: list[int] = s.flags.tolist()
        self.succ = s.successors()
        indeg = s.indegrees().tolist()
        self.indeg = indeg
        self.roots = [i for i in range(self.n) if indeg[i] == 0]


@dataclass(frozen=True)
class CallInfo:
    """What an execution is doing, for error messages."""

    collective: str
    algorithm: str
    rank: int
    fingerprint: int
    describe_fingerprint: Any = None  # Callable[[int], str]
    world_of: Any = None  # Callable[[int], int] group rank -> transport rank


class Execution:
    """One run of a plan on concrete buffers; `poll` advances it without blocking."""

    __slots__ = ("plan", "transport", "tag_base", "info", "op", "typed", "raw", "waiting",
                 "pending", "left", "deadline", "started", "timeout", "peer_map")

    def __init__(
        self,
        plan: Plan,
        typed: tuple[np.ndarray, np.ndarray, np.ndarray],
        transport: Transport,
        tag_base: int,
        info: CallInfo,
        op: Op | None,
        timeout: float | None,
        peer_map: list[int],
    ) -> None:
        self.plan = plan
        self.transport = transport
        self.tag_base = tag_base
        self.info = info
        self.op = op
        self.typed = typed
        self.raw = (_bytes_of(typed[0]), _bytes_of(typed[1]), _bytes_of(typed[2]))
        self.waiting = plan.indeg.copy()
        self.pending: list[tuple[Handle, int]] = []
        self.left = plan.n
        self.timeout = timeout
        self.started = time.monotonic()
        self.deadline = None if timeout is None else self.started + timeout
        self.peer_map = peer_map
        try:
            self._run(plan.roots)
        except CollopsError as exc:
            transport.give_up(tag_base, exc, info.fingerprint)
            raise

    def _run(self, steps: list[int]) -> None:
        """Start ``steps`` and whatever they release: every ready send and receive is posted
        before any ready local step runs, so messages start moving first."""
        plan = self.plan
        kind, waiting, succ = plan.kind, self.waiting, plan.succ
        stack = list(steps)
        local: list[int] = []
        done_local = 0
        while stack or done_local < len(local):
            if not stack:
                i = local[done_local]
                done_local += 1
                self._local(i)
                self.left -= 1
                for j in succ[i]:
                    waiting[j] -= 1
                    if waiting[j] == 0:
                        stack.append(j)
                continue
            i = stack.pop()
            k = kind[i]
            if k == SEND:
                view = self.raw[plan.src_buf[i]][plan.src_lo[i]: plan.src_hi[i]]
                h = self.transport.isend(self.peer_map[plan.peer[i]], self.tag_base | plan.seq[i],
                                         view, self.info.fingerprint)
            elif k == RECV:
                view = self.raw[plan.dst_buf[i]][plan.dst_lo[i]: plan.dst_hi[i]]
                h = self.transport.irecv(self.peer_map[plan.peer[i]], self.tag_base | plan.seq[i],
                                         view)
            else:
                local.append(i)
                continue
            if h.done:
                self._check(h, i)
                self.left -= 1
                for j in succ[i]:
                    waiting[j] -= 1
                    if waiting[j] == 0:
                        stack.append(j)
            else:
                self.pending.append((h, i))

    def _local(self, i: int) -> None:
        plan = self.plan
        if plan.kind[i] == COPY:
            sb, db = plan.src_buf[i], plan.dst_buf[i]
            if (plan.src_hi[i] - plan.src_lo[i] >= _IN_PLACE_CHECK and sb != db
                    and address_of(self.typed[sb]) + plan.src_lo[i]
                    == address_of(self.typed[db]) + plan.dst_lo[i]):
                return  # an in-place call (send and receive buffer are one): nothing to move
            src = self.raw[sb][plan.src_lo[i]: plan.src_hi[i]]
            self.raw[db][plan.dst_lo[i]: plan.dst_hi[i]] = src
            return
        size = plan.itemsize
        s_lo, d_lo = plan.src_lo[i] // size, plan.dst_lo[i] // size
        n = plan.nbytes[i] // size
        left = self.typed[plan.src_buf[i]][s_lo: s_lo + n]
        into = self.typed[plan.dst_buf[i]][d_lo: d_lo + n]
        assert self.op is not None or plan.op[i] != 0
        apply_reduce(self.op, into, left, plan.op[i], plan.flags[i])  # type: ignore[arg-type]

    def _check(self, h: Handle, i: int) -> None:
        if h.error is not None:
            raise h.error
        plan = self.plan
        if plan.kind[i] != RECV:
            return
        expected = plan.nbytes[i]
        if h.fingerprint != self.info.fingerprint and h.fingerprint != 0:
            raise CollectiveMismatch(
                f"rank {self.info.rank}: "
                f"{mismatch(self.info.fingerprint, h.fingerprint, f'rank {plan.peer[i]}')} "
                f"(step {i} of {self.info.collective}[{self.info.algorithm}])")
        if h.nbytes != expected:
            raise MessageSizeMismatch(
                f"rank {self.info.rank}: {self.info.collective}[{self.info.algorithm}] step {i} "
                f"expected {expected} bytes from rank {plan.peer[i]}, got {h.nbytes}: the ranks' "
                "counts are inconsistent")

    def poll(self) -> bool:
        """Advance without blocking; True when every step has completed."""
        if self.left == 0:
            return True
        if self.pending:
            self.transport.progress()
            still: list[tuple[Handle, int]] = []
            released: list[int] = []
            plan, waiting = self.plan, self.waiting
            for h, i in self.pending:
                if h.done:
                    self._check(h, i)
                    self.left -= 1
                    for j in plan.succ[i]:
                        waiting[j] -= 1
                        if waiting[j] == 0:
                            released.append(j)
                else:
                    still.append((h, i))
            self.pending = still
            if released:
                self._run(released)
        if self.left and self.deadline is not None and time.monotonic() > self.deadline:
            raise self.timeout_error()
        return self.left == 0

    def timeout_error(self) -> CollectiveTimeout:
        """The error describing where this execution stopped."""
        plan = self.plan
        recv_peers = sorted({plan.peer[i] for h, i in self.pending if plan.kind[i] == RECV})
        send_peers = sorted({plan.peer[i] for h, i in self.pending if plan.kind[i] == SEND})
        step = self.pending[0][1] if self.pending else -1
        detail = self.plan.schedule.describe().splitlines()
        where = detail[step + 1].strip() if 0 <= step < len(detail) - 1 else "a dependency"
        return CollectiveTimeout(
            f"rank {self.info.rank}: {self.info.collective}[{self.info.algorithm}] did not "
            f"complete within {self.timeout} s; waiting at step {where}; not heard from ranks "
            f"{recv_peers}" + (f"; sends to {send_peers} unfinished" if send_peers else ""))


class Progress:
    """All active executions of one transport, polled together.

    An execution may have an *owner*: a callback (its request's ``advance``) run when the
    execution completes during anyone's progress, so a multi-phase request starts its next
    phase without waiting to be waited on. Collectives whose phases share the direct areas'
    slots depend on it: a rank that waits on its requests in another order than its peers
    would otherwise hold back a phase they need.
    """

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.active: list[Execution] = []
        #: id(execution) -> (execution, callback run once it completes, callback given the
        #: error it raised)
        self.owners: dict[int, tuple[Any, Callable[[], None],
                                     Callable[[BaseException], None] | None]] = {}

    def own(self, ex: Any, on_done: Callable[[], None],
            on_error: Callable[[BaseException], None] | None = None) -> None:
        """Run ``on_done`` when ``ex`` completes in `poll_all` or `wait` (``on_error`` with the
        error, if it fails there)."""
        self.owners[id(ex)] = (ex, on_done, on_error)

    def disown(self, ex: Any) -> None:
        """Forget ``ex``'s owner (its request advanced it itself)."""
        self.owners.pop(id(ex), None)

    def drop(self, ex: Any, error: BaseException | None = None) -> None:
        """Forget ``ex`` entirely: it failed (with ``error``), and must not be polled (or fail)
        again; the transport hears that this rank gave its call up."""
        if ex in self.active:
            self.active.remove(ex)
        self.owners.pop(id(ex), None)
        tag_base = getattr(ex, "tag_base", None)
        if error is not None and tag_base is not None:
            info = getattr(ex, "info", None)
            self.transport.give_up(tag_base, error, getattr(info, "fingerprint", None))
        elif isinstance(error, PeerFailed):  # a point-to-point operation's: no call to give up
            note_cause = getattr(self.transport, "note_cause", None)
            if note_cause is not None:  # the rank named is the cause of this rank's failure
                note_cause(error.failed_rank)

    def _poll_other(self, ex: Any) -> None:
        """Poll an execution nobody is waiting on here: its completion advances its owner, and
        its error goes to its owner (the call it belongs to), not to the caller."""
        try:
            done = ex.poll()
        except CollopsError as exc:
            locate_failure(exc, ex)
            owner = self.owners.get(id(ex))
            self.drop(ex, exc)
            if owner is None or owner[2] is None:
                raise
            owner[2](exc)
            return
        if done:
            self._completed(ex)

    def _completed(self, ex: Any) -> None:
        if ex in self.active:
            self.active.remove(ex)
        owner = self.owners.pop(id(ex), None)
        if owner is not None:
            owner[1]()

    def poll_all(self) -> None:
        """Poll every active execution once, dropping (and advancing) the finished ones."""
        if not self.active:
            self.transport.progress()
            return
        for ex in list(self.active):
            self._poll_other(ex)

    def wait(self, ex: Execution) -> None:
        """Block until ``ex`` is done, progressing every other execution meanwhile."""
        spins = 0
        try:
            alone = getattr(ex, "wait_alone", None)
            if alone is not None and (not self.active or self.active == [ex]):
                # nothing else in flight: a native call that offers it waits by its own wait
                # (a compiled runner's spin and yield, then the direct areas' sleep)
                alone()
                if ex in self.active:
                    self.active.remove(ex)
                return
            if ex.poll():
                if ex in self.active:
                    self.active.remove(ex)
                return
            if ex not in self.active:
                self.active.append(ex)
            while True:
                for other in list(self.active):
                    if other is not ex:
                        self._poll_other(other)
                if ex.poll():
                    if ex in self.active:
                        self.active.remove(ex)
                    return
                spins += 1
                if spins > 16:
                    note_wait(self.transport, ex)  # a stall report, once past its threshold
                    # until the earliest deadline of those in flight (each raises its own
                    # timeout, or goes on, when polled past it)
                    timeout, now = 0.05, time.monotonic()
                    for waiting in self.active:
                        if waiting.deadline is not None:
                            timeout = max(0.0, min(timeout, waiting.deadline - now))
                    self.transport.wait_for_activity(timeout)
        except CollopsError as exc:
            locate_failure(exc, ex)
            self.drop(ex, exc)
            raise
