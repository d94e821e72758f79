"""The transport interface: moving bytes between ranks, and nothing else.

A transport knows ranks, tags and bytes — never collectives or schedules. The engine posts
non-blocking sends and receives, each returning a `Handle`, drives them with `progress`, and
when nothing is ready blocks in `wait_for_activity`. Messages between one pair of ranks are
matched by ``(source, tag)``; a tag is unique per pending message (the engine packs the
communicator context, the collective's sequence number and the message's sequence into it).

Every message carries a 64-bit *fingerprint* of the collective call that sent it; a receive
reports the fingerprint and size that actually arrived, so the engine can tell mismatched
calls across ranks from a simple size error.

Failures surface as exceptions from `progress` / `wait_for_activity`: `PeerFailed` naming a
dead rank, `TransportError` for anything else. A transport never hangs silently.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import PeerFailed


class Handle:
    """A pending send or receive; the transport sets ``done`` (and, for receives, sizes)."""

    __slots__ = ("done", "nbytes", "fingerprint", "peer", "tag", "error", "extra")

    def __init__(self, peer: int, tag: int, nbytes: int = 0) -> None:
        self.done = False
        self.peer = peer
        self.tag = tag
        #: bytes sent, or bytes that arrived for a receive (may exceed the posted buffer)
        self.nbytes = nbytes
        #: the sender's call fingerprint (receives), filled on completion
        self.fingerprint = 0
        self.error: BaseException | None = None
        self.extra: object = None

    def __repr__(self) -> str:
        return f"Handle(peer={self.peer}, tag={self.tag:#x}, done={self.done})"


@dataclass(frozen=True)
class Capabilities:
    """What a transport offers, for algorithm lists and selection."""

    name: str
    #: node id of every rank (ranks with equal ids share memory)
    node_of_rank: tuple[int, ...] = ()
    #: whether large messages can move with a single copy
    single_copy: bool = False
    #: whether the network reduces in flight (seed 000/002's collective network)
    in_network_reduction: bool = False
    #: extra named resources (e.g. "mpi")
    resources: frozenset[str] = field(default_factory=frozenset)


class Transport(ABC):
    """Moves bytes between the ``size`` ranks of one job; this object is rank ``rank``."""

    rank: int
    size: int

    @abstractmethod
    def isend(self, peer: int, tag: int, data: memoryview, fingerprint: int = 0) -> Handle:
        """Start sending ``data`` to ``peer``; ``data`` must stay unchanged until done."""

    @abstractmethod
    def irecv(self, peer: int, tag: int, out: memoryview) -> Handle:
        """Start receiving the message ``(peer, tag)`` into ``out``."""

    @abstractmethod
    def progress(self) -> None:
        """Advance pending operations without blocking; raise on failure."""

    @abstractmethod
    def wait_for_activity(self, timeout: float | None) -> None:
        """Block until some pending operation may have advanced, or ``timeout`` seconds."""

    @abstractmethod
    def capabilities(self) -> Capabilities:
        """What this transport offers."""

    def unexpected_for_call(self, value: int, shift: int) -> tuple[int, int] | None:
        """``(peer, fingerprint)`` of a message that arrived unmatched with ``tag >> shift ==
        value`` and a fingerprint, if the transport can tell (None: none, or it cannot)."""
        return None

    def arrived(self, peer: int, tag: int) -> int | None:
        """The size of the message ``(peer, tag)`` if it has arrived and waits unmatched (a
        receive posted now would take it at once), else None. Point-to-point wildcards use it
        to take envelopes as they come (`collops.runtime.p2p_channel`); call `progress` first.
        A transport that cannot tell returns None and supports no wildcard receives."""
        return None

    def lost(self, peer: int) -> tuple[PeerFailed, bool] | None:
        """Why no further message from ``peer`` can come, for a wait posted on no receive:
        ``(error naming the rank, whether the job failed)`` — True when some rank died or
        raised, False when ``peer`` just ended; None while messages may still come (and
        when the transport cannot tell)."""
        return None

    def give_up(self, tag_base: int, error: BaseException,  # noqa: B027 - optional
                fingerprint: int | None = None) -> None:
        """This rank abandoned the call whose phase has ``tag_base`` after ``error`` (its own
        call's ``fingerprint``, when known, lets peers say how the calls differed): a
        transport that can may fail its peers' receives of that call from this rank, which
        would otherwise wait for messages it will never send (a no-op by default)."""

    def comm_resources(self, context: int, group: tuple[int, ...]) -> frozenset[str]:
        """The resources a communicator ``(context, group)`` has on this transport."""
        return self.capabilities().resources

    def call_counter(self, context: int) -> np.ndarray:
        """The int64 word holding the next call number of this rank's communicator
        ``context``: where the transport can show it to the other ranks (for stall reports,
        `collops.transport.stall`), else private to this process."""
        return np.zeros(1, np.int64)

    def release_comm(self, context: int, group: tuple[int, ...],  # noqa: B027 - optional
                     timeout: float | None) -> None:
        """The communicator ``(context, group)`` was freed on this rank (its calls all
        complete): give back what it held, so the id can serve another communicator —
        waiting, at most ``timeout`` seconds, for what the peers still read (a no-op by
        default)."""

    def calls_started(self, context: int, group: Sequence[int]) -> list[int] | None:
        """The next call number of each of ``group``'s ranks (transport ranks) on
        communicator ``context``, where this transport can see them (None: it cannot)."""
        return None

    def protocol_settings(self) -> dict[str, tuple[Any, str]]:
        """The transport's protocol settings in force: name to value and where it came from
        (the selection table's rule, an environment variable)."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release resources (idempotent)."""
