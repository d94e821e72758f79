"""Point-to-point messages over any transport: envelopes, their tags, and the operations in
flight (`docs/p2p.md`).

A message from rank s to rank d on a communicator is the s→d pair's message number ``seq``.
Its **envelope** (user tag, dtype, shape, size, flags; the payload inline up to
`inline_max` bytes) travels as the transport message ``wire_tag(context, seq, ENVELOPE)``;
a larger payload follows as its own transport message ``wire_tag(context, seq, DATA)``, which
the receiver posts straight into the user's buffer once the envelope matched — so it moves by
the transport's rendezvous or single copy, like a collective's large message. A synchronous
send also posts a receive of ``wire_tag(context, seq, ACK)``, which the receiver sends when
the envelope matches.

The receiver takes each source's envelopes in ``seq`` order (`Transport.arrived` says whether
the next one is there) and hands them to its `Matcher`, which applies MPI's rule; so MPI's
non-overtaking order holds whatever order the transport delivers different pairs' messages
in, and wildcard receives need nothing posted at the transport. Operations (`SendOp`,
`RecvOp`, `ProbeOp`) have the `poll`/``deadline`` interface of the progress engine's
executions: a pending receive advances during any other wait of its communicator, and a
collective advances during a receive's wait.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..datatypes import dtype_from_token
from ..errors import CollectiveTimeout, PeerFailed, TransportError, TruncationError
from ..transport.base import Handle, Transport
from ..transport.tags import P2P_PHASE, SEQ_BITS, make_tag_base
from .engine import CallInfo
from .matching import ANY_SOURCE, Envelope, Matcher, Posted
from .p2p_cells import CellRoute
from .p2p_inline import inline_max
from .status import Status

#: the parts of one message, in the low bits of its sequence number's tag
ENVELOPE, DATA, ACK = 0, 1, 2
#: largest payload carried inside its envelope, as the built-in table says
#: (``protocols.p2p.inline_max``: `p2p_inline`; cells carry what fits in a cell instead)
INLINE_MAX = 4096
#: seconds between checks that the peers a receive waits for are still there
CHECK_EVERY = 0.05

_SEQ_MASK = (1 << SEQ_BITS) - 1
#: user tag, size, flags, dimensions, length of the dtype token
_HEAD = struct.Struct("<qQBBB")
_OBJECT, _SYNC, _INLINE = 1, 2, 4
_BYTE = np.dtype(np.uint8)
_EMPTY = memoryview(bytearray())


def wire_tag(context: int, seq: int, kind: int) -> int:
    """The transport tag of part ``kind`` of message ``seq`` of a rank pair on communicator
    ``context``: phase `P2P_PHASE` of the context, where no collective's message can be."""
    n = (seq << 2) | kind
    return make_tag_base(context, n >> SEQ_BITS, P2P_PHASE) | (n & _SEQ_MASK)


def byte_view(arr: np.ndarray) -> memoryview:
    """A flat byte view of a C-contiguous array."""
    try:
        return memoryview(arr).cast("B")  # type: ignore[arg-type]
    except (TypeError, ValueError):  # a dtype without a buffer format (datetime64, ...)
        return memoryview(arr.reshape(-1).view(_BYTE)) if arr.size else _EMPTY  # type: ignore[arg-type]


def encode(tag: int, nbytes: int, prefix: bytes, flags: int, payload: Any) -> bytes:
    """An envelope: header, then ``prefix`` (dtype token and shape: `envelope_prefix`), then
    the inline payload if any."""
    head = _HEAD.pack(tag, nbytes, flags, prefix[0], prefix[1]) + prefix[2:]
    return head if payload is None else head + payload


def envelope_prefix(token: str, shape: tuple[int, ...]) -> bytes:
    """The dtype and shape part of an envelope (two length bytes, token, int64 dims)."""
    raw = token.encode()
    return bytes((len(shape), len(raw))) + raw + struct.pack(f"<{len(shape)}q", *shape)


def decode(buf: bytearray, source: int, seq: int) -> Envelope:
    """The envelope in ``buf``, which came from ``source`` as its message ``seq``."""
    tag, nbytes, flags, ndim, tlen = _HEAD.unpack_from(buf)
    at = _HEAD.size
    token = buf[at: at + tlen].decode()
    at += tlen
    shape = struct.unpack_from(f"<{ndim}q", buf, at)
    at += 8 * ndim
    payload = memoryview(buf)[at:] if flags & _INLINE else None
    return Envelope(source, tag, seq, nbytes, token, shape, bool(flags & _OBJECT),
                    bool(flags & _SYNC), payload)


class Channel:
    """One communicator's point-to-point state on this rank: the matcher, the next message
    number towards and from each rank, and transfers left to finish in the background."""

    def __init__(self, transport: Transport, group: Sequence[int], rank: int,
                 context: int) -> None:
        self.transport = transport
        self.group = list(group)
        self.rank = rank
        self.size = len(group)
        self.context = context
        self.matcher = Matcher()
        #: the most payload bytes an envelope sent as a transport message carries inline
        self.inline_max = inline_max(transport.size, rank)
        self.sent = [0] * self.size
        self.taken = [0] * self.size
        #: transfers nobody waits for (acknowledgements, truncated payloads): kept until done
        self.background: list[tuple[Handle, Any]] = []
        self._prefixes: dict[tuple[str, tuple[int, ...]], bytes] = {}
        cells = getattr(transport, "point_to_point_cells", None)
        found = cells() if cells is not None else None
        #: the transport's cell rings, when envelopes go through them (`p2p_cells`)
        self.route = None if found is None else CellRoute(found, group, rank, context)

    # -- receiving envelopes -----------------------------------------------------------------
    def drain(self, sources: Sequence[int] | None) -> None:
        """Hand every envelope that has arrived from ``sources`` (None: every rank) to the
        matcher, each source's in order."""
        self.transport.progress()
        if self.background:
            for h, _ in self.background:
                if h.error is not None:
                    raise h.error
            self.background = [item for item in self.background if not item[0].done]
        route = self.route
        if route is not None:
            route.cells.progress()
        for src in range(self.size) if sources is None else sources:
            if src != self.rank:
                if route is None:
                    self._take_from(src)
                else:
                    envelope = route.take(src)
                    while envelope is not None:
                        self.hand_in(envelope)
                        envelope = route.take(src)

    def _take_from(self, src: int) -> None:
        world, transport = self.group[src], self.transport
        while True:
            seq = self.taken[src]
            tag = wire_tag(self.context, seq, ENVELOPE)
            n = transport.arrived(world, tag)
            if n is None:
                return
            buf = bytearray(n)
            h = transport.irecv(world, tag, memoryview(buf))
            if h.error is not None:
                raise h.error
            if not h.done:
                raise TransportError(f"rank {self.rank}: an envelope from rank {src} that "
                                     "had arrived did not complete at once")
            self.taken[src] = seq + 1
            self.hand_in(decode(buf, src, seq))

    def hand_in(self, envelope: Envelope) -> None:
        """Match an arrived envelope (or keep it among the unexpected)."""
        posted = self.matcher.arrive(envelope)
        if posted is not None:
            posted.owner.matched(envelope)

    def acknowledge(self, envelope: Envelope) -> None:
        """Tell a synchronous sender that its message matched."""
        if not envelope.sync:
            return
        if envelope.on_match is not None:  # a send to this rank itself
            envelope.on_match.acked = True
            return
        h = self.transport.isend(self.group[envelope.source],
                                 wire_tag(self.context, envelope.seq, ACK), _EMPTY)
        if not h.done:
            self.background.append((h, None))

    def receive_payload(self, envelope: Envelope, into: memoryview) -> Handle:
        """Receive a separately sent payload into ``into`` (its exact size)."""
        return self.transport.irecv(self.group[envelope.source],
                                    wire_tag(self.context, envelope.seq, DATA), into)

    def discard_payload(self, envelope: Envelope) -> None:
        """Take a separately sent payload nobody will read (a truncated receive)."""
        if envelope.payload is None and envelope.on_match is None:
            scratch = bytearray(envelope.nbytes)
            h = self.receive_payload(envelope, memoryview(scratch))
            if not h.done:
                self.background.append((h, scratch))

    # -- the blocking calls' fast paths (`MpiChannel` has the same) ---------------------------
    def send_now(self, arr: np.ndarray, dest: int, tag: int) -> bool:
        """Send a small array at once through the cell rings if it is the simple case
        (`CellRoute.send_now`); False if not."""
        route = self.route
        if route is None:
            return False
        seq = self.sent[dest]
        if route.send_now(arr, dest, tag, seq):
            self.sent[dest] = seq + 1
            return True
        return False

    def receive_now(self, out: np.ndarray, source: int, tag: int, wait: bool
                    ) -> tuple[np.ndarray, Status] | None:
        """Receive from rank ``source`` into ``out`` through the cell rings when nothing
        posted, unmatched or in the background comes first (`CellRoute.receive_now`); None
        to go the general way."""
        route = self.route
        if route is None or self.matcher.posted or self.matcher.unexpected or self.background:
            return None
        return route.receive_now(out, source, tag, wait)

    # -- the operations (`MpiChannel` has the same) ---------------------------------------------
    def start_send(self, call: str, arr: np.ndarray, token: str, dest: int, tag: int,
                   sync: bool, is_object: bool, timeout: float | None) -> SendOp:
        """Start sending ``arr`` (C-contiguous) to ``dest``."""
        op = SendOp(self, call, dest, timeout)
        self.send(arr, token, dest, tag, sync, is_object, op)
        return op

    def start_recv(self, call: str, source: int, tag: int, out: np.ndarray | None,
                   timeout: float | None) -> RecvOp:
        """Post a receive: it takes the earliest fitting message, now or once one comes."""
        op = RecvOp(self, call, source, tag, out, timeout)
        op.post()
        return op

    def start_probe(self, call: str, source: int, tag: int, take: bool,
                    timeout: float | None) -> ProbeOp:
        """A probe (``take``: a matched probe) of ``(source, tag)``."""
        return ProbeOp(self, call, source, tag, take, timeout)

    def receive_probed(self, probe: ProbeOp, call: str, out: np.ndarray | None,
                       timeout: float | None) -> RecvOp:
        """The receive of the message a matched probe took."""
        envelope = probe.envelope
        assert envelope is not None
        op = RecvOp(self, call, envelope.source, envelope.tag, out, timeout)
        op.matched(envelope)
        return op

    # -- sending -------------------------------------------------------------------------------
    def send(self, arr: np.ndarray, token: str, dest: int, tag: int, sync: bool,
             is_object: bool, op: SendOp) -> None:
        """Start sending ``arr`` (C-contiguous) to ``dest`` as ``op``."""
        seq = self.sent[dest]
        self.sent[dest] = seq + 1
        view = byte_view(arr)
        nbytes = view.nbytes
        if dest == self.rank:
            op.acked = not sync
            self.hand_in(Envelope(self.rank, tag, seq, nbytes, token, arr.shape, is_object,
                                  sync, bytes(view), op if sync else None))
            return
        flags = (_OBJECT if is_object else 0) | (_SYNC if sync else 0)
        world, transport = self.group[dest], self.transport
        if sync:
            op.ack = transport.irecv(world, wire_tag(self.context, seq, ACK), _EMPTY)
        if self.route is not None:
            handle, inline = self.route.send(dest, tag, seq, flags, arr, token, view)
            if handle is not None:
                op.handles.append(handle)
                op.queued = handle
            if not inline:
                op.data = arr
                op.handles.append(transport.isend(world, wire_tag(self.context, seq, DATA),
                                                  view))
            return
        key = (token, arr.shape)
        prefix = self._prefixes.get(key)
        if prefix is None:
            prefix = self._prefixes[key] = envelope_prefix(token, arr.shape)
        inline = nbytes <= self.inline_max
        op.envelope = encode(tag, nbytes, prefix, flags | _INLINE if inline else flags,
                             view if inline else None)
        op.handles.append(transport.isend(world, wire_tag(self.context, seq, ENVELOPE),
                                          memoryview(op.envelope)))
        if not inline:
            op.data = arr
            op.handles.append(transport.isend(world, wire_tag(self.context, seq, DATA), view))


class _Operation:
    """What every point-to-point operation has for the progress engine: ``poll``, a
    ``deadline``, and ``info`` naming it in stall reports and errors."""

    def __init__(self, channel: Channel, call: str, timeout: float | None) -> None:
        self.channel = channel
        self.call = call
        self.timeout = timeout
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.done = False

    @property
    def info(self) -> CallInfo:
        """The call, as the progress engine's stall reports and failures name it."""
        return CallInfo(self.call, "p2p", self.channel.rank, 0)

    def _check_deadline(self, what: str) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise CollectiveTimeout(f"rank {self.channel.rank}: {self.call} did not complete "
                                    f"within {self.timeout} s; {what}")


class SendOp(_Operation):
    """A send in flight: done once its transport sends are (and, if synchronous, once the
    receiver said it matched)."""

    def __init__(self, channel: Channel, call: str, dest: int, timeout: float | None) -> None:
        super().__init__(channel, call, timeout)
        self.dest = dest
        self.handles: list[Handle] = []
        self.ack: Handle | None = None
        self.acked = True
        self.envelope: bytes | None = None
        self.data: np.ndarray | None = None
        #: its cell, while it waits for room in the pair's full ring (`p2p_cells`)
        self.queued: Handle | None = None
        self._next_check = 0.0

    def poll(self) -> bool:
        """Advance without blocking; True once the send has completed."""
        if self.done:
            return True
        channel = self.channel
        if self.acked and self.ack is None and all(h.done for h in self.handles):
            for h in self.handles:
                if h.error is not None:
                    raise h.error
            self.done = True
            return True
        # progress, and the receives posted here take their envelopes: a large message's
        # sender waits for its receiver, which may be waiting for this rank (`sendrecv`)
        channel.drain(channel.matcher.wanted_sources())
        for handle in (*self.handles, self.ack):
            if handle is not None and handle.error is not None:
                raise handle.error
        if (all(h.done for h in self.handles) and self.acked
                and (self.ack is None or self.ack.done)):
            self.done = True
            self.envelope = self.data = None
            return True
        if self.queued is not None and not self.queued.done:
            self._receiver_alive()
        self._check_deadline(f"rank {self.dest} has not "
                             + ("matched the message" if self.ack is not None or not self.acked
                                else "taken the message"))
        return False

    def _receiver_alive(self) -> None:
        """Raise `PeerFailed` (every `CHECK_EVERY` s at most) once the receiver of a cell that
        waits for room in its full ring can no longer drain it."""
        now = time.monotonic()
        if now < self._next_check:
            return
        self._next_check = now + CHECK_EVERY
        channel = self.channel
        why = channel.transport.lost(channel.group[self.dest])
        if why is not None:
            raise why[0]

    def value(self) -> None:
        """A send returns nothing."""
        return None


class _Awaiting(_Operation):
    """An operation that waits for a matching envelope from ``source`` (or any rank): it
    checks every `CHECK_EVERY` seconds that the ranks it waits for can still send."""

    def __init__(self, channel: Channel, call: str, source: int, tag: int,
                 timeout: float | None) -> None:
        super().__init__(channel, call, timeout)
        self.source, self.tag_wanted = source, tag
        self._next_check = time.monotonic() + CHECK_EVERY
        self._sources: tuple[int, ...] | None = None if source == ANY_SOURCE else (source,)

    def _still_possible(self) -> None:
        """Raise if no rank this operation waits for can send any more (or the job failed)."""
        now = time.monotonic()
        if now < self._next_check:
            return
        self._next_check = now + CHECK_EVERY
        channel = self.channel
        peers = [r for r in (range(channel.size) if self._sources is None else self._sources)
                 if r != channel.rank]
        if not peers:
            return
        lost = []
        for peer in peers:
            why = channel.transport.lost(channel.group[peer])
            if why is not None:
                if why[1]:
                    raise why[0]
                lost.append(why[0])
        if len(lost) == len(peers):
            channel.drain(self._sources)  # what they sent before ending
            if not self._found():
                raise lost[0] if len(lost) == 1 else PeerFailed(
                    lost[0].failed_rank, f"every rank a {self.call} from any source could "
                    f"hear from has ended ({lost[0].detail})")
        self._check_deadline(self._waiting_for())

    def _waiting_for(self) -> str:
        source = "any rank" if self.source == ANY_SOURCE else f"rank {self.source}"
        tag = "any tag" if self.tag_wanted < 0 else f"tag {self.tag_wanted}"
        return f"no message from {source} with {tag} has arrived"

    def _found(self) -> bool:
        raise NotImplementedError


class Receiving(_Awaiting):
    """What every receive shares, whatever does the matching: ``out``, ``result`` and
    ``error``, its cancel, and the first stage of its poll (waiting for a match)."""

    out: np.ndarray | None
    error: BaseException | None
    result: tuple[Any, Status] | None

    def _unmatched(self) -> bool:
        return not self._found()

    def _withdraw(self) -> bool:
        """Take the receive back from whatever would match it; True if it was there."""
        raise NotImplementedError

    def cancel(self) -> bool:
        """Withdraw the receive if it has not matched; True if it was withdrawn."""
        if self._unmatched() and self._withdraw():
            self.result = (self.out, Status(self.source, self.tag_wanted, 0, cancelled=True))
            self.done = True
            return True
        return False

    def _until_matched(self) -> bool | None:
        """The first stage of a poll: True (done) or False (no match yet) to return, None
        once matched with its bytes in flight."""
        if self.done:
            return True
        if self.error is not None:
            raise self.error
        if self._unmatched():
            self.channel.drain(self._sources)
            if self._unmatched():
                self._still_possible()
                return False
            if self.error is not None:
                raise self.error
            if self.done:
                return True
        return None

    def value(self) -> tuple[Any, Status]:
        """``(data, Status)`` of the completed receive."""
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


class RecvOp(Receiving):
    """A receive: posted to the matcher, then (for a large message) its payload in flight."""

    def __init__(self, channel: Channel, call: str, source: int, tag: int,
                 out: np.ndarray | None, timeout: float | None) -> None:
        super().__init__(channel, call, source, tag, timeout)
        self.out = out
        self.posted = Posted(source, tag, self)
        self.envelope: Envelope | None = None
        self.payload: Handle | None = None
        self.error: BaseException | None = None
        self.result: tuple[Any, Status] | None = None

    def post(self) -> None:
        """Post the receive: it takes the earliest fitting message that arrived already."""
        envelope = self.channel.matcher.post(self.posted)
        if envelope is not None:
            self.matched(envelope)

    def matched(self, envelope: Envelope) -> None:
        """The matcher gave this receive ``envelope``: start moving its bytes."""
        channel = self.channel
        self.envelope = envelope
        self.posted.owner = None  # matched: no cycle keeps the receive (and ``out``) alive
        channel.acknowledge(envelope)
        dtype = dtype_from_token(envelope.dtype)
        n = envelope.nbytes
        out = self.out
        if out is None:
            data = (np.empty(n, _BYTE) if envelope.is_object
                    else np.empty(envelope.shape, dtype))
        elif n > out.nbytes:
            channel.discard_payload(envelope)
            self.error = TruncationError(self.call, channel.rank, envelope.source,
                                         envelope.tag, n, out.nbytes)
            return
        else:
            data = out
        self.result = (data, Status(envelope.source, envelope.tag, n, dtype))
        into = byte_view(data)[:n]
        if envelope.payload is not None:
            into[:] = envelope.payload
            self.done = True
            return
        self.payload = channel.receive_payload(envelope, into)
        self.done = self.payload.done and self.payload.error is None

    def _found(self) -> bool:
        return self.envelope is not None

    def _withdraw(self) -> bool:
        return self.channel.matcher.cancel(self.posted)

    def poll(self) -> bool:
        """Advance without blocking; True once the message is in place."""
        state = self._until_matched()
        if state is not None:
            return state
        payload = self.payload
        assert payload is not None
        if not payload.done:
            self.channel.transport.progress()
        if payload.error is not None:
            raise payload.error
        if payload.done:
            self.done = True
            return True
        self._check_deadline(f"the payload from rank {self.source} has not arrived")
        return False


class ProbeOp(_Awaiting):
    """A probe: done once a fitting envelope waits unmatched; ``take`` (a matched probe)
    removes it from the matcher, so only its `Message` can receive it."""

    def __init__(self, channel: Channel, call: str, source: int, tag: int, take: bool,
                 timeout: float | None) -> None:
        super().__init__(channel, call, source, tag, timeout)
        self.take = take
        self.envelope: Envelope | None = None

    def _found(self) -> bool:
        envelope = self.channel.matcher.find(self.source, self.tag_wanted)
        if envelope is None:
            return False
        if self.take:
            self.channel.matcher.take(envelope)
        self.envelope = envelope
        self.done = True
        return True

    def poll(self) -> bool:
        """Advance without blocking; True once a fitting message has arrived."""
        if self.done or self._found():
            return True
        self.channel.drain(self._sources)
        if self._found():
            return True
        self._still_possible()
        return False

    def status(self) -> Status:
        """The status of the message found."""
        envelope = self.envelope
        assert envelope is not None
        return Status(envelope.source, envelope.tag, envelope.nbytes,
                      dtype_from_token(envelope.dtype))
