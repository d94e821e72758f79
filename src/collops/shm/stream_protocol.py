"""The stream protocol: the words of a ring's chunk headers and of a call's state, and
the protocol in Python (`PyPlan`), chunk for chunk what ``_stream.c`` runs.
"""

from __future__ import annotations

import ctypes
import errno
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import ops
from ..errors import PeerFailed, TransportError
from . import kernel
from . import segment as seg
from .stream_area import StreamArea

NAME = "shm_stream"

#: header words of a chunk slot (one 64-byte line each); SOURCE: 0 for bytes in the slot,
#: else their address in the writer's memory (a reference chunk)
H_SEQ, H_CALL, H_FP, H_MASK, H_OFFSET, H_NBYTES, H_SOURCE = range(7)
#: results of `advance`, with MOVED or-ed in when anything was written, read or copied
DONE, STUCK, FOREIGN, FAILED = range(4)
MOVED = 4
#: state words of a call on one rank: chunks written, own-block bytes copied, the first
#: chunk of another call met (writer, call word, fingerprint), the reader a write or a
#: reference waits for, the writer whose reference could not be copied and the errno, where a
#: folding rank's own contribution is when not in its send buffer (0: there); then the bytes
#: received from each writer read, then per world rank the reference chunk + 1 it must drain
#: past (0: none)
S_WRITTEN, S_SELF, S_FOREIGN_WRITER, S_FOREIGN_CALL, S_FOREIGN_FP, S_BLOCKED_ON, \
    S_FAILED_WRITER, S_ERRNO, S_OWN, S_RECEIVED = range(10)
#: columns of a write row (one chunk) and of a writer row (one ring read)
W_SRC, W_NBYTES, W_MASK, W_OFFSET, W_REFERENCE = range(5)
#: where a write row's bytes go (W_REFERENCE): into the ring, or published by reference where
#: they are, in the send buffer or — once the own block is copied — in the receive buffer.
#: IN_OWN, an allgather's own block: from the receive buffer when the reader's destination
#: would be 4 KiB-aliased with the send buffer, else from the buffer the selection table's
#: ``protocols.shm_stream.own_block`` names (the plan's ``own_from``). W_SRC is the send
#: buffer's offset (`own_block_source`, `reference_of` say where).
IN_RING, IN_SEND, IN_RECV, IN_OWN = range(4)
#: the values of ``protocols.shm_stream.own_block``
OWN_BLOCK_SOURCES = {"send": IN_SEND, "recv": IN_RECV}
R_RANK, R_FILLED, R_HEADERS, R_RING, R_DRAINED, R_DST, R_EXPECT, R_PID = range(8)


def own_block_source(own: tuple[int, int, int], src: int, nbytes: int, send: int,
                     recv: int, own_from: int = IN_SEND) -> int:
    """Where an allgather publishes the ``nbytes`` at ``src`` of its own block (IN_OWN):
    ``own_from`` (IN_SEND or IN_RECV), or IN_RECV when a reader whose buffers sit as this
    rank's would copy them aliased."""
    to = recv + own[1] + src - own[0]
    return IN_RECV if kernel.aliased(to, send + src, nbytes) else own_from


# -- the protocol in Python (when the extension is missing or COLLOPS_COMPILED=0) ---------------
class PyPlan:
    """`collops.shm._stream.Plan` in Python: the same protocol, chunk for chunk."""

    def __init__(self, area: StreamArea, *, segment: Any, cursors: np.ndarray, me: int,
                 nchunks: int, chunk_bytes: int, my_filled: int, my_headers: int,
                 my_ring: int, writes: np.ndarray, drained_of_me: np.ndarray,
                 writers: np.ndarray, self_copy: tuple[int, int, int],
                 sleeper_words: Sequence[int], sleeper_ranks: Sequence[int],
                 wake: Callable[[int], None], own_from: int = IN_SEND,
                 roll_words: Sequence[int] = (), roll_slots: int = 0,
                 fold: tuple[int, int] | None = None, fold_order: Sequence[int] = ()) -> None:
        # ``roll_words``/``roll_slots``: the roll call's words the compiled loop spins for
        # once the data is done; here `RollCall` alone waits for them (no second copy)
        self.words, self.cursor, self.me = area.words, cursors, me
        self.size = len(cursors) - 1
        self.nchunks, self.chunk_bytes = nchunks, chunk_bytes
        self.my_filled, self.my_headers, self.my_ring = my_filled, my_headers // 8, my_ring
        self.write = writes.tolist()
        self.drained = drained_of_me.tolist()
        self.writer = writers.tolist()
        self.own, self.own_from = self_copy, own_from
        self.base = area.transport.segment_address
        self.transport, self.group = area.transport, list(sleeper_ranks) + [me]
        #: where in a state array the words of the references to drain begin
        self.must_drain = S_RECEIVED + len(self.writer)
        #: a rank that folds as it reads (see ``_stream.c``): its operator and dtype, the
        #: writer row at each position of the fold (-1: the own block), each row's position
        self.fold = None if fold is None else kernel_op(*fold)
        self.position_row = list(fold_order)
        self.row_position = {row: j for j, row in enumerate(self.position_row) if row >= 0}
        self.own_position = self.position_row.index(-1) if fold is not None else 0

    @property
    def own_source(self) -> int:
        """Where an allgather's own block is published from unless that copy would be
        aliased (IN_SEND or IN_RECV: ``own_from``)."""
        return self.own_from

    def wake(self) -> None:
        """A full fence, then wake the peers asleep (after a store they may wait for)."""
        self.transport.wake_sleepers(self.group)

    def _slot_free(self, c: int, state: np.ndarray) -> bool:
        if c < self.nchunks:
            return True
        words = self.words
        mask = words[self.my_headers + 8 * (c % self.nchunks) + H_MASK]
        need = c - self.nchunks + 1
        for r in _bits(mask):
            if words[self.drained[r]] < need:
                state[S_BLOCKED_ON] = r
                return False
        return True

    def _reference_of(self, row: np.ndarray, send: int, recv: int) -> int:
        """Where write ``row`` is published from in this call (see IN_OWN)."""
        kind = int(row[W_REFERENCE])
        if kind != IN_OWN:
            return kind
        return own_block_source(self.own, int(row[W_SRC]), int(row[W_NBYTES]), send, recv,
                                self.own_from)

    def _write_one(self, state: np.ndarray, send: int, recv: int, word: int,
                   fingerprint: int) -> int:
        i = int(state[S_WRITTEN])
        if i >= len(self.write):
            return 0
        reference = self._reference_of(self.write[i], send, recv)
        if reference == IN_RECV and state[S_SELF] < self.own[2]:
            return 0
        c = int(self.cursor[self.size])
        if not self._slot_free(c, state):
            return 0
        state[S_BLOCKED_ON] = -1
        src, n, mask, offset, kind = self.write[i]
        if reference == IN_RECV and kind == IN_OWN:
            src += self.own[1] - self.own[0]
        slot, words = c % self.nchunks, self.words
        h = self.my_headers + 8 * slot
        words[h + H_SEQ] = 0
        words[h + H_CALL], words[h + H_FP], words[h + H_MASK] = word, fingerprint, mask
        words[h + H_OFFSET], words[h + H_NBYTES] = offset, n
        if reference:
            words[h + H_SOURCE] = (recv if reference == IN_RECV else send) + src
            for r in _bits(mask):
                state[self.must_drain + r] = c + 1
        else:
            words[h + H_SOURCE] = 0
            ctypes.memmove(self.base + self.my_ring + slot * self.chunk_bytes, send + src, n)
        words[h + H_SEQ] = c + 1
        words[self.my_filled] = c + 1
        self.cursor[self.size] = c + 1
        state[S_WRITTEN] = i + 1
        return 1

    def _read_from(self, k: int, state: np.ndarray, send: int, recv: int, word: int,
                   limit: int) -> int:
        rank, filled_word, headers, ring, drained, dst, expect, _ = self.writer[k]
        received = int(state[S_RECEIVED + k])
        if received >= expect:
            return 0
        words, nchunks = self.words, self.nchunks
        cur = start = int(self.cursor[rank])
        filled = words[filled_word]
        cur = max(cur, filled - nchunks)
        bit, moved, foreign, failed = 1 << self.me, 0, False, False
        while cur < filled and moved < limit and received < expect:
            slot = cur % nchunks
            h = headers // 8 + 8 * slot
            seq = words[h + H_SEQ]
            if seq != cur + 1:
                cur += 1
                continue
            mask, call, fingerprint = words[h + H_MASK], words[h + H_CALL], words[h + H_FP]
            offset, n, source = words[h + H_OFFSET], words[h + H_NBYTES], words[h + H_SOURCE]
            if words[h + H_SEQ] != seq or not mask & bit:
                cur += 1
                continue
            if call != word:
                state[S_FOREIGN_WRITER], foreign = rank, True
                state[S_FOREIGN_CALL], state[S_FOREIGN_FP] = _signed(call), _signed(fingerprint)
                break
            if offset > expect or n > expect - received or n > expect - offset or (
                    not source and n > self.chunk_bytes) or (self.fold is not None and (
                    source or offset != received or n % self.fold[1].itemsize)):
                # outside the block, or out of a folding rank's order: never copied
                state[S_FAILED_WRITER], state[S_ERRNO], failed = rank, errno.EMSGSIZE, True
                break
            if self.fold is not None:
                state[S_RECEIVED + k] = received
                if not self._may_fold(state, k, offset + n):
                    break  # its turn comes once the position before it is folded this far
                self._fold_chunk(k, state, send, recv, offset,
                                 self.base + ring + slot * self.chunk_bytes, n)
            elif source:
                try:
                    self.transport.read_from(rank, source, recv + dst + offset, n)
                except TransportError as e:  # as the compiled loop reports it
                    state[S_FAILED_WRITER], failed = rank, True
                    state[S_ERRNO] = errno.ESRCH if isinstance(e, PeerFailed) else 0
                    break
            else:
                ctypes.memmove(recv + dst + offset, self.base + ring + slot * self.chunk_bytes,
                               n)
            received += n
            cur += 1
            moved += 1
        state[S_RECEIVED + k] = received
        if cur != start:
            self.cursor[rank] = cur
            words[drained] = cur
        if failed:
            return -2
        return -1 if foreign and not moved else moved + (cur != start)

    # -- a rank that folds as it reads: ``_stream.c``'s essay above ``folded`` ------------------
    def _folded(self, state: np.ndarray, j: int) -> int:
        row = self.position_row[j]
        return int(state[S_SELF] if row < 0 else state[S_RECEIVED + row])

    def _may_fold(self, state: np.ndarray, k: int, end: int) -> bool:
        j = self.row_position[k]
        return j == 0 or (j == 1 and self.own_position == 0) or self._folded(state, j - 1) >= end

    def _own_of(self, state: np.ndarray, send: int) -> int:
        return int(state[S_OWN]) or send + self.own[0]

    def _fold_chunk(self, k: int, state: np.ndarray, send: int, recv: int, offset: int,
                    chunk: int, n: int) -> None:
        assert self.fold is not None
        op, dtype = self.fold
        out_at, own_at = recv + self.own[1] + offset, self._own_of(state, send) + offset
        out = _items(out_at, n, dtype)
        j, q = self.row_position[k], self.own_position
        if j == 0 and q == 1:
            op.combine_into(out, _items(chunk, n, dtype), _items(own_at, n, dtype))
        elif j == 0:
            ctypes.memmove(out_at, chunk, n)
            return
        elif j == 1 and q == 0:
            op.combine_into(out, out if own_at == out_at else _items(own_at, n, dtype),
                            _items(chunk, n, dtype))
        else:
            op.combine_into(out, out, _items(chunk, n, dtype))
            return
        state[S_SELF] = max(int(state[S_SELF]), offset + n)

    def _fold_own_some(self, state: np.ndarray, send: int, recv: int) -> bool:
        done, q = int(state[S_SELF]), self.own_position
        if q < 2:
            return False
        limit = self._folded(state, q - 1)
        if limit <= done:
            return False
        assert self.fold is not None
        op, dtype = self.fold
        out = _items(recv + self.own[1] + done, limit - done, dtype)
        op.combine_into(out, out, _items(self._own_of(state, send) + done, limit - done, dtype))
        state[S_SELF] = limit
        return True

    def _self_copy_some(self, state: np.ndarray, send: int, recv: int) -> bool:
        src, dst, n = self.own
        done = int(state[S_SELF])
        if done >= n:
            return False
        piece = min(n - done, self.chunk_bytes)
        if recv + dst != send + src:
            ctypes.memmove(recv + dst + done, send + src + done, piece)
        state[S_SELF] = done + piece
        return True

    def _moved_all(self, state: np.ndarray) -> bool:
        if state[S_WRITTEN] < len(self.write) or state[S_SELF] < self.own[2]:
            return False
        return all(state[S_RECEIVED + k] >= row[R_EXPECT] for k, row in enumerate(self.writer))

    def _references_drained(self, state: np.ndarray) -> bool:
        words, base = self.words, self.must_drain
        for r in range(self.size):
            need = state[base + r]
            if need and words[self.drained[r]] < need:
                state[S_BLOCKED_ON] = r
                return False
        state[S_BLOCKED_ON] = -1
        return True

    def _finished(self, state: np.ndarray) -> bool:
        return self._moved_all(state) and self._references_drained(state)

    def advance(self, state: np.ndarray, send: int, recv: int, word: int, fingerprint: int,
                may_write: bool, spin: float) -> int:
        """Everything that can move now (waiting at most ``spin`` s): DONE, STUCK or FOREIGN,
        with MOVED or-ed in when anything moved."""
        state[S_FOREIGN_WRITER] = -1
        status, touched, copied = STUCK, False, False
        written = int(state[S_WRITTEN])
        if may_write and written < len(self.write) and \
                self._reference_of(self.write[written], send, recv) == IN_RECV:
            while self._self_copy_some(state, send, recv):  # the own block first
                copied = True
        while True:
            moved, foreign = 0, False
            if may_write:
                moved += self._write_one(state, send, recv, word, fingerprint)
            for k in range(len(self.writer)):
                got = self._read_from(k, state, send, recv, word, 2)
                if got == -2:
                    return FAILED | (MOVED if touched or copied else 0)
                if got < 0:
                    foreign = True
                else:
                    moved += got
            if moved and not touched:
                touched = True
                self.transport.wake_sleepers(self.group)
            if not moved and (self._fold_own_some(state, send, recv) if self.fold is not None
                              else self._self_copy_some(state, send, recv)):
                copied = True
                continue
            if self._finished(state):
                status = DONE
                break
            if moved:
                continue
            if foreign:
                status = FOREIGN
                break
            if not self._wait(state, send, recv, word, fingerprint, may_write, spin):
                break
        if touched:
            self.transport.wake_sleepers(self.group)
        return status | (MOVED if touched or copied else 0)

    def _wait(self, state: np.ndarray, send: int, recv: int, word: int, fingerprint: int,
              may_write: bool, spin: float) -> bool:
        """Wait at most ``spin`` s, through the one wait (`waiting.Ladder`), until `advance`
        can move: whether it can."""
        if spin <= 0:
            return False
        t = self.transport

        def ready() -> bool:
            return self.ready(state, send, recv, word, fingerprint, may_write)

        return t.ladder.wait(ready, lambda timeout: t.sleep_until(ready, timeout),
                             deadline=time.monotonic() + spin)

    def ready(self, state: np.ndarray, send: int, recv: int, word: int, fingerprint: int,
              may_write: bool) -> bool:
        """Whether `advance` can move now."""
        if may_write and state[S_WRITTEN] < len(self.write) and self._slot_free(
                int(self.cursor[self.size]), state):
            return True
        words, foreign = self.words, state[S_FOREIGN_WRITER]
        for k, row in enumerate(self.writer):
            if (state[S_RECEIVED + k] < row[R_EXPECT] and row[R_RANK] != foreign
                    and words[row[R_FILLED]] > self.cursor[row[R_RANK]] and (
                        self.fold is None
                        or self._may_fold(state, k, int(state[S_RECEIVED + k]) + 1))):
                return True
        if state[S_SELF] < self.own[2]:
            return self.fold is None or (self.own_position >= 2 and self._folded(
                state, self.own_position - 1) > state[S_SELF])
        return self._moved_all(state) and self._references_drained(state)


def kernel_op(op_code: int, dtype_code: int) -> tuple[Any, np.dtype]:
    """The operator and dtype of `collops.ops.compiled_kernel`'s codes."""
    name = next(k for k, v in ops.COMPILED_OPS.items() if v == op_code)
    dtype = next(k for k, v in ops.COMPILED_DTYPES.items() if v == dtype_code)
    return getattr(ops, name), dtype


def _items(address: int, nbytes: int, dtype: np.dtype) -> np.ndarray:
    """The ``nbytes`` at ``address`` as an array of ``dtype``."""
    return np.frombuffer(memoryview((ctypes.c_char * nbytes).from_address(address)).cast("B"),
                         dtype)


def skip_abandoned(area: StreamArea, writers: Sequence[int]) -> None:
    """Drain past the chunks at this rank's cursor on each of the ``writers``' rings (world
    ranks) that belong to calls it left unfinished (`StreamArea.abandoned`) or are not for
    it, so that its later calls read on and the writers may reuse the slots."""
    if area.abandoned:
        for w in writers:
            if w != area.me:
                _skip(area, w)


def _skip(area: StreamArea, writer: int) -> None:
    words, nchunks, abandoned = area.words, area.nchunks, area.abandoned
    filled = int(words[area.filled[writer]])
    cur = start = max(int(area.cursors[writer]), filled - nchunks)
    bit, headers = 1 << area.me, area.headers[writer] // seg.WORD
    while cur < filled:
        h = headers + 8 * (cur % nchunks)
        seq = int(words[h + H_SEQ])
        mask, call = int(words[h + H_MASK]), int(words[h + H_CALL])
        if seq == cur + 1 == int(words[h + H_SEQ]) and mask & bit \
                and call >> 24 not in abandoned:
            break  # a chunk for a call this rank has not given up
        cur += 1
    if cur != start:
        area.cursors[writer] = cur
        words[area.drained[writer][area.me]] = cur
        area.transport.wake_sleepers([writer])


def _bits(mask: int) -> list[int]:
    """The positions of the set bits of ``mask``, lowest first."""
    return [r for r in range(mask.bit_length()) if mask >> r & 1]


def _signed(v: int) -> int:
    """A u64 word as the int64 a state array holds."""
    return v - (1 << 64) if v >= 1 << 63 else v


