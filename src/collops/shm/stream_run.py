"""Stream calls in flight: one stream (`StreamExecution`), one that folds what it gathered
(`FoldingExecution`), and the two stream phases of an allreduce (`ChainExecution`).
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..algorithms import fingerprint as fp
from ..algorithms.native import NativeCall
from ..algorithms.spec import CallSpec, make_spec
from ..datatypes import address_of
from ..errors import CollectiveMismatch, PeerFailed, ScheduleError, TransportError
from ..transport.tags import call_tag
from . import direct as shm_direct
from .direct_area import DirectArea, call_number, held_word, slot_of
from .execution import AreaExecution
from .roll_call import RollCall
from .stream_area import StreamArea
from .stream_plan import Prepared, _addresses, plan_for
from .stream_protocol import (
    DONE,
    FAILED,
    FOREIGN,
    MOVED,
    NAME,
    S_BLOCKED_ON,
    S_ERRNO,
    S_FAILED_WRITER,
    S_FOREIGN_CALL,
    S_FOREIGN_FP,
    S_FOREIGN_WRITER,
    S_OWN,
    S_RECEIVED,
    S_WRITTEN,
    skip_abandoned,
)
from .transport import ShmTransport
from .waiting import SPIN, YIELD


# -- the call ----------------------------------------------------------------------------------
class StreamExecution(AreaExecution):
    """An ``shm_stream`` call in flight (`AreaExecution` over the communicator's direct area
    ``area``; its stream area is ``stream``): write and read the chunks, then, at a rooted
    call, finish the roll call."""

    __slots__ = ("stream", "spec", "prepared", "rank", "plan", "nwrites", "state", "send",
                 "recv", "send_address", "recv_address", "fingerprint", "word", "expect",
                 "spin", "moved", "roll", "streamed", "held", "__weakref__")

    def __init__(self, transport: ShmTransport, direct: DirectArea, area: StreamArea,
                 spec: CallSpec, prepared: Prepared, rank: int, send: np.ndarray | None,
                 recv: np.ndarray | None, seq: int, phase: int, context: int,
                 timeout: float | None, state: np.ndarray | None = None,
                 roll: RollCall | None = None) -> None:
        direct.settle_before(seq, phase, prepared.fingerprint, timeout)
        self.stream, self.spec = area, spec
        #: a rooted call's roll call (`roll_call`), done once every member's word came
        self.roll = roll
        #: whether the stream part is done (the roll call may still wait)
        self.streamed = False
        self.prepared, self.rank = prepared, rank
        self.plan, self.nwrites = prepared.plan, prepared.nwrites
        # ``state``: where a first `advance` without this object left the call
        self.state = prepared.state.copy() if state is None else state
        self.send, self.recv = send, recv  # held while the call runs
        self.held: np.ndarray | None = None  # a folding rank's copy of its own block
        self.send_address, self.recv_address = _addresses(prepared, send, recv)
        fingerprint = self.fingerprint = prepared.fingerprint
        k = call_number(seq, phase)
        self.word = word = held_word(k, fingerprint)
        self.expect = (slot_of(seq, phase), word, fingerprint)
        self.spin = _spin(transport)
        self.moved = False
        area.active.append(self)
        if area.abandoned:
            if k in area.abandoned:  # a number used again (a new communicator, same context)
                area.abandoned.remove(k)
            skip_abandoned(area, direct.group)
        if self.state[S_WRITTEN] < self.nwrites:
            area.unwritten.append(self)
        self._begin(transport, direct, f"rank {rank}: {prepared.collective}[{NAME}]",
                    call_tag(context, seq, phase), timeout)

    def _may_write(self) -> bool:
        unwritten = self.stream.unwritten
        return bool(unwritten) and unwritten[0] is self and (
            self.roll is None or self.roll.root_heard())

    def _step(self, spin: float) -> int:
        """`Plan.advance` for this call: its status; ``self.moved`` says whether it moved."""
        roll = self.roll
        if roll is not None and not roll.written:
            roll.store()  # its slot was busy as the call began: a non-root may wait for it
        may_write = self._may_write()
        status = self.plan.advance(self.state, self.send_address, self.recv_address,
                                   self.word, self.fingerprint, may_write, spin)
        if may_write and self.state[S_WRITTEN] >= self.nwrites:
            self.stream.unwritten.popleft()
        self.moved = bool(status & MOVED)
        return int(status & ~MOVED)

    def _ready(self) -> bool:
        roll = self.roll
        if self.streamed:
            return roll is not None and roll.ready()
        if roll is not None and not roll.written and roll.ready():
            return True  # the word may be stored (`_step`)
        return bool(self.plan.ready(self.state, self.send_address, self.recv_address,
                                    self.word, self.fingerprint, self._may_write()))

    def _advance(self, spin: float) -> bool:
        if self.streamed:
            return self._roll_called()
        status = self._step(spin)
        moved = self.moved
        if status == FOREIGN:
            # a chunk of another call this rank has begun: give it to that call; of one it
            # gave up: drain past it
            self._skip_abandoned()
            for other in list(self.stream.active):
                if other is not self and other.left:
                    other._step(0.0)
            status = self._step(0.0)
            moved |= self.moved
        if status == DONE:
            self.streamed = True
            return self._roll_called()
        if status == FAILED:
            self._failed()
        if status == FOREIGN or not moved:
            # only when stuck: the checks cost more than a chunk; a writer may wait for this
            # rank to drain the chunks of a call it gave up
            self._skip_abandoned()
            self._check()
        return False

    def _roll_called(self) -> bool:
        """Whether the streamed call's roll call is done (else check why not)."""
        if self.roll is None or self.roll.poll():
            return True
        self._skip_abandoned()
        return self._stuck()

    def _awaited(self) -> list[int]:
        """The group ranks this call waits for: writers not fully read, a reader to drain,
        members the roll call has not heard (read on every round of a wait: a member's word
        for the call with another fingerprint raises `CollectiveMismatch` here)."""
        if self.roll is not None:
            self.roll.check(self.what)
        if self.streamed:
            return [] if self.roll is None else self.roll.awaited()
        state, prepared, group = self.state, self.prepared, self.area.group
        out = [m for k, (m, expect) in enumerate(zip(prepared.writers, prepared.expects,
                                                     strict=True))
               if state[S_RECEIVED + k] < expect]
        blocked = int(state[S_BLOCKED_ON])  # a slot to reuse, or a reference to drain
        if blocked >= 0 and blocked in group:
            out.append(group.index(blocked))
        if self.roll is not None:
            out += self.roll.awaited()
        return sorted(set(out))

    def _expect(self) -> tuple[int, int, int]:
        return self.expect

    def _failed(self) -> None:
        """Raise for the reference chunk `advance` could not copy: `PeerFailed` naming the
        writer when its process is gone, else a `TransportError`."""
        writer, err = int(self.state[S_FAILED_WRITER]), int(self.state[S_ERRNO])
        if err == errno.EMSGSIZE:  # a chunk whose bytes would lie outside the block
            raise CollectiveMismatch(
                f"{self.what}: rank {self.area.group.index(writer)} wrote a chunk whose "
                "offset and length lie outside its block here (a corrupt header, or lengths "
                "that differ between the ranks); nothing was copied")
        error = self.transport.single_copy_error(
            writer, err, os.strerror(err) if err else "process_vm_readv failed")
        member = self.area.group.index(writer)
        if isinstance(error, PeerFailed):
            dead = PeerFailed(member, f"reading its buffer: {error.detail}")
            dead.locate_native(self.what)
            raise dead
        raise TransportError(f"{self.what}: reading rank {member}'s buffer: {error}")

    def _check(self) -> None:
        state = self.state
        writer = int(state[S_FOREIGN_WRITER])
        if writer >= 0:
            call = int(state[S_FOREIGN_CALL]) & (2**64 - 1)
            if call >> 24 == self.word >> 24 and call != self.word:
                theirs = int(state[S_FOREIGN_FP]) & (2**64 - 1)
                member = self.area.group.index(writer)
                raise CollectiveMismatch(
                    f"{self.what}: {fp.mismatch(self.fingerprint, theirs, f'rank {member}')}")
        super()._check()

    def _spin(self) -> float:
        return self.spin

    def _wait_from(self) -> int:
        # the compiled loop spun for the stream, not for the roll call's words
        return SPIN if self.streamed else YIELD

    def _leave(self) -> None:
        stream = self.stream
        stream.active.remove(self)
        if self in stream.unwritten:
            stream.unwritten.remove(self)
        if not (self.streamed and (self.roll is None or not self.roll.left)):
            # an error ended the call: its chunks still to read are drained unread, now and
            # as later calls meet them, so the rings go on serving the communicator
            stream.abandoned.append(self.word >> 24)
            self._skip_abandoned()
        if self.roll is not None:
            self.roll.end()
        self.send = self.recv = None

    def _skip_abandoned(self) -> None:
        skip_abandoned(self.stream, self.area.group)


def _areas_of(call: NativeCall) -> tuple[ShmTransport, DirectArea, StreamArea]:
    transport, direct = shm_direct.area_of(call)
    area = transport.stream_area(call.context)
    if area is None:
        raise ScheduleError(f"{NAME}: communicator context {call.context} has no stream area")
    return transport, direct, area


class FoldingExecution:
    """A stream ``reduce`` (at its root) or ``reduce_scatter_block`` in flight, polled like an
    `Execution`: the contributions streamed into a scratch buffer, one row per rank
    (``inner``), then folded in rank order into the result, the rank's own contribution
    (``own``, at row ``position``) taken from where it is."""

    def __init__(self, inner: StreamExecution, pool: list[np.ndarray], scratch: np.ndarray,
                 own: np.ndarray, position: int, recv: np.ndarray) -> None:
        self.inner, self.pool, self.scratch = inner, pool, scratch
        self.own, self.position, self.recv = own, position, recv
        self.deadline, self.spin, self.left = inner.deadline, inner.spin, 1

    def poll(self, spin: float = 0.0) -> bool:
        """Advance the gather; fold once it is done. True once the call is done here."""
        if not self.left:
            return True
        try:
            if not self.inner.poll(spin):
                return False
            self._fold()
            return True
        finally:
            if not self.inner.left:  # done, or ended by an error
                self._release()

    def wait(self) -> None:
        """Block until done."""
        try:
            self.inner.wait()
            self._fold()
        finally:
            self._release()

    def _fold(self) -> None:
        spec, out = self.inner.spec, self.recv
        op, p = spec.op, spec.size
        assert op is not None
        rows = self.scratch.reshape(p, -1)
        parts = [self.own if k == self.position else rows[k] for k in range(p)]
        if p == 1:
            if out is not parts[0]:
                np.copyto(out, parts[0])
            return
        # the first two in one pass: ``out`` is never ``parts[1:]`` (an in-place rank's own
        # contribution past position 0 was copied in `_execution`)
        op.combine_into(out, parts[0], parts[1])
        for part in parts[2:]:
            op.combine_into(out, out, part)

    def _release(self) -> None:
        if self.left:
            self.left = 0
            self.pool.append(self.scratch)
            self.own = self.recv = self.scratch = None  # type: ignore[assignment]


def _folds(spec: CallSpec, rank: int) -> bool:
    """Whether group member ``rank`` folds in a call of ``spec`` (`FoldingExecution`)."""
    return spec.collective == "reduce_scatter_block" or (
        spec.collective == "reduce" and rank == spec.root)


def _execution(transport: ShmTransport, direct: DirectArea, area: StreamArea, spec: CallSpec,
               prepared: Prepared, rank: int, send: np.ndarray | None,
               recv: np.ndarray | None, seq: int, phase: int, context: int,
               timeout: float | None, roll: RollCall | None = None
               ) -> StreamExecution | FoldingExecution:
    """The execution of one call: a `StreamExecution` (with its ``roll`` call, if rooted),
    wrapped in a `FoldingExecution` where the rank folds."""
    if not _folds(spec, rank) or recv is None or prepared.folds_as_read:
        held = state = None
        if prepared.folds_as_read and send is not None and recv is not None \
                and overwrites_own(spec, rank, send, recv):
            held = _own_of(spec, rank, send)[0].copy()
            state = prepared.state.copy()
            state[S_OWN] = address_of(held)
        ex = StreamExecution(transport, direct, area, spec, prepared, rank, send, recv, seq,
                             phase, context, timeout, state, roll=roll)
        ex.held = held
        return ex
    assert send is not None
    own, position = _own_of(spec, rank, send)
    if overwrites_own(spec, rank, send, recv):
        own = own.copy()
    pool = _pool(area, spec.dtype, spec.size * spec.count)
    scratch = pool.pop() if pool else np.empty(spec.size * spec.count, spec.dtype)
    inner = StreamExecution(transport, direct, area, spec, prepared, rank, send, scratch, seq,
                            phase, context, timeout, roll=roll)
    return FoldingExecution(inner, pool, scratch, own, position, recv)


def _own_of(spec: CallSpec, rank: int, send: np.ndarray) -> tuple[np.ndarray, int]:
    """A folding rank's own contribution in ``send``, and its position in the fold."""
    n = spec.count
    return ((send, spec.root) if spec.collective == "reduce"
            else (send[rank * n:(rank + 1) * n], rank))


def overwrites_own(spec: CallSpec, rank: int, send: np.ndarray, recv: np.ndarray) -> bool:
    """Whether a folding rank's result overwrites its own contribution before its turn (in
    place, past position 0): the fold then takes it from a copy."""
    own, position = _own_of(spec, rank, send)
    return bool(position) and np.may_share_memory(own, recv)


def _pool(area: StreamArea, dtype: np.dtype, count: int) -> list[np.ndarray]:
    """The free scratch buffers of ``count`` items of ``dtype`` kept on ``area``."""
    pool = area.memo.setdefault((NAME, "scratch", dtype, count), [])
    assert isinstance(pool, list)
    return pool


class ChainExecution:
    """An allreduce in flight, polled like an `Execution`: its two phases one after the other
    (``phase``, ``phase + 1``), each a stream call carrying the allreduce's fingerprint."""

    def __init__(self, phases: list[Callable[[float | None], Any]],
                 deadline: float | None) -> None:
        self.phases, self.deadline = phases, deadline
        self.index, self.left = 0, 1
        self.current = phases[0](self._remaining())
        self.spin = self.current.spin

    def _remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def poll(self, spin: float = 0.0) -> bool:
        """Advance the current phase, starting the next once it is done; True once the call
        is done here."""
        if not self.left:
            return True
        try:
            while self.current.poll(spin):
                self.index += 1
                if self.index == len(self.phases):
                    self.left = 0
                    return True
                self.current = self.phases[self.index](self._remaining())
        except BaseException:
            self.left = 0
            raise
        return False

    def wait(self) -> None:
        """Block until done."""
        while not self.poll(self.spin):
            self.current.wait()


def _chain(transport: ShmTransport, direct: DirectArea, area: StreamArea, spec: CallSpec,
           rank: int, send: np.ndarray | None, recv: np.ndarray | None, seq: int, phase: int,
           context: int, timeout: float | None) -> ChainExecution:
    """An allreduce as two stream phases: a reduce-scatter into the rank's block of the
    result, then an allgather of the blocks; or, when the count does not divide among the
    ranks, a reduce to rank 0, then a bcast from it."""
    p, n, dt, op = spec.size, spec.count, spec.dtype, spec.op
    assert send is not None and recv is not None
    group = tuple(direct.group)
    ends: list[tuple[np.ndarray | None, np.ndarray | None]]  # (send, recv) of each phase
    if n % p == 0:
        b = n // p
        first = make_spec("reduce_scatter_block", p, dt, count=b, op=op)
        then = make_spec("allgather", p, dt, count=b)
        mine = recv[rank * b:(rank + 1) * b]
        ends = [(send, mine), (mine, recv)]
    else:
        first = make_spec("reduce", p, dt, count=n, root=0, op=op)
        then = make_spec("bcast", p, dt, count=n, root=0)
        # rank 0 reduces into its result and broadcasts it in place
        ends = [(send, recv if rank == 0 else None), (recv if rank == 0 else None,
                                                      None if rank == 0 else recv)]
    plans = [plan_for(area, s, group, rank, spec) for s in (first, then)]

    def reduce(remaining: float | None) -> Any:
        return _execution(transport, direct, area, first, plans[0], rank, *ends[0], seq,
                          phase, context, remaining)

    def spread(remaining: float | None) -> Any:
        return StreamExecution(transport, direct, area, then, plans[1], rank, *ends[1], seq,
                               phase + 1, context, remaining)

    deadline = None if timeout is None else time.monotonic() + timeout
    return ChainExecution([reduce, spread], deadline)


def _flat(a: np.ndarray | None) -> np.ndarray | None:
    return None if a is None else a.reshape(-1)


def _spin(transport: ShmTransport) -> float:
    """Seconds the compiled loop spins before returning to Python to wait (`waiting`)."""
    return transport.ladder.compiled_spin


