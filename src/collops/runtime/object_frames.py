"""A rooted object call's large objects, sent to the root alone after its one round.

`gather_object` (and `reduce_object`) gather every rank's slot to the root in one round; a
rank whose object did not fit its slot marks it `TOO_BIG` with its number of frames
(`mark_frames`), and only that rank and the root have more to do: the rank sends its frames'
lengths and then each frame as messages to the root, in the tag space of the gather's own
call (its next phase, with message numbers no schedule uses), and the root receives them.
Every other rank is done after the round, so the common case costs no agreement on sizes.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..errors import CollectiveTimeout
from ..transport.base import Handle
from ..transport.tags import SEQ_BITS, make_tag_base

#: the bit of a message number that marks an object frame (below the agreement's bit)
FRAME_BIT = 1 << (SEQ_BITS - 2)
#: where a `TOO_BIG` slot says how many frames follow
_NFRAMES_AT = 8


def mark_frames(slot: np.ndarray, frames: list[np.ndarray]) -> None:
    """Write the number of ``frames`` after the `TOO_BIG` header of ``slot``."""
    slot[_NFRAMES_AT: _NFRAMES_AT + 8].view(np.int64)[0] = len(frames)


def frames_marked(rows: np.ndarray, at: int) -> int:
    """The number of frames the `TOO_BIG` slot at byte ``at`` of ``rows`` announces."""
    return int(rows[at + _NFRAMES_AT: at + _NFRAMES_AT + 8].view(np.int64)[0])


def _tag(comm: Any, seq: int) -> int:
    """Message 0 of the frames a rank sends the root after call ``seq``."""
    return make_tag_base(comm.context, seq, 1) | FRAME_BIT


class FramesToRoot:
    """The frames' messages of one call on this rank, polled as an execution: ``frames``
    sent to ``root`` (a sender), or (the root) the frames of each rank in ``expected``
    (rank -> number of frames) received into `received`."""

    __slots__ = ("comm", "seq", "sends", "lengths", "frames", "received", "deadline",
                 "timeout", "what")

    def __init__(self, comm: Any, what: str, seq: int, root: int, frames: list[np.ndarray],
                 expected: dict[int, int], timeout: float | None) -> None:
        self.comm, self.seq, self.what, self.timeout = comm, seq, what, timeout
        self.deadline = None if timeout is None else time.monotonic() + timeout
        transport, group = comm.transport, comm._group
        self.sends: list[Handle] = []
        self.frames: list[np.ndarray] = []  # the lengths' buffer, kept until sent
        if frames:
            sizes = np.asarray([f.nbytes for f in frames], np.int64)
            base = _tag(comm, seq)
            for k, data in enumerate([sizes.view(np.uint8), *frames]):
                self.sends.append(transport.isend(group[root], base | k, data.data))
            self.frames = [sizes]
        self.lengths: dict[int, tuple[np.ndarray, Handle]] = {}
        for j, n in expected.items():
            sizes = np.empty(n, np.int64)
            self.lengths[j] = (sizes, transport.irecv(group[j], _tag(comm, seq),
                                                      sizes.view(np.uint8).data))
        self.received: dict[int, list[tuple[np.ndarray, Handle]]] = {}

    def poll(self) -> bool:
        """Advance without blocking; True once every message has gone or arrived."""
        transport, group = self.comm.transport, self.comm._group
        transport.progress()
        waiting = False
        for j, (sizes, h) in list(self.lengths.items()):
            if h.error is not None:
                raise h.error
            if not h.done:
                waiting = True
                continue
            del self.lengths[j]
            base = _tag(self.comm, self.seq)
            got = []
            for k, n in enumerate(sizes.tolist()):
                buf = np.empty(n, np.uint8)
                got.append((buf, transport.irecv(group[j], base | (k + 1), buf.data)))
            self.received[j] = got
            waiting = True
        for h in self.sends + [h for got in self.received.values() for _, h in got]:
            if h.error is not None:
                raise h.error
            waiting = waiting or not h.done
        if waiting and self.deadline is not None and time.monotonic() > self.deadline:
            raise self.timeout_error()
        return not waiting

    def frames_of(self, j: int) -> list[np.ndarray]:
        """The frames received from rank ``j``."""
        return [buf for buf, _ in self.received[j]]

    def timeout_error(self) -> CollectiveTimeout:
        """The error describing where the call stopped."""
        missing = sorted(set(self.lengths) | {j for j, got in self.received.items()
                                              if not all(h.done for _, h in got)})
        return CollectiveTimeout(
            f"rank {self.comm.rank}: {self.what} did not complete within {self.timeout} s; "
            f"waiting for large objects' frames; not heard from ranks {missing}"
            + ("; sends to the root unfinished" if self.sends else ""))
