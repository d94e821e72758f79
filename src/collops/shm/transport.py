"""The shared-memory transport: ranks that are processes of one machine.

Every ordered pair of ranks (src -> dst) owns a ring of fixed-size slots and a bulk area in
the job's segment (see `segment` for the layout). Three protocols move a message:

* **eager** (payload fits a slot): the sender writes payload, header, and last the slot's
  sequence number; the send is done at once. The receiver polls the next slot of each
  incoming ring in `progress`, copies the payload into the posted buffer — or keeps a copy
  among the unexpected messages — and publishes its tail so the sender can reuse the slot.
* **single copy** (when the kernel permits `process_vm_readv`: up to ``single_copy_max`` and
  from ``single_copy_min`` bytes, settings of the selection table's ``protocols.shm``): the
  sender posts a request-to-send carrying its buffer's address; the receiver, once it has a
  matching receive, reads the bytes straight from the sender's memory and answers FIN. From
  `SPLIT_MIN` bytes the transfer is **split**: the receiver reads pieces from the front and
  invites the sender (SPLIT, carrying the receive buffer's address) to write pieces from the
  back with `process_vm_writev` whenever it polls, the two claiming pieces through words of
  the pair area (see "split single copy" below). Buffers whose kernel copy would suffer 4 KiB
  aliasing are pipelined instead (`kernel.aliased`).
* **pipelined** (in between, or without single copy): the receiver answers a request-to-send
  with clear-to-send when its receive is posted and the pair's bulk area is free; the sender
  then streams chunks into the bulk area's chunk slots while the receiver copies earlier
  chunks out, each side publishing a cumulative chunk counter. The receiver grants the bulk
  area to one message at a time, so out-of-order receives can never deadlock it.
  **Two-ended** when the request carries the sender's address and the receiver does not
  send to that peer itself: should no chunk come for ``pull_after`` (the selection table's
  ``protocols.shm``, as ``pull_bytes``/``pull_max`` and the split pieces), the receiver reads
  pieces from the back of the sender's buffer, publishing its lower boundary in the word
  after its drained counter; the sender stops at that boundary (bytes copied twice near the
  meeting point are the same bytes, so races cost only time), sends STOP with its chunk
  count, and completes on the receiver's FIN, sent once the front meets the back.

Waiting (`waiting.Ladder`, one per process) spins briefly (not at all when ranks outnumber
cores), then yields the core, then sleeps on a futex in the rank's block after raising its
*sleeping* flag; a sender that sees the flag bumps the doorbell and wakes it, so wake-ups
cost a system call only for ranks that actually sleep. Flag and ring stores are ordered by a
full fence on both sides (an uncontended lock, whose atomic instruction is a fence on x86).

Failures: the launcher marks a dead rank in the job header and wakes every rank; `progress`
raises `PeerFailed` when any operation is pending. A peer that exited normally while this
rank still waits for it is reported the same way.

The transport is made of three parts: `endpoint` (a rank's state and tables, and writing
into the rings), `bulk` (the rendezvous, single copies and the bulk pipeline) and this
module (the transport interface, receiving, the areas' facilities, sleeping and failures).
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..algorithms.fingerprint import describe, given_up
from ..errors import CollectiveMismatch, CollopsError, PeerFailed, TransportError
from ..transport.base import Capabilities, Handle
from ..transport.tags import (
    CALL_BITS,
    PHASE_BITS,
    SEQ_BITS,
    call_of_tag_base,
    is_point_to_point,
)
from . import kernel
from . import segment as seg
from .bulk import BulkTransfers
from .direct_area import DirectArea, slot_of
from .endpoint import (
    _FENCE,
    _SPLIT,
    _STOP,
    _address,
    _byte_view,
)
from .stream_area import StreamArea

#: how long `ShmTransport.close` tries to deliver what the rank still owes, and how often
CLOSE_FLUSH_SECONDS, CLOSE_POLL_SECONDS = 5.0, 100e-6


class ShmTransport(BulkTransfers):
    """Rank ``rank`` of ``size`` ranks sharing the job segment ``job`` (an inherited
    descriptor, or a name under /dev/shm: `segment.create_job`)."""

    @classmethod
    def from_env(cls) -> ShmTransport:
        """Attach as described by COLLOPS_SHM_FD (the segment's inherited descriptor),
        COLLOPS_RANK and COLLOPS_SIZE."""
        try:
            fd = int(os.environ["COLLOPS_SHM_FD"])
            rank = int(os.environ["COLLOPS_RANK"])
            size = int(os.environ["COLLOPS_SIZE"])
        except (KeyError, ValueError) as exc:
            raise TransportError(f"shm transport: environment incomplete ({exc})") from None
        transport = cls(fd, rank, size)
        os.set_inheritable(fd, False)  # mapped: the rank's own children need not hold it
        return transport

    # ---- the interface ----------------------------------------------------------------

    def isend(self, peer: int, tag: int, data: memoryview, fingerprint: int = 0) -> Handle:
        """Start sending ``data`` to ``peer``; ``data`` must stay unchanged until done."""
        if type(data) is not memoryview or data.format != "B" or not data.c_contiguous:
            data = _byte_view(data)
        n = data.nbytes
        h = Handle(peer, tag, n)
        if n <= self._eager_limit:
            if self._send_queue[peer] or not self._push(peer, seg.EAGER, tag, fingerprint,
                                                          data, n, 0):
                self._enqueue(peer, (seg.EAGER, tag, fingerprint, n, data, 0, h))
            else:
                h.done = True
            return h
        self._rendezvous_sends[peer][tag] = (h, data)
        if self._single_copy and (n >= self._single_copy_min or n <= self._single_copy_max):
            kind, aux = seg.RTS_CMA, _address(data)
        else:  # pipelined; two-ended when the receiver may read this buffer too
            kind, aux = seg.RTS_PIPE, _address(data) if self._single_copy else 0
        self._send_control(peer, kind, tag, fingerprint, n, aux)
        return h

    def irecv(self, peer: int, tag: int, out: memoryview) -> Handle:
        """Start receiving the message ``(peer, tag)`` into ``out``."""
        if type(out) is not memoryview or out.format != "B" or out.ndim != 1:
            out = memoryview(out)
            if not out.c_contiguous:
                raise TransportError("shm transport: a receive buffer must be contiguous")
            out = out.cast("B")
        h = Handle(peer, tag, out.nbytes)
        unexpected = self._unexpected[peer]
        if unexpected and tag in unexpected:
            kind, fp, n, extra = unexpected.pop(tag)
            if kind == seg.EAGER:
                self._complete_eager(h, out, fp, n, extra)
            else:
                self._match_rendezvous(peer, h, out, kind, tag, fp, n, extra)
        else:
            self._posted[peer][tag] = (h, out)
        return h

    def progress(self) -> None:
        """Advance pending operations without blocking; raise on failure."""
        self._advance()

    def wait_for_activity(self, timeout: float | None) -> None:
        """Block until some pending operation may have advanced, or ``timeout`` seconds."""
        if self._advance():
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        for peer in self._busy:  # a two-ended receive reads from the back when its time comes
            queue = self._pipe_in[peer]
            if queue and queue[0].remote and not queue[0].complete:  # (`due`: monotonic)
                deadline = queue[0].due if deadline is None else min(deadline, queue[0].due)
        self.ladder.wait(self._advance, self._sleep_for_activity, self._check_waited_peers,
                         deadline)

    def close(self) -> None:
        """Deliver what this rank still owes its peers before it stops, as MPI_Finalize
        completes a rank's sends: messages queued for room in a full ring (a receive's FIN,
        an eager message, a point-to-point cell) would otherwise never leave, and a large
        point-to-point send nobody waited for could not be read once this process is gone.
        Gives up on a failed or exited peer and after `CLOSE_FLUSH_SECONDS`; idempotent."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + CLOSE_FLUSH_SECONDS
        words, cells = self._words, self._cells
        while time.monotonic() < deadline and not words[seg.H_FAILED]:
            owed = [p for p in self._ranks if self._owes(p)
                    and words[self._state_word[p]] not in (seg.EXITED, seg.FAILED)]
            if not owed:
                return
            try:
                moved = self._advance()  # drains this rank's rings too: the peer may wait
                if cells is not None:
                    moved |= cells.progress()
            except CollopsError:
                return
            if not moved:
                time.sleep(CLOSE_POLL_SECONDS)

    def _owes(self, peer: int) -> bool:
        """Whether this rank has something to deliver to ``peer`` before it may stop: a
        message queued for room, or a point-to-point payload the peer has not read yet."""
        if self._send_queue[peer] or (self._cells is not None and self._cells.queued[peer]):
            return True
        return (any(is_point_to_point(tag) for tag in self._rendezvous_sends[peer])
                or any(is_point_to_point(tag) for tag in self._streams[peer])
                or any(is_point_to_point(out.h.tag) for out in self._pipe_out[peer]))

    def capabilities(self) -> Capabilities:
        """What this transport offers ("shm_direct": direct areas for small collectives;
        "shm_stream": stream areas for large ones, on top of them; "shm_cma": single copies
        out of the peers' memory, where the job permits them)."""
        lay = self._layout
        resources = frozenset({"shm_direct"}) if lay.direct_areas and lay.direct_bytes \
            else frozenset()
        if resources and lay.stream_rank_bytes and self.size <= seg.STREAM_MAX_RANKS:
            resources |= {"shm_stream"}
        if resources and self._single_copy:
            resources |= {"shm_cma"}
        return Capabilities(name="shm", node_of_rank=(0,) * self.size,
                            single_copy=self._single_copy, resources=resources)

    # ---- direct areas (see shm_direct) ------------------------------------------------

    def direct_area(self, context: int, group: Sequence[int]) -> DirectArea | None:
        """The direct area of the communicator ``(context, group)``, or None if it has none."""
        key = (context, tuple(group))
        area = self._direct_areas.get(key)
        if area is None:
            if not 0 <= context < self._layout.direct_areas or self.rank not in group:
                return None
            area = self._direct_areas[key] = DirectArea(self, context, group)
        return area

    def stream_area(self, context: int) -> StreamArea | None:
        """The stream area of communicator context ``context``, or None if it has none."""
        area = self._stream_areas.get(context)
        if area is None:
            if not 0 <= context < self._layout.stream_areas:
                return None
            area = self._stream_areas[context] = StreamArea(self, context)
        return area

    def call_counter(self, context: int) -> np.ndarray:
        """This rank's next call number on ``context``: a word of the job segment for the
        first `COUNTED_CONTEXTS` contexts (the first communicator there to ask), so the other
        ranks can tell whether it has arrived at a call (stall reports)."""
        if context >= seg.COUNTED_CONTEXTS or context in self._counted:
            return np.zeros(1, np.int64)
        self._counted.add(context)
        return np.frombuffer(self._segment.map, np.int64, 1,
                             self._layout.counter_offset(self.rank, context))

    def release_comm(self, context: int, group: tuple[int, ...],
                     timeout: float | None) -> None:
        """A freed communicator gives its context back: once every reader of this rank's
        direct slots has read them, the area's slots are free for the next communicator on
        the context (whatever its group), and its call counter shows again."""
        self._counted.discard(context)
        area = self._direct_areas.get((context, tuple(group)))
        if area is None:
            return
        late: CollectiveMismatch | None = None
        try:  # a call found mismatched only now is raised once the area is given back
            area.settle(timeout)
        except CollectiveMismatch as exc:
            late = exc
        slots = range(seg.DIRECT_SLOTS)

        def read() -> bool:
            self.progress()  # a reader may wait for a message still queued here
            return all(area.writable(s) for s in slots)

        if not read():
            deadline = None if timeout is None else time.monotonic() + timeout
            area.wait(read, lambda: sorted({r for s in slots for r in area.unacknowledged(s)}),
                      deadline, f"rank {area.index}: free", None, describe)
        area.occupant.clear()
        area.own_pending[:] = [0] * seg.DIRECT_SLOTS
        if late is not None:
            raise late

    def calls_started(self, context: int, group: Sequence[int]) -> list[int] | None:
        """The next call number of each of ``group``'s ranks on ``context``, if counted."""
        if context >= seg.COUNTED_CONTEXTS:
            return None
        words, layout = self._words, self._layout
        return [int(words[layout.counter_offset(r, context) // seg.WORD]) for r in group]

    @property
    def segment_map(self) -> Any:
        """The job segment's mapping (a writable buffer), for the compiled runners."""
        return self._segment.map

    @property
    def segment_address(self) -> int:
        """The address of the job segment in this process."""
        return self._base_address

    @property
    def oversubscribed(self) -> bool:
        """Whether the job has more ranks than this process may use cores."""
        return self._oversubscribed

    def shares_core(self, rank: int) -> bool:
        """Whether the launcher pinned ``rank`` to the CPU it pinned this rank to."""
        mine = self._binding[self.rank]
        return mine is not None and rank != self.rank and self._binding[rank] == mine

    @property
    def direct_bytes(self) -> int:
        """Bytes of each rank's slot in a direct area (0: the job has no direct areas)."""
        return self._layout.direct_bytes if self._layout.direct_areas else 0

    def comm_resources(self, context: int, group: tuple[int, ...]) -> frozenset[str]:
        """"shm_direct" when the communicator has a direct area, "shm_stream" when it also
        has a stream area (`stream_areas`, in the segment after the direct areas)."""
        resources = self.capabilities().resources
        if "shm_direct" in resources and self.direct_area(context, group) is None:
            resources = resources - {"shm_direct", "shm_stream", "shm_cma"}
        if "shm_stream" in resources and not 0 <= context < self._layout.stream_areas:
            resources = resources - {"shm_stream"}
        return resources

    def watch_direct(self, ready: Callable[[], bool]) -> None:
        """Count ``ready()`` as activity in `wait_for_activity` until unwatched."""
        self._direct_watch.append(ready)

    def unwatch_direct(self, ready: Callable[[], bool]) -> None:
        """Stop watching ``ready``."""
        try:
            self._direct_watch.remove(ready)
        except ValueError:
            pass

    def wake_sleepers(self, ranks: Sequence[int]) -> None:
        """Wake those of ``ranks`` that sleep (after this rank's last store)."""
        _FENCE.acquire()
        _FENCE.release()
        words, sleeping = self._words, self._sleeping_word
        for r in ranks:
            if words[sleeping[r]]:
                self._wake(r)

    @staticmethod
    def fence() -> None:
        """A full memory fence: this rank's stores are visible before its next loads."""
        _FENCE.acquire()
        _FENCE.release()

    def read_from(self, rank: int, remote: int, local: int, nbytes: int) -> None:
        """Copy ``nbytes`` at address ``remote`` in rank ``rank``'s process to ``local``
        (single copy, for collectives that exchange buffer addresses); `PeerFailed` when that
        process is gone."""
        pid = self.pid_of(rank)
        try:
            self._reader.read(pid, remote, local, nbytes)
        except TransportError as e:
            raise self.single_copy_error(rank, getattr(e, "errno", 0), str(e)) from None

    def pid_of(self, rank: int) -> int:
        """The process id of world rank ``rank`` (for single copies from its memory)."""
        return int(self._words[self._pid_word[rank]])

    def pid_word(self, rank: int) -> int:
        """Index in the segment's words of world rank ``rank``'s process id (which it
        publishes when it attaches: read it when needed, not before)."""
        return self._pid_word[rank]

    def single_copy_error(self, rank: int, err: int, detail: str) -> TransportError:
        """The error for a single copy from ``rank``'s memory that failed with errno ``err``:
        `PeerFailed` when its process is gone (ESRCH: exited, even if not yet reaped), else a
        `TransportError` carrying ``detail``."""
        pid = self.pid_of(rank)
        if pid <= 0:  # not attached yet: nothing to read from, and nothing that died
            return TransportError(f"single copy from rank {rank}: it has not attached yet "
                                  f"({detail})")
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            err = errno.ESRCH
        if err == errno.ESRCH:
            return PeerFailed(rank, f"its process ({pid}) is gone ({detail})")
        return TransportError(f"single copy from rank {rank} (pid {pid}): {detail}")

    def sleeping_word(self, rank: int) -> int:
        """Index in the segment's words of ``rank``'s *sleeping* flag."""
        return self._sleeping_word[rank]

    def wake(self, rank: int) -> None:
        """Ring ``rank``'s doorbell and wake it (it has raised its sleeping flag)."""
        self._wake(rank)

    def sleep_until(self, ready: Callable[[], bool], timeout: float) -> None:
        """Sleep on this rank's doorbell until woken or ``timeout`` s pass, unless ``ready()``
        holds once this rank is marked asleep (a peer's store before that is seen; one after
        it rings the doorbell)."""
        words, me = self._words, self.rank
        sleeping, doorbell = self._sleeping_word[me], self._doorbell_word[me]
        ring = words[doorbell]
        words[sleeping] = 1
        _FENCE.acquire()
        _FENCE.release()
        try:
            if ready():
                return
            kernel.futex_wait(self._base_address + doorbell * 8, ring, timeout)
        finally:
            words[sleeping] = 0

    def sleep_for_direct(self, ready: Callable[[], bool], timeout: float) -> None:
        """`sleep_until` ``ready()`` holds or a message moves (at most ``timeout``)."""
        self.sleep_until(lambda: ready() or self._advance(), timeout)

    def unexpected_for_call(self, value: int, shift: int) -> tuple[int, int] | None:
        """``(peer, fingerprint)`` of an unmatched message with ``tag >> shift == value``."""
        for peer in self._ranks:
            for tag, entry in self._unexpected[peer].items():
                if tag >> shift == value:
                    return peer, entry[1]
        return None

    def arrived(self, peer: int, tag: int) -> int | None:
        """The size of the unmatched message ``(peer, tag)`` (eager or announced), if any."""
        entry = self._unexpected[peer].get(tag)
        return None if entry is None else int(entry[2])

    def lost(self, peer: int) -> tuple[PeerFailed, bool] | None:
        """``(PeerFailed, True)`` once a rank's process died, ``(PeerFailed, False)`` once
        ``peer`` exited (after taking what it sent), else None."""
        failed = int(self._words[seg.H_FAILED])
        if failed:
            return PeerFailed(failed - 1, "the process died; the job cannot continue"), True
        if peer != self.rank and self._words[self._state_word[peer]] in (seg.EXITED,
                                                                         seg.FAILED):
            self._advance()  # drain what it sent before leaving
            return PeerFailed(peer, "it exited while an operation with it was pending"), False
        return None

    def give_up(self, tag_base: int, error: BaseException, fingerprint: int | None = None
                ) -> None:
        """This rank abandoned the phase of a call whose tag base is ``tag_base`` after
        ``error``. A `PeerFailed` is noted as the cause of this rank's own failure
        (`note_cause`: the launcher names that rank to the others). After any other error,
        this rank's word for the call in the communicator's direct area says it gave the call
        up (`fingerprint.given_up`: with what it called, when ``fingerprint`` is known, so the
        peers' errors say how the calls differed), so a peer that waits there for its
        contribution or for a message from it raises `CollectiveMismatch`; and the call counts
        as read in the peers' slots, so they can use them again. This rank's receives of
        the call are dropped."""
        if isinstance(error, PeerFailed):
            self.note_cause(error.failed_rank)
            return
        if not isinstance(error, CollopsError):
            return
        call = tag_base >> (SEQ_BITS + PHASE_BITS)
        for posted in self._posted:  # its receives will not be waited for: a later wait
            for tag in [t for t in posted if t >> (SEQ_BITS + PHASE_BITS) == call]:
                del posted[tag]  # must not take a peer's word for this call as its own
        context, seq = call_of_tag_base(tag_base)
        phase = (tag_base >> SEQ_BITS) & ((1 << PHASE_BITS) - 1)
        for (area_context, _), area in list(self._direct_areas.items()):
            if area_context == context:
                area.give_up(seq, phase, given_up(fingerprint))

    def note_cause(self, failed: int) -> None:
        """Record in this rank's block that its failure follows from rank ``failed``'s (the
        first such rank only), for the launcher to name that rank to the others."""
        word = self._layout.rank_word(self.rank, seg.R_STATUS)
        if failed != self.rank and not self._words[word]:
            self._words[word] = failed + 1

    def _direct_call_of_waited_peer(self) -> None:
        """Raise if a peer this rank awaits a message from made that call directly."""
        # where a message's call number sits in its tag (`collops.transport.tags`)
        shift, bits = SEQ_BITS, CALL_BITS + PHASE_BITS
        mask = (1 << bits) - 1
        words, lay = self._words, self._layout
        for peer in self._ranks:
            for tag in self._posted[peer]:
                context, call = tag >> (shift + bits), (tag >> shift) & mask
                if context >= lay.direct_areas:
                    continue
                slot = slot_of(call >> 3, call & 7)
                held = lay.direct_rank_offset(context, peer) // seg.WORD + 2 * slot
                k = int(words[held]) >> 24
                if k and (k - 1) & mask == call:
                    fingerprint = int(words[held + 1])
                    if fingerprint == given_up():
                        raise CollectiveMismatch(
                            f"rank {self.rank} (world) awaits a message from rank {peer} "
                            f"(world), but rank {peer} gave the call up: it raised an error "
                            "of its own")
                    exc = CollectiveMismatch(
                        f"rank {self.rank} (world) awaits a message from rank {peer} (world) "
                        f"for a call that rank {peer} made directly through shared memory: "
                        f"it called {describe(fingerprint)}")
                    exc.theirs = fingerprint
                    raise exc

    # ---- receiving --------------------------------------------------------------------

    def _advance(self) -> bool:
        """One pass over every incoming ring and every busy peer; True if anything moved."""
        words = self._words
        if words[seg.H_FAILED]:
            self._raise_if_pending(int(words[seg.H_FAILED]) - 1)
        moved = False
        in_tail, in_slots, mask = self._in_tail, self._in_slots, self._mask
        for src in self._ranks:
            tail = in_tail[src]
            if words[in_slots[src][tail & mask]] == tail + 1:
                self._drain(src)
                moved = True
        if self._busy:
            for peer in list(self._busy):
                moved |= self._advance_peer(peer)
        if self._direct_watch:
            for ready in self._direct_watch:
                if ready():
                    return True
        return moved

    def _drain(self, src: int) -> None:
        words, slots, mask = self._words, self._in_slots[src], self._mask
        tail = self._in_tail[src]
        consumed_word = self._in_consumed_word[src]
        while True:
            w = slots[tail & mask]
            if words[w] != tail + 1:
                break
            kind, tag = words[w + 4], words[w + 1]
            if kind == seg.EAGER:
                self._on_eager(src, tag, words[w + 2], words[w + 3], w * 8 + seg.SLOT_HEADER)
            elif kind == seg.CTS:
                self._on_clear_to_send(src, tag, words[w + 5])
            elif kind == seg.FIN:
                self._on_finish(src, tag)
            elif kind == _STOP:
                self._on_stop(src, tag, words[w + 5])
            elif kind == _SPLIT:
                self._on_split(src, tag, words[w + 2], words[w + 3], words[w + 5])
            else:
                self._on_request_to_send(src, kind, tag, words[w + 2], words[w + 3],
                                         words[w + 5])
            tail += 1
            self._in_tail[src] = tail
            words[consumed_word] = tail

    def _on_eager(self, src: int, tag: int, fp: int, n: int, p: int) -> None:
        entry = self._posted[src].pop(tag, None)
        if entry is None:
            self._unexpected[src][tag] = (seg.EAGER, fp, n, bytes(self._buf[p: p + n]))
            return
        h, out = entry
        h.nbytes, h.fingerprint = n, fp
        if n <= out.nbytes:
            out[:n] = self._buf[p: p + n]
        h.done = True

    @staticmethod
    def _complete_eager(h: Handle, out: memoryview, fp: int, n: int, payload: bytes) -> None:
        h.nbytes, h.fingerprint = n, fp
        if n <= out.nbytes:
            out[:n] = payload
        h.done = True

    def _on_request_to_send(self, src: int, kind: int, tag: int, fp: int, n: int,
                            aux: int) -> None:
        entry = self._posted[src].pop(tag, None)
        if entry is None:
            self._unexpected[src][tag] = (kind, fp, n, aux)
        else:
            self._match_rendezvous(src, entry[0], entry[1], kind, tag, fp, n, aux)

    # ---- sleeping and failures --------------------------------------------------------

    def _sleep_for_activity(self, timeout: float) -> None:
        self.sleep_until(self._advance, timeout)

    def _check_waited_peers(self) -> None:
        """Raise if a peer this rank awaits made its call directly, or exited."""
        self._direct_call_of_waited_peer()
        self._check_exited_peers()

    def _pending_peers(self) -> set[int]:
        peers = {p for p in self._ranks
                 if self._posted[p] or self._rendezvous_sends[p] or self._pipe_in[p]
                 or self._pipe_out[p] or self._streams[p] or self._split_in[p] is not None}
        return peers | self._busy

    def _raise_if_pending(self, failed: int) -> None:
        if self._pending_peers():
            if self._words[self._state_word[failed]] == seg.EXITED:  # a cause (`note_cause`)
                raise PeerFailed(failed, "it exited while the job still needed it; the job "
                                 "cannot continue")
            raise PeerFailed(failed, "the process died; the job cannot continue")

    def _check_exited_peers(self) -> None:
        for peer in self._pending_peers():
            if peer != self.rank and self._words[self._state_word[peer]] == seg.EXITED:
                self._advance()  # drain what it sent before leaving
                if peer in self._pending_peers():
                    self.note_cause(peer)
                    raise PeerFailed(peer, "it exited while an operation with it was pending")
