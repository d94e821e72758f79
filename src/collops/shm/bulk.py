"""Large messages between ranks of the job segment: the rendezvous, the single copy
(whole or split between both ends) and the pipeline through the bulk chunks.
"""

from __future__ import annotations

import time

from ..errors import PeerFailed, TransportError
from ..transport.base import Handle
from . import kernel
from . import segment as seg
from .endpoint import (
    _FENCE,
    _GO_PIPE,
    _GO_REFUSED,
    _GO_SHARED,
    _MASK32,
    _SPLIT,
    _STOP,
    FAILURE_GRACE,
    PIECE_MIN,
    ShmEndpoint,
    _address,
)


class _Outgoing:
    """A message this rank streams into a pair's bulk area."""

    __slots__ = ("h", "data", "piece", "shared", "offset", "stopped", "address")

    def __init__(self, h: Handle, data: memoryview, piece: int, shared: bool) -> None:
        self.h, self.data, self.piece, self.shared = h, data, piece, shared
        self.offset = 0  # where the next chunk starts
        self.stopped = False  # (two-ended) STOP sent
        self.address = 0  # of ``data``, once a chunk is copied


class _Incoming:
    """A message this rank receives through a pair's bulk area (and, when two-ended, by
    reading the sender's buffer from the back)."""

    __slots__ = ("h", "out", "n", "tag", "piece", "remote", "shared", "front", "back", "pid",
                 "local", "complete", "stop", "pull", "due")

    def __init__(self, h: Handle, out: memoryview, n: int, tag: int, piece: int,
                 remote: int, pull: int) -> None:
        self.h, self.n, self.tag, self.piece = h, n, tag, piece
        self.out: memoryview | None = out
        self.remote = remote  # the sender's buffer address, 0 when it may not be read
        self.shared = remote != 0  # two-ended: FIN and STOP close it
        self.front = 0  # where the next chunk starts
        self.back = n  # bytes from here on were read from the back
        self.pid = self.local = 0
        self.complete = False
        self.stop: int | None = None  # (two-ended) the sender's chunk count at its STOP
        self.pull = pull  # bytes of the next read from the back
        self.due = 0.0  # when to read from the back unless a chunk comes first


class _SplitIn:
    """A single-copy message this rank reads piece by piece from the front of the sender's
    buffer while the sender may write pieces from the back (see `ShmTransport._split_read`)."""

    __slots__ = ("h", "n", "tag", "piece", "pieces", "gen", "pid", "remote", "local", "front",
                 "error", "failed_at")

    def __init__(self, h: Handle, n: int, tag: int, gen: int, pid: int, remote: int,
                 local: int, piece: int) -> None:
        self.h, self.n, self.tag, self.gen = h, n, tag, gen
        self.piece = piece
        self.pieces = -(-n // self.piece)
        self.pid, self.remote, self.local = pid, remote, local
        self.front = 0  # pieces [0, front) read by this rank
        self.error: TransportError | None = None  # a read failed (the sender died?) ...
        self.failed_at = 0.0  # ... at this time


class _SplitOut:
    """A single-copy message whose receiver invited this rank to write pieces from the back."""

    __slots__ = ("h", "n", "piece", "pieces", "gen", "pid", "remote", "local", "bottom",
                 "stopped")

    def __init__(self, h: Handle, n: int, piece: int, gen: int, pid: int, remote: int,
                 local: int) -> None:
        self.h, self.n, self.piece, self.gen = h, n, piece, gen
        self.pieces = -(-n // piece)
        self.pid, self.remote, self.local = pid, remote, local
        self.bottom = self.pieces  # pieces [bottom, pieces) written by this rank
        self.stopped = False  # met the receiver's front: nothing more to write


def split_piece(n: int, smallest: int, largest: int) -> int:
    """Bytes per piece of a split transfer of ``n`` bytes: an eighth, in whole pages, within
    ``smallest`` and ``largest`` (the receiver chooses; its SPLIT tells the sender)."""
    share = -(-n // (8 * 4096)) * 4096
    return min(largest, max(smallest, share))


class BulkTransfers(ShmEndpoint):
    """The rendezvous and bulk transfers of a rank's messages (a part of `ShmTransport`)."""

    def _match_rendezvous(self, src: int, h: Handle, out: memoryview, kind: int, tag: int,
                          fp: int, n: int, address: int) -> None:
        """A request-to-send met its receive: read it now, or queue it for the bulk area."""
        h.nbytes, h.fingerprint = n, fp
        if n > out.nbytes:  # too large: copy nothing, release the sender
            self._send_control(src, seg.FIN if kind == seg.RTS_CMA else seg.CTS, tag, 0, 0,
                               _GO_REFUSED)
            h.done = True
            return
        readable = address != 0 and self._single_copy
        if (readable and kind == seg.RTS_CMA and not self._oversubscribed
                and kernel.aliased(_address(out), address, n)):
            # the kernel's copy would crawl (1 MiB in 450 µs instead of 110): through the
            # bulk area instead, whose copies go around it (`kernel.copy_memory`)
            readable = False
        if (readable and kind == seg.RTS_CMA and n >= self._split_min
                and self._split_in[src] is None):
            self._start_split(src, h, out, tag, n, address)
            return
        if readable and kind == seg.RTS_CMA:
            try:
                pid = int(self._words[self._pid_word[src]])
                self._reader.read(pid, address, _address(out), n)
            except TransportError:
                self._single_copy = readable = False  # not permitted after all: the pipe
            else:
                self._send_control(src, seg.FIN, tag, 0, 0, 0)
                h.done = True
                return
        # two-ended unless this rank sends to ``src`` too: in an exchange both ranks copy all
        # the time anyway, and a reader at the back would only add a FIN to wait for
        shared = (readable and kind == seg.RTS_PIPE
                  and not (self._rendezvous_sends[src] or self._pipe_out[src]))
        transfer = _Incoming(h, out, n, tag, self._piece(n), address if shared else 0,
                             self._pull_bytes)
        queue = self._pipe_in[src]
        queue.append(transfer)
        if len(queue) == 1:
            self._grant(src, transfer)
        self._busy.add(src)

    def _grant(self, src: int, transfer: _Incoming) -> None:
        """Give the bulk area of (src -> this rank) to ``transfer``: clear-to-send, after
        publishing where a two-ended transfer's sender must stop (nowhere yet: at its end)."""
        if transfer.shared:
            self._words[self._in_back_word[src]] = transfer.n
            transfer.due = time.perf_counter() + self._pull_after
            self._send_control(src, seg.CTS, transfer.tag, 0, 0, _GO_SHARED)
        else:
            self._send_control(src, seg.CTS, transfer.tag, 0, 0, _GO_PIPE)

    def _on_clear_to_send(self, peer: int, tag: int, go: int) -> None:
        h, data = self._rendezvous_sends[peer].pop(tag)
        if not go:
            h.done = True
            return
        transfer = _Outgoing(h, data, self._piece(h.nbytes), go == _GO_SHARED)
        if transfer.shared:
            self._streams[peer][tag] = transfer
        self._pipe_out[peer].append(transfer)
        self._busy.add(peer)

    def _on_finish(self, src: int, tag: int) -> None:
        """FIN: the receiver has the whole message and reads this rank's buffer no more."""
        entry = self._rendezvous_sends[src].pop(tag, None)
        if entry is not None:  # single copy
            if self._split_out[src]:
                self._split_out[src].pop(tag, None)
            entry[0].done = True
            return
        transfer = self._streams[src].pop(tag)  # a two-ended transfer
        transfer.h.done = True
        if not transfer.stopped:
            self._stop_stream(src, transfer, self._out_chunk_count[src])

    def _stop_stream(self, peer: int, transfer: _Outgoing, count: int) -> None:
        """Stop streaming a two-ended transfer; STOP tells the receiver how many chunks it
        wrote in all (``count``), so the receiver can pass over those it no longer needs."""
        transfer.stopped = True
        self._pipe_out[peer].remove(transfer)
        self._send_control(peer, _STOP, transfer.h.tag, 0, 0, count)

    def _on_stop(self, src: int, tag: int, count: int) -> None:
        transfer = self._pipe_in[src][0]
        assert transfer.tag == tag, "STOP for a transfer that does not hold the bulk area"
        transfer.stop = count
        self._busy.add(src)

    # ---- split single copy ------------------------------------------------------------
    #
    # The receiver reads pieces 0, 1, 2, … of the message from the sender's buffer; the
    # sender writes pieces k−1, k−2, … into the receive buffer. Before copying a piece each
    # side publishes its claim — the receiver "pieces below c are mine" (its claim word),
    # the sender "pieces from b on are mine" (its claim word) — then fences and loads the
    # other's claim, and copies only what the other has not claimed (the receiver below
    # min(c, b), the sender at max(b, c) and above, otherwise it withdraws its claim and
    # stops). Of two such store-fence-load sequences at least one sees the other's store, so
    # no piece is ever copied by both. The sender publishes the piece its writes are complete
    # down to only after the write; the receiver completes when its front reaches that piece,
    # so no write into the receive buffer can still be in flight once the receive is done,
    # and answers FIN, which frees the send. Every word carries the transfer's generation in
    # its upper half: a word of another generation is read as "nothing claimed or written".

    def _start_split(self, src: int, h: Handle, out: memoryview, tag: int, n: int,
                     address: int) -> None:
        gen = self._split_gen[src] = (self._split_gen[src] + 1) & _MASK32
        local = _address(out)
        transfer = _SplitIn(h, n, tag, gen, int(self._words[self._pid_word[src]]), address,
                            local, split_piece(n, *self._split_pieces))
        self._words[self._split_in_claim[src]] = gen << 32  # claims nothing yet
        self._send_control(src, _SPLIT, tag, gen, transfer.piece, local)
        self._split_in[src] = transfer
        self._split_reading += 1
        self._busy.add(src)
        self._split_read(src)

    def _split_read(self, src: int) -> bool:
        """Read the next piece of the split transfer from ``src`` (unless the sender claimed
        it); complete the receive once every piece is read or written."""
        transfer = self._split_in[src]
        assert transfer is not None
        words, gen = self._words, transfer.gen
        sender_word = self._split_in_sender[src]
        front, pieces = transfer.front, transfer.pieces
        if transfer.error is not None:
            self._split_failed(src, transfer)
            return False
        moved = False
        value = words[sender_word]
        if front < (value & _MASK32 if value >> 32 == gen else pieces):
            want = front + 1
            claim_word = self._split_in_claim[src]
            words[claim_word] = (gen << 32) | want
            _FENCE.acquire()
            _FENCE.release()
            value = words[sender_word]
            top = min(want, value & _MASK32 if value >> 32 == gen else pieces)
            if top > front:
                lo, hi = front * transfer.piece, min(top * transfer.piece, transfer.n)
                try:
                    self._reader.read(transfer.pid, transfer.remote + lo, transfer.local + lo,
                                      hi - lo)
                except TransportError as exc:
                    words[claim_word] = (gen << 32) | front
                    transfer.error, transfer.failed_at = exc, time.perf_counter()
                    self._split_failed(src, transfer)
                    return False
                transfer.front = front = top
                moved = True
            if top < want:  # the sender claimed it first: withdraw
                words[claim_word] = (gen << 32) | top
        value = words[sender_word + 1]
        if front >= (value & _MASK32 if value >> 32 == gen else pieces):
            self._split_in[src] = None
            self._split_reading -= 1
            transfer.h.done = True
            self._send_control(src, seg.FIN, transfer.tag, 0, 0, 0)
            moved = True
        return moved

    def _split_failed(self, src: int, transfer: _SplitIn) -> None:
        """A read from ``src`` failed: most likely it died, which the launcher is about to
        mark (then this rank raises `PeerFailed`); if nothing is marked in a while, the
        read's own error."""
        state = self._words[self._state_word[src]]
        if self._words[seg.H_FAILED] or state in (seg.EXITED, seg.FAILED):
            raise PeerFailed(src, "it died during a single-copy transfer") from transfer.error
        if time.perf_counter() - transfer.failed_at > FAILURE_GRACE:
            assert transfer.error is not None
            raise transfer.error

    def _on_split(self, peer: int, tag: int, gen: int, piece: int, address: int) -> None:
        """The receiver of a single-copy message invites this rank to write from the back."""
        entry = self._rendezvous_sends[peer].get(tag)
        if entry is None or not piece:
            return
        h, data = entry
        transfer = _SplitOut(h, h.nbytes, piece, gen, int(self._words[self._pid_word[peer]]),
                             address, _address(data))
        tagged = (gen << 32) | transfer.pieces
        w = self._split_out_sender[peer]
        self._words[w] = tagged
        self._words[w + 1] = tagged
        self._split_out[peer][tag] = transfer
        self._busy.add(peer)

    def _split_write(self, peer: int) -> bool:
        """Write the next piece (from the back) of a split transfer to ``peer``."""
        for transfer in self._split_out[peer].values():
            if transfer.stopped:
                continue
            words, gen = self._words, transfer.gen
            claim_word = self._split_out_sender[peer]
            piece = transfer.bottom - 1
            if piece < 0:
                transfer.stopped = True
                continue
            words[claim_word] = (gen << 32) | piece
            _FENCE.acquire()
            _FENCE.release()
            value = words[self._split_out_claim[peer]]
            if value >> 32 != gen or value & _MASK32 > piece:  # met the receiver (or it is done)
                words[claim_word] = (gen << 32) | transfer.bottom
                transfer.stopped = True
                continue
            lo = piece * transfer.piece
            hi = min(lo + transfer.piece, transfer.n)
            try:
                self._reader.write(transfer.pid, transfer.remote + lo, transfer.local + lo,
                                   hi - lo)
            except TransportError:  # the receiver reads the rest itself (or has died)
                words[claim_word] = (gen << 32) | transfer.bottom
                transfer.stopped = True
                continue
            transfer.bottom = piece
            words[claim_word + 1] = (gen << 32) | piece
            self._notify(peer)
            return True
        return False

    # ---- the bulk pipeline ------------------------------------------------------------

    def _advance_peer(self, peer: int) -> bool:
        moved = False
        if self._send_queue[peer]:
            moved |= self._flush_queue(peer)
        if self._pipe_out[peer]:
            moved |= self._stream_out(peer)
        if self._pipe_in[peer]:
            moved |= self._stream_in(peer)
        if self._split_in[peer] is not None:
            moved |= self._split_read(peer)
        if self._split_out[peer] and not self._split_reading:
            moved |= self._split_write(peer)  # helps only once its own reads are done
        if not (self._send_queue[peer] or self._pipe_out[peer] or self._pipe_in[peer]
                or self._split_in[peer] is not None or self._split_out[peer]):
            self._busy.discard(peer)
        return moved

    def _piece(self, n: int) -> int:
        """Bytes per chunk of an ``n``-byte transfer: an equal share of the chunk slots (so
        copy-in and copy-out overlap even when the message would fit one slot), at least
        `PIECE_MIN` and at most a slot. Both sides compute it from ``n`` alone."""
        share = -(-n // (self._nchunks * 4096)) * 4096
        return min(self._chunk_bytes, max(PIECE_MIN, share))

    def _stream_out(self, peer: int) -> bool:
        """Copy as many chunks of the current outgoing transfer as there is room for (of a
        two-ended transfer, only those below the receiver's published back boundary)."""
        words, slot, nchunks = self._words, self._chunk_bytes, self._nchunks
        queue = self._pipe_out[peer]
        count = self._out_chunk_count[peer]
        base, filled_word = self._out_chunks[peer], self._out_filled_word[peer]
        drained_word = self._out_drained_word[peer]
        drained = words[drained_word]
        moved = False
        while queue:
            transfer = queue[0]
            n, offset = transfer.h.nbytes, transfer.offset
            limit = min(n, words[drained_word + 1]) if transfer.shared else n
            if offset >= limit:  # a two-ended transfer whose rest the receiver reads itself
                self._stop_stream(peer, transfer, count)
                moved = True
                continue
            if count - drained >= nchunks:
                drained = words[drained_word]
                if count - drained >= nchunks:
                    break
            end = min(offset + transfer.piece, limit)
            p = base + (count % nchunks) * slot
            if not transfer.address:
                transfer.address = _address(transfer.data)
            kernel.copy_memory(self._base_address + p, transfer.address + offset, end - offset)
            count += 1
            words[filled_word] = count
            transfer.offset = min(offset + transfer.piece, n)
            if transfer.offset == n and not transfer.shared:
                transfer.h.done = True
                queue.popleft()
            moved = True
            self._notify(peer)
        self._out_chunk_count[peer] = count
        return moved

    def _stream_in(self, src: int) -> bool:
        """Copy out the chunks of the current incoming transfer that had arrived on entry
        (no more, so that a rank both sending and receiving alternates between the two); of
        a two-ended transfer with no chunk waiting, read a piece from the back instead."""
        words, slot, nchunks = self._words, self._chunk_bytes, self._nchunks
        transfer = self._pipe_in[src][0]
        count = self._in_chunk_count[src]
        drained_word = self._in_drained_word[src]
        filled = words[self._in_filled_word[src]]
        moved = count < filled
        while count < filled:
            front = transfer.front
            if front < transfer.back:
                end = min(front + transfer.piece, transfer.back)
                p = self._in_chunks[src] + (count % nchunks) * slot
                if not transfer.local:
                    assert transfer.out is not None  # (dropped once complete)
                    transfer.local = _address(transfer.out)
                # the slots start on a page, numpy's arrays 16 bytes into one: around aliasing
                kernel.copy_memory(transfer.local + front, self._base_address + p, end - front)
            transfer.front = min(front + transfer.piece, transfer.n)
            count += 1
            words[drained_word] = count
            self._notify(src)
            if transfer.front >= transfer.back and not transfer.complete:
                self._complete(src, transfer)
        if moved:
            if transfer.remote:
                transfer.pull = self._pull_bytes
                transfer.due = time.perf_counter() + self._pull_after
        elif (transfer.remote and not transfer.complete and time.perf_counter() >= transfer.due
              and not self._sending()):
            moved = self._pull(src, transfer)
        if transfer.complete and (not transfer.shared or transfer.stop is not None):
            if transfer.stop is not None and transfer.stop > count:
                count = transfer.stop  # chunks of bytes already read from the back
                words[drained_word] = count
                self._notify(src)
            queue = self._pipe_in[src]
            queue.popleft()
            if queue:
                self._grant(src, queue[0])
            moved = True
        self._in_chunk_count[src] = count
        return moved

    def _sending(self) -> bool:
        """Whether this rank streams a transfer out (then it helps no receiver by reading)."""
        return any(self._pipe_out[p] for p in self._busy)

    def _pull(self, src: int, transfer: _Incoming) -> bool:
        """Read the next piece of a two-ended transfer from the back of the sender's buffer,
        then publish the lower boundary (the sender may copy some of it too: harmless)."""
        back = transfer.back
        lower = max(transfer.front, back - transfer.pull)
        try:
            if not transfer.pid:
                transfer.pid = int(self._words[self._pid_word[src]])
                assert transfer.out is not None  # (dropped once complete)
                transfer.local = _address(transfer.out)
            self._reader.read(transfer.pid, transfer.remote + lower, transfer.local + lower,
                              back - lower)
        except TransportError:
            self._single_copy = False  # not permitted after all: the sender streams it all
            transfer.remote = 0
            return False
        transfer.back = lower
        transfer.pull = min(2 * transfer.pull, self._pull_max)
        self._words[self._in_back_word[src]] = lower
        if transfer.front >= lower:
            self._complete(src, transfer)
        return True

    def _complete(self, src: int, transfer: _Incoming) -> None:
        transfer.complete = True
        transfer.h.done = True
        # nothing more is copied in: a two-ended transfer waits in the queue for its STOP
        # without the receive buffer (the program may drop it now)
        transfer.out = None
        if transfer.shared:
            self._send_control(src, seg.FIN, transfer.tag, 0, 0, 0)

    def _notify(self, peer: int) -> None:
        _FENCE.acquire()
        _FENCE.release()
        if self._words[self._sleeping_word[peer]]:
            self._wake(peer)

