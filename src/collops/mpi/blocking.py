"""``mpi_native``'s blocking calls: MPI's own blocking collective on the prepared buffers.

A blocking collops call with ``mpi_native`` chosen runs ``MPI_Allreduce``, ``MPI_Bcast``, …
directly — no request polled from Python — through the runner `BlockingCall` bound once per
call signature (`NativeAlgorithm.bind`): its MPI function, counts, datatype, operator and
MPI communicators are worked out when it is made. The single-phase collectives also bind
whole calls (`bind_call` / `call`, as the shared-memory runners do), so a repeated call goes
from `Comm` straight to MPI. Every blocking call takes this route, on every rank, whichever
path inside `Comm` runs it: MPI's blocking and non-blocking collectives never match each
other, so the choice must not depend on anything that differs between ranks.

* **Mismatches.** Before it enters MPI, a rank knows every rank makes the same call: on a
  communicator whose ranks share a node through the `Board` (shared memory), else through
  the `SpanningAgreement` of the transport's messages, which a peer's give-up interrupts
  (``check=0`` skips both). Two exceptions on a board, both in `board`'s essay: a barrier
  is its agreement (MPI's barrier only when a rank flags messages to flush), and a small
  bcast's root 0 (a 2-rank reduce's non-root) on the compiled route enters MPI at once and
  checks the others' entries at its next call (`defer`, `Board.settle`; a mismatch found
  so breaks the communicator).
* **Time limits.** The agreement waits with the deadline itself (a timeout there gives the
  call up, so the late ranks are told). A call with a timeout runs MPI's blocking collective
  on a helper thread and waits for it with the deadline, so it raises `CollectiveTimeout` as
  the non-blocking form does; the abandoned thread enters MPI once the late ranks come, so
  they complete the call, as they would with an abandoned request.
* **Dead peers.** A rank waiting for the others' entries checks that the ranks of its node
  live; while it is inside an untimed blocking MPI call, the transport's `Watchdog` thread
  does, and ends the job with ``MPI_Abort`` and a message naming the dead rank (a blocked MPI
  call cannot be interrupted). Ranks on other nodes are left to the launcher.
* **Errors** MPI returns are `TransportError`s naming the call, the rank and MPI's message.
* **Compiled.** Where `collops.mpi.compiled` can run, a bound whole call (`bind_call`,
  `bind_bcast`) is its C runner's: the same steps in one C call, handing anything off the
  inline route to `finish` (and MPI's error codes to `failed`), marking the watchdog's
  `word` while inside MPI. The Python methods here remain the route elsewhere.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from typing import Any

import numpy as np

from .. import config
from ..algorithms.native import NativeCall
from ..errors import CollectiveTimeout, PeerFailed, ScheduleError
from ..ops import BUILTIN_OPS
from . import compiled
from .abort import abort_job
from .board import BLOCKING, DEFER_MAX, KNOWN_SHIFT, Board, call_key, may_defer
from .liveness import GUARD_INTERVAL
from .native import (
    MPI_NATIVE,
    Flavour,
    call_fingerprint,
    earlier_execution,
    in_place,
    mpi_function,
)
from .spanning import SpanningAgreement
from .transport import COLLECTIVE_SLOTS, MAX_SLEEP, MpiTransport, mpi_error
from .waits import SPANNING, BoardWait, SettleWait, SlotWait, SpanningWait, note_stall

#: about the seconds one look at the board takes (`Board.enter`'s spins)
SPIN_LOOK = 1.5e-7


class Watchdog:
    """One thread per transport that, while a rank is inside an untimed blocking MPI call,
    checks every `GUARD_INTERVAL` that the ranks of its node it waits for live, and ends the
    job (``MPI_Abort``) with a message naming a dead one."""

    def __init__(self, transport: MpiTransport) -> None:
        self.transport = transport
        #: the runner of the blocking MPI call this rank is in, or None
        self.blocked: BlockingCall | None = None
        #: a compiled runner's (`compiled`) instead: its number here and its call's, or 0
        self.word = np.zeros(2, np.int64)
        self._compiled: weakref.WeakValueDictionary[int, BlockingCall] = \
            weakref.WeakValueDictionary()
        thread = threading.Thread(target=self._watch, daemon=True, name="collops-mpi-watch")
        thread.start()

    @classmethod
    def of(cls, transport: MpiTransport) -> Watchdog:
        """The transport's watchdog, started on first use."""
        dog: Watchdog | None = transport._watchdog
        if dog is None:
            dog = transport._watchdog = cls(transport)
        return dog

    def watch(self, runner: BlockingCall) -> tuple[np.ndarray, int]:
        """``(word, number)``: where ``runner``'s compiled runner says it is inside MPI."""
        number = len(self._compiled) + 1
        while number in self._compiled:
            number += 1
        self._compiled[number] = runner
        return self.word, number

    def _inside(self) -> tuple[BlockingCall | None, int]:
        """The runner of the blocking MPI call this rank is in (None) and its word's number."""
        runner, number = self.blocked, int(self.word[0])
        if runner is None and number:
            runner = self._compiled.get(number)
            if runner is not None:
                runner.current = int(self.word[1])
        return runner, number

    def _watch(self) -> None:
        transport = self.transport
        while not transport._closed:
            time.sleep(GUARD_INTERVAL)
            runner, number = self._inside()
            if runner is not None:
                note_stall(runner, f"in MPI's {mpi_function(runner.collective)}",
                           runner.current)
            dead = None if runner is None else runner.dead_peer()
            if runner is not None and dead is not None and self._inside() == (runner, number):
                abort_job(f"collops: MPI rank {dead} (pid {transport._peers.pids[dead]}) died "
                          f"while rank {runner.rank} was blocked in "
                          f"{mpi_function(runner.collective)} ({runner.what}), which cannot be "
                          f"interrupted; aborting the job")
                return


class BlockingCall:
    """The blocking runner of one ``mpi_native`` call signature (`bind`)."""

    def __init__(self, call: NativeCall, flavour: Flavour = MPI_NATIVE) -> None:
        transport, spec = call.transport, call.spec
        if not isinstance(transport, MpiTransport):
            raise ScheduleError(f"{spec.collective}[{flavour.name}] needs the MPI transport, not "
                                f"{call.transport_name}")
        self.transport, self.spec, self.rank, self.native = transport, spec, call.rank, call
        self.collective = spec.collective
        MPI = self._MPI = transport._MPI
        transport.made_due(call.group, call.context)  # an idup's board, at this first call
        pending = transport.pool_wait(call)
        if pending is not None:  # its pool made, the calls in flight progressed meanwhile
            call.progress.wait(pending)
        self.pool_key = (call.group, call.context)
        check = bool(call.params.get("check", 1)) and spec.size > 1
        self.board: Board | None = transport.board(call.group, call.context) if check else None
        #: a communicator spanning nodes agrees on the fingerprint through MPI first
        self.agree_first = check and self.board is None
        self.fingerprint = call_fingerprint(spec, flavour.name)
        self.others = tuple(r for r in range(spec.size) if r != call.rank)
        self.rows = () if self.board is None else tuple(self.board.row(r) for r in self.others)
        #: a blocking barrier on a board is its agreement, with MPI's barrier only when a
        #: rank flags messages sent since its last one (`board.Board`'s essay)
        self.barrier = spec.collective == "barrier" and self.board is not None
        #: the transport's sends (`MpiTransport._sends`) when this runner last ran MPI's
        #: barrier (a word the compiled runner shares)
        self.mark = np.zeros(1, np.int64)
        #: a small bcast's root, or a small 2-rank reduce's non-root, enters MPI without
        #: waiting for the others' entries, checking them at its next call (the compiled
        #: route only: `Board.settle`)
        self.defer = self.board is not None and flavour is MPI_NATIVE and \
            spec.count * spec.itemsize <= DEFER_MAX and spec.root == 0 and may_defer() and (
                (spec.collective == "bcast" and call.rank == 0)
                or (spec.collective == "reduce" and spec.size == 2 and call.rank == 1
                    and spec.op is not None and BUILTIN_OPS.get(spec.op.name) is spec.op))
        #: how often a call looks at the board again before the general wait (the spin stage)
        self.spins = int(transport._spin_seconds / SPIN_LOOK)
        #: the calls in flight (the progress engine's list, changed in place)
        self._active = call.progress.active
        self.flavour = flavour
        self.operation = flavour.operation(MPI, call, True)
        self.what = f"{spec.collective}[{flavour.name}]"
        self.checked = f"{self.what}, checked before {mpi_function(spec.collective)}"
        self.watchdog = Watchdog.of(transport) if transport._peers.pids or \
            config.settings.stall_report is not None else None
        # the whole-call binding (`bind_call`)
        self._counter: Any = None
        self._hot: tuple[Any, ...] | None = None
        self._bcast_hot: tuple[Any, ...] | None = None
        #: the compiled runner `run_known` posts and broadcasts through (made at its first
        #: call; None: the Python route)
        self._known_runner: Any = _UNMADE
        #: the call running now and its time limit (for the watchdog and errors)
        self.current: int = 0
        self.limit: float | None = None

    # -- one blocking phase ----------------------------------------------------------------
    def __call__(self, send: np.ndarray | None, recv: np.ndarray | None, seq: int,
                 timeout: float | None, phase: int = 0) -> None:
        """Run phase ``phase`` of call ``seq`` with MPI's blocking collective."""
        self.run(in_place(self._MPI, send, recv), recv, seq, timeout, phase)

    def run(self, send: Any, recv: np.ndarray | None, seq: int, timeout: float | None,
            phase: int = 0) -> None:
        """`__call__` on buffers already checked (``send`` may be MPI_IN_PLACE)."""
        board, agreed, spun = self.board, False, 0
        if board is not None:
            key = ((seq * 4 + phase + 1) << 1) | BLOCKING
            pending = board.pending
            if timeout is None and not self._active and not (pending[0] or pending[2]):
                spun = 0 if self.transport._background or self.transport._pending else \
                    self.spins
                if board.enter(key, self.fingerprint, self.rows, spun,
                               self._flag() if self.barrier else 0):
                    # the common case, inline: every rank of the node posted this call
                    agreed = True
                    if self.barrier and not self._flush(key):
                        return  # the agreement was the barrier
        else:
            agreed = not self.agree_first  # nothing to agree on (check=0, a single rank)
        if not (agreed and timeout is None and not self._active) and \
                self.finish(send, recv, seq, timeout, agreed, spun > 0, phase):
            return
        mc = self.transport._pools[self.pool_key][seq % COLLECTIVE_SLOTS]
        self._inside_mpi(seq, timeout, self.operation, mc, send, recv)

    def _inside_mpi(self, seq: int, timeout: float | None, operation: Any, *args: Any
                    ) -> None:
        """``operation(*args)``, MPI's call of call ``seq``, with the watchdog told this
        runner is inside MPI and MPI's error raised as a `TransportError` naming the call."""
        self.current, self.limit = seq, timeout
        watchdog = self.watchdog
        try:
            if watchdog is None:
                operation(*args)
            else:
                watchdog.blocked = self
                try:
                    operation(*args)
                finally:
                    watchdog.blocked = None
        except self._MPI.Exception as exc:
            raise mpi_error(self.rank, f"{self.what} call #{seq} "
                            f"({mpi_function(self.collective)})", exc) from exc

    @property
    def knows_signatures(self) -> bool:
        """Whether this runner (a bcast envelope's, on a board) offers `run_known`."""
        return self.board is not None and self.collective == "bcast" and \
            self.flavour is MPI_NATIVE

    def run_known(self, signature: int, envelope_send: Any, envelope_recv: np.ndarray,
                  data: np.ndarray, seq: int, timeout: float | None) -> bool | None:
        """A bcast envelope's call for a rank that knows the data's ``signature`` (non-zero, a
        hash of its dtype and shape: the root's ``x``, a non-root's ``out``), in one phase
        when every rank knows the same one.

        The rank posts its entry with the signature in its flag (`board.KNOWN_SHIFT`) and
        waits for every entry, as any call; then every rank reads the same flags. All the
        same: MPI's broadcast of ``data`` itself (the root's array, the others' ``out``), no
        envelope, and True. Else (a rank that passed no ``out``, another shape, a root that
        posted without one): the envelope's own broadcast, and False — the caller goes on
        with the data phase, as every other rank does. None, with nothing posted: this call
        cannot wait so (a time limit, calls in flight, a deferred call to settle); the
        caller runs the envelope as usual, whose entry, posted without a signature, sends
        every rank the two-phase way."""
        board = self.board
        assert board is not None
        runner = self._known_runner
        if runner is _UNMADE:
            runner = self._known_runner = compiled.runner(self)
        if runner is not None:  # the inline part in C: post, look, and MPI's broadcast
            ended = runner.known(signature, data, seq, timeout)
            if ended is None or ended == 1:
                return None if ended is None else True
            agreed, spun = ended == 0, True
        else:
            if timeout is not None or self._active or board.pending[0] or board.pending[2]:
                return None
            spins = 0 if self.transport._background or self.transport._pending else self.spins
            agreed = board.enter(call_key(seq, 0, True), self.fingerprint, self.rows, spins,
                                 signature << KNOWN_SHIFT)
            spun = spins > 0
        return self.after_known(signature, envelope_send, envelope_recv, data, seq, agreed,
                                spun)

    def after_known(self, signature: int, envelope_send: Any, envelope_recv: np.ndarray,
                    data: np.ndarray, seq: int, agreed: bool, spun: bool = True) -> bool:
        """The rest of `run_known` once the entry is posted and not every rank's was there
        with the same signature (``agreed``: every rank's entry was there): the general wait
        if need be (which raises on a mismatch), then MPI's broadcast of ``data`` if all
        signatures are the same after all (True), else of the envelope (False)."""
        board = self.board
        assert board is not None
        key = call_key(seq, 0, True)
        mc = self.transport._pools[self.pool_key][seq % COLLECTIVE_SLOTS]
        if not agreed:  # the general wait, which raises on a mismatch
            self._general(mc, None, None, seq, 0, None, False, spun)
        one = board.same_signature(key, signature)
        if one:
            self._inside_mpi(seq, None, mc.Bcast, [data, data.nbytes, self._MPI.BYTE],
                             self.spec.root)
        else:
            self._inside_mpi(seq, None, self.operation, mc,
                             in_place(self._MPI, envelope_send, envelope_recv), envelope_recv)
        return one

    def bind_known(self, counter: Any, dtype: np.dtype, shape: tuple[int, ...],
                   signature: int, slow: Any, alloc: Any, rest: Any) -> Any:
        """The compiled whole bcast of an array of ``dtype`` and ``shape`` whose data every
        rank knows by ``signature`` (`run_known` as one C call: `Runner.known_call(x, out,
        timeout)`, ``slow`` for anything else before the call takes its number from
        ``counter``; ``rest(seq, ended, x, out, timeout)`` finishes a call not every rank
        posted the signature for), or None where this runner has no compiled one. Each
        binding has a runner of its own: one envelope serves every shape."""
        runner = compiled.runner(self) if self.knows_signatures else None
        if runner is None:
            return None
        runner.bind_known(counter, dtype, shape, signature, slow, alloc, rest)
        return runner.known_call

    def _flag(self) -> int:
        """A barrier's flag: whether this rank sent messages since its last MPI barrier."""
        return int(self.transport._sends != self.mark[0])

    def _flush(self, key: int) -> bool:
        """Whether agreed barrier ``key`` runs MPI's barrier (some rank flagged its entry);
        if so, the sends up to now count as flushed."""
        assert self.board is not None
        if not self.board.flagged(key):
            return False
        self.mark[0] = self.transport._sends
        return True

    def finish(self, send: Any, recv: Any, seq: int, timeout: float | None, agreed: bool,
               spun: bool, phase: int = 0) -> bool:
        """What call ``seq`` does off the inline route once its entry is posted (``agreed``:
        every rank's is there; ``spun``: the look took the wait's spin stage) — a time limit,
        calls in flight, not agreed: the general wait, and with a time limit MPI's call
        itself; whether it ran MPI's call (else the caller makes it: `run`, or the compiled
        runner, whose hand-over this is)."""
        mc = self.transport._pools[self.pool_key][seq % COLLECTIVE_SLOTS]
        return self._general(mc, send, recv, seq, phase, timeout, agreed, spun)

    def failed(self, seq: int, code: int) -> None:
        """Raise the error MPI's collective returned (``code``) for call ``seq`` (the compiled
        runner's)."""
        raise mpi_error(self.rank, f"{self.what} call #{seq} ({mpi_function(self.collective)})",
                        self._MPI.Exception(code))

    def _general(self, mc: Any, send: Any, recv: Any, seq: int, phase: int,
                 timeout: float | None, agreed: bool, spun: bool) -> bool:
        """What a call does before MPI's collective off the inline route: wait for earlier
        calls in flight on its MPI communicator, agree (unless ``agreed``; ``spun``: the
        inline look at the board took the wait's spin stage already), and with a time limit
        run MPI's call itself (`_timed`); whether it ran the call."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if seq >= COLLECTIVE_SLOTS and self._active:
            self._finish_earlier(seq, deadline)
        self.current, self.limit = seq, timeout
        try:
            key = call_key(seq, phase, True)
            if not agreed:
                self._agree(mc, key, seq, phase, deadline, send, recv, spun)
            if self.barrier and not self._flush(key):
                return True  # the agreement was the barrier
            if deadline is not None:
                self._timed(mc, send, recv, deadline)
                return True
        except self._MPI.Exception as exc:
            raise mpi_error(self.rank, f"{self.what} call #{seq} "
                            f"({mpi_function(self.collective)})", exc) from exc
        return False

    def _finish_earlier(self, seq: int, deadline: float | None) -> None:
        """Wait until no earlier call in flight on this rank shares this call's MPI
        communicator (MPI starts the collectives of one communicator in order), driving the
        calls in flight meanwhile."""
        if earlier_execution(self.native, seq, None) is not None:
            self.native.progress.wait(SlotWait(self, seq, deadline))

    def _agree(self, mc: Any, key: int, seq: int, phase: int, deadline: float | None,
               send: Any, recv: Any, spun: bool = False) -> None:
        """Return once every rank makes this call (raise `CollectiveMismatch` if not)."""
        board = self.board
        if board is not None:
            board.refuse(key, f"{self.what} call #{seq}")
            if board.pending[0] and not board.settle(self.others, self.rank,
                                                     f"call #{seq} ({self.what})", key):
                self._wait(SettleWait(self, board, int(board.pending[0]), seq, deadline, key),
                           spun)
            # a flag is decided once: an entry the compiled route posted keeps its own
            flag = board.flag_of(self.rank, key) if board.posted(key) else \
                self._flag() if self.barrier else 0
            board.post(key, self.fingerprint, flag)
            posted, mismatch = board.compare(key, self.fingerprint, self.others)
            if mismatch is not None:
                board.mismatched(mismatch, self.rank, key, self.fingerprint, self.checked)
            if not posted:
                wait = BoardWait(self, board, key, seq, deadline)
                transport = self.transport
                transport._wakers.append(wait)
                try:
                    if self.native.progress.active:  # drive the calls in flight meanwhile
                        self.native.progress.wait(wait)
                    else:
                        self._await_alone(wait, spun)
                except CollectiveTimeout:
                    # the late ranks will enter MPI's call: this rank's abandoned part does
                    threading.Thread(target=self._abandoned, args=(wait, mc, send, recv),
                                     daemon=True).start()
                    raise
                finally:
                    transport._wakers.remove(wait)
        elif self.agree_first:
            agreement = SpanningAgreement(
                self.transport, self.native.group, self.rank, self.native.context, seq, phase,
                self.fingerprint, True, self.checked)
            if self.native.progress.active:  # drive the calls in flight meanwhile
                self.native.progress.wait(SpanningWait(self, agreement, seq, deadline))
            else:
                agreement.wait(deadline, lambda: self.timeout_error(SPANNING),
                               lambda: note_stall(self, SPANNING, seq))

    def _wait(self, wait: BoardWait, spun: bool) -> None:
        """Wait for ``wait`` (its ranks' entries on the board), driving the calls in flight."""
        transport = self.transport
        transport._wakers.append(wait)
        try:
            if self.native.progress.active:
                self.native.progress.wait(wait)
            else:
                self._await_alone(wait, spun)
        finally:
            transport._wakers.remove(wait)

    def _await_alone(self, wait: BoardWait, spun: bool = False) -> None:
        """Wait for the board with no other call in flight: poll, then yield the core, then
        sleep up to `MAX_SLEEP` (the stages of the transport's own waits; the first already
        taken if ``spun``), letting MPI move the sends an earlier call left behind (a peer
        may still be receiving them)."""
        transport = self.transport
        start = time.monotonic() - (transport._spin_seconds if spun else 0.0)
        delay = 2e-5
        while not wait.poll():
            if transport._background or transport._pending:
                transport.progress()  # an earlier call's sends move only inside MPI calls
            waited = time.monotonic() - start
            if waited < transport._spin_seconds:
                continue
            if waited < transport._spin_seconds + transport._yield_seconds:
                os.sched_yield()
                continue
            note_stall(self, "for the other ranks to start it", wait.seq)
            time.sleep(delay)
            delay = min(2 * delay, MAX_SLEEP)

    def _abandoned(self, wait: BoardWait, mc: Any, send: Any, recv: Any) -> None:
        """A timed-out call's remains (a helper thread): once the others have posted the same
        call, take part in MPI's call, so they complete it."""
        delay = 1e-4
        while not wait.ready():
            time.sleep(delay)
            delay = min(2 * delay, 0.05)
            if self.transport._closed or self.dead_peer() is not None:
                return
        if wait.board.compare(wait.key, self.fingerprint, self.others)[1] is None:
            if self.barrier and not wait.board.flagged(wait.key):
                return  # the agreement was the barrier
            try:
                self.operation(mc, send, recv)
            except self._MPI.Exception:
                pass  # the call was given up already

    def dead_peer(self) -> int | None:
        """A rank of this communicator on this node whose process is gone (its world rank)."""
        return self.transport._peers.first_dead(self.native.group[r] for r in self.others)

    def _timed(self, mc: Any, send: Any, recv: Any, deadline: float) -> None:
        """MPI's blocking call on a helper thread, waited for until ``deadline``; the
        abandoned thread finishes the call when the late ranks come."""
        done = threading.Event()
        failed: list[BaseException] = []
        run = self.operation

        def blocking() -> None:
            try:
                run(mc, send, recv)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                failed.append(exc)
            done.set()

        threading.Thread(target=blocking, daemon=True, name=f"collops-{self.collective}").start()
        while not done.wait(min(self.transport._check_every,
                                max(0.0, deadline - time.monotonic()))):
            note_stall(self, f"in MPI's {mpi_function(self.collective)}", self.current)
            dead = self.dead_peer()
            if dead is not None:
                raise self.transport.noted(PeerFailed(
                    dead, f"its process (pid {self.transport._peers.pids[dead]}) is gone "
                    f"while rank {self.rank} waited in {self.what}"))
            if time.monotonic() >= deadline:
                raise self.timeout_error(f"in MPI's {mpi_function(self.collective)}")
        if failed:
            raise failed[0]

    def timeout_error(self, where: str) -> CollectiveTimeout:
        """The error of a call that did not complete in time, waiting ``where``."""
        return CollectiveTimeout(
            f"rank {self.rank}: {self.what} did not complete within {self.limit} s; waiting "
            f"{where} over {self.spec.size} ranks (MPI does not say which ranks it has not "
            "heard from)")

    # -- whole calls -------------------------------------------------------------------------
    def bind_call(self, counter: Any, dtype: np.dtype, itemsize: int, shape: tuple[int, ...],
                  out_shape: tuple[int, ...] | None, slow: Any, alloc: Any) -> None:
        """Run whole calls whose ``x`` has ``dtype`` and ``shape`` (`call`); the result has
        ``out_shape`` (None: this rank gets none), made by ``alloc``; ``slow`` is returned
        for anything else, before the call takes its number from ``counter``."""
        self._counter = memoryview(counter)
        size = int(np.prod(out_shape, dtype=np.int64)) if out_shape is not None else 0
        self._hot = (dtype, shape, out_shape, size, slow, alloc)
        runner = compiled.runner(self)
        if runner is None:
            self.__dict__.pop("call", None)  # this method, not an earlier binding's runner
        else:  # the whole call in C: `call` is the compiled runner's
            runner.bind_call(counter, dtype, shape, out_shape, slow, alloc)
            self.call = runner.call  # type: ignore[method-assign]

    def call(self, x: Any, out: Any, timeout: float | None) -> Any:
        """One whole call bound by `bind_call`: its result, None, or the ``slow`` marker."""
        hot = self._hot
        assert hot is not None
        dtype, shape, out_shape, size, slow, alloc = hot
        if type(x) is not np.ndarray or x.dtype is not dtype and x.dtype != dtype or \
                x.shape != shape or not (xf := x.flags).c_contiguous:
            return slow
        if out_shape is None:
            result = None
        elif out is None:
            result = alloc()
        elif (type(out) is np.ndarray and out.size == size and out is not x
              and (out.dtype is dtype or out.dtype == dtype)):
            of = out.flags
            # arrays that each own their memory cannot overlap, unless they are one array
            if not (of.c_contiguous and of.writeable) or (
                    not (of.owndata and xf.owndata) and np.may_share_memory(out, x)):
                return slow
            result = out
        else:
            return slow
        counter = self._counter
        seq = counter[0]
        counter[0] = seq + 1
        self.run(x, result, seq, timeout)
        if result is None or result.shape == out_shape:
            return result
        return result.reshape(out_shape)


    def bind_bcast(self, counter: Any, env: np.ndarray, dtype: np.dtype,
                   shape: tuple[int, ...], nbytes: int, head: Any, slow: Any, alloc: Any,
                   out_shape: tuple[int, ...] | None = None, blocks: int = 1, block: int = 0,
                   own: int = 0) -> None:
        """Run whole broadcasts of an array of ``dtype`` and ``shape`` (``nbytes``) through
        this runner's envelope ``env`` (`bcast`): the root's envelope holds ``head``, then
        the data; ``slow`` is returned for anything else, before the call takes its number
        from ``counter``; a result the call makes is a copy of the data (``alloc`` is not
        needed). Only a bcast's envelope binds so (one block)."""
        assert blocks == 1 and self.collective == "bcast", "a bcast's envelope only"
        self._counter = memoryview(counter)
        head = bytes(head)
        at = len(head)  # the data follows the header
        out_shape = shape if out_shape is None else out_shape
        # the root's envelope is its own, its header written once; the others receive into
        # ``env``, whose header the general path reads when the root sent another signature
        mine = np.zeros_like(env) if self.rank == self.spec.root else env
        mine[:at] = np.frombuffer(head, np.uint8)
        data = mine[at: at + nbytes].view(dtype).reshape(out_shape)
        received: Any = memoryview(env)  # type: ignore[arg-type]
        self._bcast_hot = (dtype, shape, out_shape, head, received[:at], mine, data, slow)
        runner = compiled.runner(self)
        if runner is None:
            self.__dict__.pop("bcast", None)  # this method, not an earlier binding's runner
        else:  # the whole call in C: `bcast` is the compiled runner's
            runner.bind_bcast(counter, env, mine, head, dtype, shape, out_shape, slow, alloc)
            self.bcast = runner.bcast  # type: ignore[method-assign]

    def bcast(self, x: Any, out: Any, timeout: float | None) -> Any:
        """One whole broadcast bound by `bind_bcast`: its result, None (the root sent another
        signature: the envelope holds its header) or the ``slow`` marker."""
        hot = self._bcast_hot
        assert hot is not None
        dtype, shape, out_shape, head, header, env, data, slow = hot
        root = self.rank == self.spec.root
        if root and (type(x) is not np.ndarray or x.dtype is not dtype and x.dtype != dtype
                     or x.shape != shape or not x.flags.c_contiguous):
            return slow
        if out is not None:
            if not (type(out) is np.ndarray and out.shape == out_shape
                    and (out.dtype is dtype or out.dtype == dtype)
                    and (of := out.flags).c_contiguous and of.writeable):
                return slow
            # arrays that each own their memory cannot overlap, unless they are one array
            if root and out is not x and not (of.owndata and x.flags.owndata) and \
                    np.may_share_memory(out, x):
                return slow  # the general path copies
        counter = self._counter
        seq = counter[0]
        counter[0] = seq + 1
        if root:
            data[...] = x
            self.run(self._MPI.IN_PLACE, env, seq, timeout)
            if out is None:
                return data.copy()
            if out is not x:
                out[...] = x
            return out
        self.run(None, env, seq, timeout)
        if header != head:
            return None
        if out is None:
            return data.copy()
        out[...] = data
        return out


#: `BlockingCall._known_runner` before its first use
_UNMADE = object()


def bind(call: NativeCall, length_prefix: tuple[int, int] | None = None,
         flavour: Flavour = MPI_NATIVE) -> Any:
    """The blocking runner of ``call``'s signature (`NativeAlgorithm.bind`): whole calls for
    the single-phase collectives and bcast's envelope (`bind_call`, `bind_bcast`), phases for
    scatter's envelopes and data."""
    runner = BlockingCall(call, flavour)
    return runner if call.spec.collective in ("scatter", "scatterv") else runner.__call__
