"""MPI's matching rule for point-to-point messages, apart from any transport.

A receive names a source (or `ANY_SOURCE`) and a tag (or `ANY_TAG`); a message's envelope
names its source and tag. MPI's rule: an arriving message matches the *earliest posted*
receive it fits; a posted receive takes the *earliest arrived* message it fits. With envelopes
handed in per source in the order they were sent (`p2p` guarantees that with a per-pair
sequence number), this gives MPI's non-overtaking order per (source, tag, communicator).

`Matcher` holds the two queues of one communicator on one rank: receives posted and not yet
matched, and envelopes arrived and not yet taken. It knows nothing of bytes or transports, so
a property test can check it against a plain reference.
"""

from __future__ import annotations

from typing import Any

#: wildcard source and tag, and the null peer (MPICH's values)
ANY_SOURCE = -2
ANY_TAG = -1
PROC_NULL = -1
#: the largest user tag
TAG_UB = 2**31 - 1


class Envelope:
    """What a message says of itself: who sent it, its tag, what it holds and how big it is
    (``dtype``: the sender's dtype token, `datatypes.dtype_token`; ``payload``: the bytes when
    they travelled inside the envelope, else None; ``sync``: the sender waits to hear of the
    match; ``on_match``: a self-send's sending operation, told of the match)."""

    __slots__ = ("source", "tag", "seq", "nbytes", "dtype", "shape", "is_object", "sync",
                 "payload", "on_match")

    def __init__(self, source: int, tag: int, seq: int, nbytes: int, dtype: str = "|u1",
                 shape: tuple[int, ...] = (), is_object: bool = False, sync: bool = False,
                 payload: Any = None, on_match: Any = None) -> None:
        self.source, self.tag, self.seq, self.nbytes = source, tag, seq, nbytes
        self.dtype, self.shape, self.is_object, self.sync = dtype, shape, is_object, sync
        self.payload, self.on_match = payload, on_match


class Posted:
    """A receive waiting for a message: its source and tag (wildcards allowed), its owner
    (the receive operation) and, once matched, the envelope."""

    __slots__ = ("source", "tag", "owner", "matched")

    def __init__(self, source: int, tag: int, owner: Any = None) -> None:
        self.source, self.tag, self.owner = source, tag, owner
        self.matched: Envelope | None = None


def fits(source: int, tag: int, envelope: Envelope) -> bool:
    """Whether a receive of ``(source, tag)`` may take ``envelope``."""
    return ((source == ANY_SOURCE or source == envelope.source)
            and (tag == ANY_TAG or tag == envelope.tag))


class Matcher:
    """The posted and unexpected queues of one communicator on one rank."""

    __slots__ = ("posted", "unexpected")

    def __init__(self) -> None:
        self.posted: list[Posted] = []
        self.unexpected: list[Envelope] = []

    def arrive(self, envelope: Envelope) -> Posted | None:
        """Hand in an arrived envelope: the earliest posted receive it fits (removed, its
        ``matched`` set), else None and the envelope waits among the unexpected."""
        for i, posted in enumerate(self.posted):
            if fits(posted.source, posted.tag, envelope):
                del self.posted[i]
                posted.matched = envelope
                return posted
        self.unexpected.append(envelope)
        return None

    def post(self, posted: Posted) -> Envelope | None:
        """Post a receive: the earliest unexpected envelope it fits (removed), else None and
        the receive waits among the posted."""
        envelope = self.find(posted.source, posted.tag)
        if envelope is not None:
            self.unexpected.remove(envelope)
            posted.matched = envelope
            return envelope
        self.posted.append(posted)
        return None

    def find(self, source: int, tag: int) -> Envelope | None:
        """The earliest unexpected envelope a receive of ``(source, tag)`` would take."""
        for envelope in self.unexpected:
            if fits(source, tag, envelope):
                return envelope
        return None

    def take(self, envelope: Envelope) -> None:
        """Remove ``envelope`` from the unexpected (a matched probe took it)."""
        self.unexpected.remove(envelope)

    def cancel(self, posted: Posted) -> bool:
        """Withdraw a posted receive; False if it has matched already."""
        if posted in self.posted:
            self.posted.remove(posted)
            return True
        return False

    def wanted_sources(self) -> tuple[int, ...] | None:
        """The sources the posted receives wait on (None: one of them takes any source)."""
        sources = []
        for posted in self.posted:
            if posted.source == ANY_SOURCE:
                return None
            sources.append(posted.source)
        return tuple(sources)
