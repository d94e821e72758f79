"""One communicator's point-to-point envelopes through a transport's cell rings
(`collops.shm.cells`), in place of the transport's messages (`docs/p2p.md`).

Every message of the communicator to another rank is a cell of the pair's ring, in the order
sent: with its payload when the payload and the prefix (dims, dtype token) fit the cell's
body or, up to ``protocols.shm.p2p_chain_bytes``, a chain of consecutive cells
(`CellRings.inline`), else the envelope alone, the payload following as the transport
message ``DATA`` of `p2p_channel`, exactly as after an envelope sent as a message. The
matching rule does not change: cells drained from the rings become `Envelope`s handed to the
communicator's `Matcher` in the pair's order.

The simple cases bypass the matcher, for speed and nothing else: `CellRoute.send_now` (a
C-contiguous array whose payload fits a cell, nothing queued towards that rank) publishes its
cell at once; `CellRoute.receive_now` (a receive from one rank into a given buffer, while no
receive is posted, no envelope waits unmatched and nothing drained waits to be matched) takes
the head cell when it is the receive's — the message the matcher would have given it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..datatypes import dtype_token
from ..transport.base import Handle
from .matching import Envelope
from .status import Status

#: cell flags (`collops.shm.cells`): the same bits as the envelopes' in `p2p_channel`
OBJECT, SYNC, INLINE = 1, 2, 4
_TAG_MASK = (1 << 31) - 1


def _aligned(n: int) -> int:
    return (n + 7) & ~7


class CellRoute:
    """The cell rings as one communicator (``context``, its ``group``) uses them."""

    def __init__(self, cells: Any, group: Sequence[int], rank: int, context: int) -> None:
        self.cells = cells
        self.group = list(group)
        self.rank = rank
        self.context = context
        #: (dtype, shape) -> (prefix, token word, ndim, bytes of the prefix in the body)
        self._prefixes: dict[tuple[Any, tuple[int, ...]], tuple[bytes, int, int, int]] = {}
        cells.watch()

    def prefix(self, dtype: np.dtype, token: str, shape: tuple[int, ...]
               ) -> tuple[bytes, int, int, int]:
        """A message's body prefix (dims, then dtype token), token word, dims and body room."""
        key = (dtype, shape)
        found = self._prefixes.get(key)
        if found is None:
            prefix = struct.pack(f"<{len(shape)}q", *shape) + token.encode()
            word = self.cells.token_word(token)
            found = self._prefixes[key] = (prefix, word, len(shape), _aligned(len(prefix)))
        return found

    # -- sending -------------------------------------------------------------------------------
    def send(self, dest: int, tag: int, seq: int, flags: int, arr: np.ndarray, token: str,
             view: memoryview) -> tuple[Handle | None, bool]:
        """Publish message ``seq`` to ``dest`` (``flags``: `OBJECT`, `SYNC`): the handle of its
        cell if it waits for room (else None), and whether its payload went inline."""
        prefix, word, ndim, room = self.prefix(arr.dtype, token, arr.shape)
        inline = self.cells.inline(view.nbytes, room)
        if inline:
            flags |= INLINE
        handle = self.cells.send(self.group[dest], self.context, tag, seq, flags, word, ndim,
                                 prefix, view)
        return handle, inline

    def send_now(self, arr: np.ndarray, dest: int, tag: int, seq: int) -> bool:
        """Publish a small array's cells at once if it is the simple case; False if not."""
        world = self.group[dest]
        if self.cells.queued[world]:
            return False
        found = self._prefixes.get((arr.dtype, arr.shape))
        if found is None:
            found = self.prefix(arr.dtype, dtype_token(arr.dtype), arr.shape)
        prefix, word, ndim, room = found
        if not self.cells.inline(arr.nbytes, room):
            return False
        try:
            return bool(self.cells.outgoing[world].push(self.context, tag, seq, INLINE, word,
                                                        ndim, prefix, arr))
        except (BufferError, ValueError):  # not contiguous: the general path says so
            return False

    # -- receiving -----------------------------------------------------------------------------
    def take(self, src: int) -> Envelope | None:
        """The next envelope drained from ``src`` for this communicator, if any."""
        cell = self.cells.take_parked(self.context, src)
        if cell is None:
            return None
        _context, tag, nbytes, form, seq, _word, body = cell
        ndim, length = (form >> 8) & 0xFF, form >> 16
        shape = struct.unpack_from(f"<{ndim}q", body)
        token = body[8 * ndim: length].decode()
        payload = memoryview(body)[_aligned(length):] if form & INLINE else None
        return Envelope(src, tag, seq, nbytes, token, shape, bool(form & OBJECT),
                        bool(form & SYNC), payload)

    def receive_now(self, out: np.ndarray, source: int, tag: int, wait: bool
                    ) -> tuple[np.ndarray, Status] | None:
        """Receive the head cell from ``source`` into ``out`` if it is this receive's simple
        case (the caller checked that nothing posted or unmatched comes first); with ``wait``
        after the compiled stages of the wait for it. None: go the general way."""
        cells, world = self.cells, self.group[source]
        if cells.parked_count and (self.context, world) in cells.parked:
            return None
        ring = cells.incoming[world]
        if wait and not cells.queued_count:  # else those cells must move meanwhile
            got = ring.wait_take(self.context, tag, out)
        else:
            got = ring.take(self.context, tag, out)
        if got < 0:
            return None
        dtype = cells.dtypes.get(ring.last_token) or cells.dtype_of(ring.last_token)
        return out, Status(source, got & _TAG_MASK, got >> 31, dtype)
