"""Stream areas: the rings in shared memory behind the ``shm_stream`` collectives.

The first ``stream_areas`` communicator contexts of a job have a stream area in the segment,
after the direct areas (`segment.Layout`). In it every rank owns a page of control lines —
its *filled* counter (chunks published), one *drained* counter per reader (written by that
reader: the chunks of this ring it is done with), one header line per chunk slot, the roll
call's lines (`collops.shm.roll_call`: the rank's words for its rooted calls, their
fingerprints, the calls it is done with; `ROLL_SLOTS` of each) — followed by its ring of
``stream_chunks`` slots of ``stream_chunk_bytes``. Every counter is cumulative over the job,
so nothing is ever reset, and indexed by world rank: a ring's counters outlive the
communicators that use the context. What goes into the headers and how calls share the rings
is the algorithm's business (`collops.shm.stream`); this module only knows where
the words are, as `shm_direct` does for the direct areas.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np

from . import segment as seg

if TYPE_CHECKING:
    from .transport import ShmTransport


class StreamArea:
    """One context's stream area seen from one rank (world ranks throughout)."""

    def __init__(self, transport: ShmTransport, context: int) -> None:
        lay = transport._layout
        self.transport, self.context = transport, context
        self.size, self.me = lay.size, transport.rank
        self.nchunks, self.chunk_bytes = lay.stream_chunks, lay.stream_chunk_bytes
        base = [lay.stream_rank_offset(context, r) for r in range(self.size)]
        words = self.words = transport._words
        #: word of each writer's filled counter
        self.filled = [b // seg.WORD for b in base]
        #: drained[w][r]: the word where reader r counts the chunks of w's ring it is done with
        self.drained = [[(b + seg.LINE * (1 + r)) // seg.WORD for r in range(self.size)]
                        for b in base]
        #: byte offsets of each writer's first slot header and of its ring
        self.headers = [b + seg.LINE * (1 + self.size) for b in base]
        roll = [(h + seg.LINE * self.nchunks) // seg.WORD for h in self.headers]
        #: first word of each rank's roll-call words, their fingerprints, its calls done
        self.roll_held = roll
        self.roll_fps = [w + seg.ROLL_SLOTS for w in roll]
        self.roll_done = [w + 2 * seg.ROLL_SLOTS for w in roll]
        self.rings = [b + lay.stream_control_bytes for b in base]
        #: [w]: this rank's cursor on w's ring; [size]: chunks this rank has written
        self.cursors = np.zeros(self.size + 1, np.int64)
        for w in range(self.size):
            self.cursors[w] = words[self.drained[w][self.me]]
        self.cursors[self.size] = words[self.filled[self.me]]
        #: calls of this area in flight on this rank, in the order they began
        self.active: list[Any] = []
        #: those with chunks still to write: they write in that order (the ring is a FIFO)
        self.unwritten: deque[Any] = deque()
        #: numbers of the calls this rank left unfinished (an error ended them), most recent
        #: last: their chunks are drained unread (`stream_protocol.skip_abandoned`)
        self.abandoned: deque[int] = deque(maxlen=64)
        #: per communicator group: its `roll_call.RollBook` on this rank (never forgotten)
        self.roll_books: dict[tuple[int, ...], Any] = {}
        #: what the algorithms using this area work out once per call signature
        self.memo: dict[object, object] = {}
        transport._segment.prefault(base[0], self.size * lay.stream_rank_bytes)
