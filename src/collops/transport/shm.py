"""The shared-memory transport: ranks that are processes of one machine.

Every ordered pair of ranks (src -> dst) owns a ring of fixed-size slots and a bulk area in
the job's segment (see `shm_segment` for the layout). Three protocols move a message:

* **eager** (payload fits a slot): the sender writes payload, header, and last the slot's
  sequence number; the send is done at once. The receiver polls the next slot of each
  incoming ring in `progress`, copies the payload into the posted buffer — or keeps a copy
  among the unexpected messages — and publishes its tail so the sender can reuse the slot.
* **single copy** (large, when the kernel permits `process_vm_readv`): the sender posts a
  request-to-send carrying its buffer's address; the receiver, once it has a matching
  receive, reads the bytes straight from the sender's memory and answers FIN.
* **pipelined** (large, otherwise): the receiver answers a request-to-send with
  clear-to-send when its receive is posted and the pair's bulk area is free; the sender then
  streams chunks into the bulk area's few chunk slots while the receiver copies earlier
  chunks out, each side publishing a cumulative chunk counter. The receiver grants the bulk
  area to one message at a time, so out-of-order receives can never deadlock it.

Waiting spins briefly (not at all when ranks outnumber cores), then yields the core, then
sleeps on a futex in the rank's block after raising its *sleeping* flag; a sender that sees
the flag bumps the doorbell and wakes it, so wake-ups cost a system call only for ranks
that actually sleep. Flag and ring stores are ordered by a full fence on both sides (an
uncontended lock, whose atomic instruction is a fence on x86).

Failures: the launcher marks a dead rank in the job header and wakes every rank; `progress`
raises `PeerFailed` when any operation is pending. A peer that exited normally while this
rank still waits for it is reported the same way.
"""

from __future__ import annotations

import os
import struct
import threading
import time
from collections import deque
from typing import Any

import numpy as np

from ..errors import PeerFailed, TransportError
from . import shm_segment as seg
from .base import Capabilities, Handle, Transport

_FENCE = threading.Lock()
#: tag, fingerprint, nbytes, kind, aux: the slot header after its sequence word
_SLOT_FIELDS = struct.Struct("=5Q")
_MASK32 = 0xFFFFFFFF
#: seconds of pure polling before yielding, when every rank has a core of its own
SPIN_SECONDS = 50e-6
#: seconds of polling with sched_yield between polls before sleeping
YIELD_SECONDS = 1e-3
#: longest single futex sleep (failures also wake sleepers explicitly)
SLEEP_SLICE = 0.25
#: smallest message sent single-copy when every rank has a core (below it, and above the
#: eager limit, messages are pipelined through the bulk area, whose copy-in and copy-out run
#: on two cores at once). Measured with benchmarks/shm_pingpong.py on the 2-core development
#: machine: pipelined 1.9 / 3.5 / 5.6 / 8.9 GB/s at 64 KiB / 256 KiB / 1 MiB / 4 MiB against
#: 0.4 / 1.4 / 3.2 / 4.4 single-copy, but 3.0 against 6.1–7.0 at 16 MiB (the pipeline's
#: double copy then leaves the cache). When ranks outnumber cores the pipeline stalls on
#: every chunk until the peer is scheduled, so then every large message goes single-copy.
SINGLE_COPY_MIN = 8 << 20


def _byte_view(data: Any) -> memoryview:
    """A flat unsigned-byte view of any buffer-protocol object (copying only if strided)."""
    view = data if type(data) is memoryview else memoryview(data)
    if view.format == "B" and view.ndim == 1 and view.c_contiguous:
        return view
    if view.c_contiguous:
        return view.cast("B")
    return memoryview(view.tobytes())


def _address(view: memoryview) -> int:
    """The address of a contiguous buffer's first byte."""
    return int(np.frombuffer(view, dtype=np.uint8).__array_interface__["data"][0])


class ShmTransport(Transport):
    """Rank ``rank`` of ``size`` ranks sharing the job segment ``job`` under /dev/shm."""

    def __init__(self, job: str, rank: int, size: int, *, single_copy: bool | None = None,
                 single_copy_min: int | None = None) -> None:
        self._segment = seg.Segment(job)
        layout = self._segment.layout
        if layout.size != size or not 0 <= rank < size:
            self._segment.close()
            raise TransportError(
                f"job {job} has {layout.size} ranks; cannot attach as rank {rank} of {size}")
        self.job, self.rank, self.size = job, rank, size
        self._layout = layout
        self._words = self._segment.words
        self._buf = self._segment.buf
        self._base_address = self._segment.address
        self._nslots, self._mask = layout.nslots, layout.nslots - 1
        assert layout.nslots & self._mask == 0, "slot count must be a power of two"
        self._eager_limit = layout.eager_limit
        self._nchunks, self._chunk_bytes = layout.nchunks, layout.chunk_bytes
        allowed = bool(self._words[seg.H_CMA])
        if single_copy is None:
            single_copy = os.environ.get("COLLOPS_SHM_SINGLE_COPY", "1") != "0"
        self._single_copy = allowed and single_copy
        self._oversubscribed = size > len(os.sched_getaffinity(0))
        if single_copy_min is None:
            default = 0 if self._oversubscribed else SINGLE_COPY_MIN
            single_copy_min = int(os.environ.get("COLLOPS_SHM_SINGLE_COPY_MIN", default))
        self._single_copy_min = max(layout.eager_limit + 1, single_copy_min)
        self._reader = seg.RemoteReader()
        #: current spin budget: halved when a spin finds nothing, restored when one succeeds
        self._spin = 0.0 if self._oversubscribed else SPIN_SECONDS
        self._closed = False
        self._init_tables()
        self._attach()

    @classmethod
    def from_env(cls) -> ShmTransport:
        """Attach as described by COLLOPS_JOB, COLLOPS_RANK and COLLOPS_SIZE."""
        try:
            job = os.environ["COLLOPS_JOB"]
            rank = int(os.environ["COLLOPS_RANK"])
            size = int(os.environ["COLLOPS_SIZE"])
        except (KeyError, ValueError) as exc:
            raise TransportError(f"shm transport: environment incomplete ({exc})") from None
        return cls(job, rank, size)

    # ---- set-up -----------------------------------------------------------------------

    def _init_tables(self) -> None:
        lay, me, n = self._layout, self.rank, self.size
        ranks = range(n)
        self._ranks = list(ranks)
        self._out_slots = [[lay.slot_offset(me, p, s) // 8 for s in range(lay.nslots)]
                           for p in ranks]
        self._in_slots = [[lay.slot_offset(p, me, s) // 8 for s in range(lay.nslots)]
                          for p in ranks]
        self._out_head = [0] * n
        self._out_consumed = [0] * n
        self._out_consumed_word = [lay.consumed_word(me, p) for p in ranks]
        self._in_tail = [0] * n
        self._in_consumed_word = [lay.consumed_word(p, me) for p in ranks]
        self._sleeping_word = [lay.rank_word(p, seg.R_SLEEPING) for p in ranks]
        self._doorbell_word = [lay.rank_word(p, seg.R_DOORBELL) for p in ranks]
        self._state_word = [lay.rank_word(p, seg.R_STATE) for p in ranks]
        self._pid_word = [lay.rank_word(p, seg.R_PID) for p in ranks]
        self._out_chunks = [lay.chunk_offset(me, p, 0) for p in ranks]  # chunk 0 byte offsets
        self._in_chunks = [lay.chunk_offset(p, me, 0) for p in ranks]
        self._out_filled_word = [lay.filled_word(me, p) for p in ranks]
        self._out_drained_word = [lay.drained_word(me, p) for p in ranks]
        self._in_filled_word = [lay.filled_word(p, me) for p in ranks]
        self._in_drained_word = [lay.drained_word(p, me) for p in ranks]
        self._out_chunk_count = [0] * n
        self._in_chunk_count = [0] * n
        self._posted: list[dict[int, tuple[Handle, memoryview]]] = [{} for _ in ranks]
        self._unexpected: list[dict[int, tuple[int, int, int, Any]]] = [{} for _ in ranks]
        self._rendezvous_sends: list[dict[int, tuple[Handle, memoryview]]] = [{} for _ in ranks]
        self._send_queue: list[deque[tuple[int, int, int, int, Any, int, Handle | None]]] = [
            deque() for _ in ranks]
        self._pipe_out: list[deque[list[Any]]] = [deque() for _ in ranks]
        self._pipe_in: list[deque[list[Any]]] = [deque() for _ in ranks]
        self._busy: set[int] = set()

    def _attach(self) -> None:
        lay, me = self._layout, self.rank
        for p in self._ranks:
            for a, b in ((me, p), (p, me)):
                self._segment.prefault(lay.pair_offset(a, b), lay.pair_bytes)
        self._words[lay.rank_word(me, seg.R_PID)] = os.getpid()
        self._words[lay.rank_word(me, seg.R_STATE)] = seg.ATTACHED

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
        if self._single_copy and n >= self._single_copy_min:
            kind, aux = seg.RTS_CMA, _address(data)
        else:
            kind, aux = seg.RTS_PIPE, 0
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
        now = time.perf_counter()
        deadline = float("inf") if timeout is None else now + timeout
        if not self._oversubscribed:
            stop = min(deadline, now + max(self._spin, 2e-6))
            while time.perf_counter() < stop:
                if self._advance():
                    self._spin = SPIN_SECONDS
                    return
            self._spin *= 0.5  # a loaded machine: spinning only steals the peer's core
        stop = min(deadline, time.perf_counter() + YIELD_SECONDS)
        while time.perf_counter() < stop:
            os.sched_yield()
            if self._advance():
                return
        self._sleep_until_activity(deadline)

    def capabilities(self) -> Capabilities:
        """What this transport offers."""
        return Capabilities(name="shm", node_of_rank=(0,) * self.size,
                            single_copy=self._single_copy)

    def close(self) -> None:
        """Detach from the job (idempotent); the launcher removes the segment."""
        if self._closed:
            return
        self._closed = True
        word = self._state_word[self.rank]
        if self._words[word] == seg.ATTACHED:
            self._words[word] = seg.EXITED
        self._segment.close()

    # ---- sending ----------------------------------------------------------------------

    def _push(self, peer: int, kind: int, tag: int, fp: int, data: Any, n: int,
              aux: int) -> bool:
        """Write one message into the (me -> peer) ring; False when the ring is full."""
        words = self._words
        head = self._out_head[peer]
        if head - self._out_consumed[peer] >= self._nslots:
            consumed = words[self._out_consumed_word[peer]]
            self._out_consumed[peer] = consumed
            if head - consumed >= self._nslots:
                return False
        w = self._out_slots[peer][head & self._mask]
        if n and kind == seg.EAGER:
            p = w * 8 + seg.SLOT_HEADER
            self._buf[p: p + n] = data
        _SLOT_FIELDS.pack_into(self._buf, w * 8 + 8, tag, fp, n, kind, aux)
        words[w] = head + 1
        self._out_head[peer] = head + 1
        _FENCE.acquire()
        _FENCE.release()
        if words[self._sleeping_word[peer]]:
            self._wake(peer)
        return True

    def _send_control(self, peer: int, kind: int, tag: int, fp: int, n: int, aux: int) -> None:
        if self._send_queue[peer] or not self._push(peer, kind, tag, fp, None, n, aux):
            self._enqueue(peer, (kind, tag, fp, n, None, aux, None))

    def _enqueue(self, peer: int, item: tuple[int, int, int, int, Any, int, Handle | None]
                 ) -> None:
        self._send_queue[peer].append(item)
        self._busy.add(peer)

    def _flush_queue(self, peer: int) -> bool:
        queue = self._send_queue[peer]
        moved = False
        while queue:
            kind, tag, fp, n, data, aux, h = queue[0]
            if not self._push(peer, kind, tag, fp, data, n, aux):
                break
            queue.popleft()
            if h is not None:
                h.done = True
            moved = True
        return moved

    def _wake(self, peer: int) -> None:
        words, w = self._words, self._doorbell_word[peer]
        words[w] = (words[w] + 1) & _MASK32
        seg.futex_wake(self._base_address + w * 8)

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
                self._rendezvous_sends[src].pop(tag)[0].done = True
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

    def _match_rendezvous(self, src: int, h: Handle, out: memoryview, kind: int, tag: int,
                          fp: int, n: int, address: int) -> None:
        """A request-to-send met its receive: read it now, or queue it for the bulk area."""
        h.nbytes, h.fingerprint = n, fp
        if n > out.nbytes:  # too large: copy nothing, release the sender
            self._send_control(src, seg.FIN if kind == seg.RTS_CMA else seg.CTS, tag, 0, 0, 0)
            h.done = True
            return
        if kind == seg.RTS_CMA and self._single_copy:
            try:
                pid = int(self._words[self._pid_word[src]])
                self._reader.read(pid, address, _address(out), n)
            except TransportError:
                self._single_copy = False  # not permitted after all: fall back to the pipe
            else:
                self._send_control(src, seg.FIN, tag, 0, 0, 0)
                h.done = True
                return
        queue = self._pipe_in[src]
        queue.append([h, out, n, 0, tag])
        if len(queue) == 1:
            self._send_control(src, seg.CTS, tag, 0, 0, 1)
        self._busy.add(src)

    def _on_clear_to_send(self, peer: int, tag: int, go: int) -> None:
        h, data = self._rendezvous_sends[peer].pop(tag)
        if not go:
            h.done = True
            return
        self._pipe_out[peer].append([h, data, 0])
        self._busy.add(peer)

    # ---- the bulk pipeline ------------------------------------------------------------

    def _advance_peer(self, peer: int) -> bool:
        moved = False
        if self._send_queue[peer]:
            moved |= self._flush_queue(peer)
        if self._pipe_out[peer]:
            moved |= self._stream_out(peer)
        if self._pipe_in[peer]:
            moved |= self._stream_in(peer)
        if not (self._send_queue[peer] or self._pipe_out[peer] or self._pipe_in[peer]):
            self._busy.discard(peer)
        return moved

    def _stream_out(self, peer: int) -> bool:
        """Copy as many chunks of the current outgoing transfer as there is room for."""
        words, buf, chunk = self._words, self._buf, self._chunk_bytes
        queue = self._pipe_out[peer]
        count = self._out_chunk_count[peer]
        drained = words[self._out_drained_word[peer]]
        moved = False
        while queue and count - drained < self._nchunks:
            transfer = queue[0]
            h, data, offset = transfer
            k = min(chunk, h.nbytes - offset)
            p = self._out_chunks[peer] + (count % self._nchunks) * chunk
            buf[p: p + k] = data[offset: offset + k]
            count += 1
            words[self._out_filled_word[peer]] = count
            transfer[2] = offset + k
            if offset + k == h.nbytes:
                h.done = True
                queue.popleft()
            moved = True
            self._notify(peer)
            if count - drained >= self._nchunks:
                drained = words[self._out_drained_word[peer]]
        self._out_chunk_count[peer] = count
        return moved

    def _stream_in(self, src: int) -> bool:
        """Copy out every chunk of the current incoming transfer that has arrived."""
        words, buf, chunk = self._words, self._buf, self._chunk_bytes
        queue = self._pipe_in[src]
        count = self._in_chunk_count[src]
        moved = False
        while queue and words[self._in_filled_word[src]] > count:
            transfer = queue[0]
            h, out, n, offset, _ = transfer
            k = min(chunk, n - offset)
            p = self._in_chunks[src] + (count % self._nchunks) * chunk
            out[offset: offset + k] = buf[p: p + k]
            count += 1
            words[self._in_drained_word[src]] = count
            transfer[3] = offset + k
            moved = True
            if offset + k == n:
                h.done = True
                queue.popleft()
                if queue:
                    self._send_control(src, seg.CTS, queue[0][4], 0, 0, 1)
            self._notify(src)
        self._in_chunk_count[src] = count
        return moved

    def _notify(self, peer: int) -> None:
        _FENCE.acquire()
        _FENCE.release()
        if self._words[self._sleeping_word[peer]]:
            self._wake(peer)

    # ---- sleeping and failures --------------------------------------------------------

    def _sleep_until_activity(self, deadline: float) -> None:
        words, me = self._words, self.rank
        sleeping, doorbell = self._sleeping_word[me], self._doorbell_word[me]
        address = self._base_address + doorbell * 8
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return
            self._check_exited_peers()
            ring = words[doorbell]
            words[sleeping] = 1
            _FENCE.acquire()
            _FENCE.release()
            try:
                if self._advance():
                    return
                seg.futex_wait(address, ring, min(remaining, SLEEP_SLICE))
            finally:
                words[sleeping] = 0
            if self._advance():
                return

    def _pending_peers(self) -> set[int]:
        peers = {p for p in self._ranks
                 if self._posted[p] or self._rendezvous_sends[p] or self._pipe_in[p]
                 or self._pipe_out[p]}
        return peers | self._busy

    def _raise_if_pending(self, failed: int) -> None:
        if self._pending_peers():
            raise PeerFailed(failed, "the process died; the job cannot continue")

    def _check_exited_peers(self) -> None:
        for peer in self._pending_peers():
            if peer != self.rank and self._words[self._state_word[peer]] == seg.EXITED:
                self._advance()  # drain what it sent before leaving
                if peer in self._pending_peers():
                    raise PeerFailed(peer, "it exited while an operation with it was pending")
