"""Point-to-point operations over MPI's own point-to-point (`collops.mpi.p2p`): the same
`send`/`recv`/probe operations as `p2p_channel`'s, with MPI doing the matching.

A receive not yet matched waits in its channel's list, in the order receives were posted;
every advance offers MPI's unexpected messages to those receives in that order
(``MPI_Improbe`` with each one's source and tag), so the earliest posted receive that fits
takes a message and MPI's order per (source, tag, communicator) decides which message. A
receive never posted at MPI leaves nothing behind when it is cancelled or times out.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..datatypes import dtype_from_token, dtype_token
from ..errors import ArgumentError, TruncationError
from ..mpi.p2p import (
    COPY_MAX,
    HEADER_BYTES,
    OBJECT,
    Head,
    Link,
    Probed,
    pack_header,
    unpack_header,
)
from ..transport.base import Transport
from .matching import ANY_SOURCE, ANY_TAG
from .p2p_channel import CHECK_EVERY, Receiving, _Awaiting, _Operation, byte_view
from .status import Status

_BYTE = np.dtype(np.uint8)
#: headers whose dtype a channel keeps, at most (a new one past it starts the table afresh)
_HEADERS_KEPT = 256
#: seconds a wait polls MPI without sleeping while a request it waits for is in flight (as
#: ``MPI_Wait`` does): MPI moves a large message only inside its calls, so a wait that sleeps
#: between calls slows the transfer to one pipeline step per sleep
SPIN_IN_FLIGHT = 0.2
#: ``MPI_Test`` calls in a row while a request is in flight, between the wait's other work
TESTS_IN_A_ROW = 256


def _completed(request: Any) -> bool:
    """Whether ``request`` completed, testing it `TESTS_IN_A_ROW` times (each a step of
    MPI's progress: a large message's pipeline moves only inside MPI's calls)."""
    test = request.Test
    for _ in range(TESTS_IN_A_ROW):
        if test():
            return True
    return False


class MpiChannel:
    """One communicator's point-to-point on this rank over its MPI communicator: the
    receives waiting for a message, in the order they were posted."""

    #: no cell route: the fast paths of `P2P.send`/`recv` are the shm transport's
    route = None

    def __init__(self, transport: Transport, link: Link, group: Sequence[int], rank: int,
                 context: int) -> None:
        self.transport = transport
        self.link = link
        self.group = list(group)
        self.rank = rank
        self.size = len(group)
        self.context = context
        self.waiting: list[MpiRecvOp] = []
        #: operations whose MPI request is in flight while someone waits (`ready`)
        self.in_flight: list[MpiSendOp | MpiRecvOp] = []
        #: headers by (dtype token, shape, flags): the shape fixes the size
        self._headers: dict[tuple[str, tuple[int, ...], int], bytes] = {}
        #: an array's header by (dtype, shape), for `send_now`
        self._array_headers: dict[tuple[np.dtype, tuple[int, ...]], bytes] = {}
        #: the dtype of each header received (`receive_now`; at most `_HEADERS_KEPT`)
        self._dtypes: dict[bytes, np.dtype] = {}
        wakers = getattr(transport, "_wakers", None)
        if wakers is not None:  # a message for a waiting receive ends the transport's wait
            wakers.append(self)

    # -- the transport's wait ------------------------------------------------------------------
    def ready(self) -> bool:
        """Whether a waiting receive's message has come or a request in flight completed
        (ends `wait_for_activity`)."""
        if self.in_flight:  # MPI moves a large message only inside its calls: keep calling
            if time.monotonic() < self.in_flight[0].since + SPIN_IN_FLIGHT:
                return True
            for op in self.in_flight:
                if op.request.Get_status():
                    return True
        link = self.link
        for op in self.waiting:
            if link.iprobe(op.mpi_source, op.mpi_tag) is not None:
                return True
        return False

    def not_posted(self) -> set[int]:
        """No rank is awaited for a call here (the operations check their peers)."""
        return set()

    # -- matching ------------------------------------------------------------------------------
    def drain(self, sources: Sequence[int] | None = None) -> None:
        """Give the waiting receives, earliest posted first, the messages MPI has for them.

        A message may arrive between one receive's probe and the next's: the later receive's
        probe then takes a message an earlier receive, still waiting, would take too. MPI
        gives it to the earliest posted receive it fits, so this does, and probes again for
        the later one."""
        waiting = self.waiting
        if not waiting:
            return
        link = self.link
        i = 0
        while i < len(waiting):
            op = waiting[i]
            probed = link.improbe(op.mpi_source, op.mpi_tag)
            if probed is None:
                i += 1
                continue
            first = next(j for j in range(i + 1) if self._fits(waiting[j], probed))
            taker = waiting.pop(first)
            taker.matched(probed)
            if first < i:  # ``op`` moved up one place: probe for it again there
                i -= 1

    def _fits(self, op: MpiRecvOp, probed: Probed) -> bool:
        """Whether a receive of ``op``'s source and tag would take ``probed``'s message."""
        link = self.link
        return ((op.mpi_source == link.any_source or op.mpi_source == probed.source)
                and (op.mpi_tag == link.any_tag or op.mpi_tag == probed.tag))

    def check_tag(self, call: str, name: str, tag: int) -> int:
        """``tag`` as MPI's tag: an `ArgumentError` past MPI's ``TAG_UB``."""
        if tag > self.link.tag_ub:
            raise ArgumentError(call, name, tag, f"over MPI must be at most MPI's TAG_UB "
                                f"({self.link.tag_ub})", self.rank)
        return tag if tag != ANY_TAG else self.link.any_tag

    # -- the blocking calls' fast paths -------------------------------------------------------
    def send_now(self, arr: np.ndarray, dest: int, tag: int) -> bool | MpiSendOp:
        """Send a small C-contiguous array at once as one MPI message: True once it completed,
        its operation if MPI's request is still in flight, False if not the simple case."""
        link = self.link
        if (tag > link.tag_ub or arr.nbytes > COPY_MAX - HEADER_BYTES
                or not arr.flags.c_contiguous):
            return False
        key = (arr.dtype, arr.shape)
        header = self._array_headers.get(key)
        if header is None:
            try:
                header = pack_header(0, dtype_token(arr.dtype), arr.shape, arr.nbytes, "send",
                                     self.rank)
            except ArgumentError:
                return False  # the general path raises it
            self._array_headers[key] = header
        request = link.send_small(header, arr.tobytes(), dest, tag)  # no buffer export
        if request is None:
            return True
        op = MpiSendOp(self, "send", dest, None)
        op.request = request
        return op

    def receive_now(self, out: np.ndarray, source: int, tag: int, wait: bool
                    ) -> tuple[np.ndarray, Status] | MpiRecvOp | None:
        """Receive from rank ``source`` into ``out`` at once when no receive posted earlier
        waits, polling MPI for the spin stage if ``wait``: ``(out, Status)``, the operation
        if the message is not simple (large, or larger than ``out``), None if none came."""
        link = self.link
        if self.waiting or tag > link.tag_ub:
            return None
        try:
            into = memoryview(out).cast("B")  # type: ignore[arg-type]
        except (TypeError, ValueError):  # not C-contiguous, or no buffer format
            return None
        if into.readonly:
            return None
        got = link.receive_small(source, tag if tag != ANY_TAG else link.any_tag, wait)
        if got is None:
            return None
        if type(got) is Probed:
            op = MpiRecvOp(self, "recv", source, tag, out, None)
            op.matched(got)
            return op
        view, found = got  # type: ignore[misc]
        n = view.nbytes - HEADER_BYTES
        if n > into.nbytes:
            op = MpiRecvOp(self, "recv", source, tag, out, None)
            probed = Probed(None, source, found, view.nbytes)
            probed.head, probed.inline = unpack_header(view), bytes(view)
            op.matched(probed)
            return op
        into[:n] = view[HEADER_BYTES:]
        header = bytes(view[:HEADER_BYTES])
        dtype = self._dtypes.get(header)
        if dtype is None:
            if len(self._dtypes) > _HEADERS_KEPT:
                self._dtypes.clear()
            flags, token, _shape, _n = unpack_header(header)
            dtype = self._dtypes[header] = (_BYTE if flags & OBJECT
                                            else dtype_from_token(token))
        return out, Status(source, found, n, dtype)

    # -- the operations ------------------------------------------------------------------------
    def start_send(self, call: str, arr: np.ndarray, token: str, dest: int, tag: int,
                   sync: bool, is_object: bool, timeout: float | None) -> MpiSendOp:
        """Start sending ``arr`` (C-contiguous) to ``dest``."""
        self.check_tag(call, "tag", tag)
        flags = OBJECT if is_object else 0
        view = byte_view(arr)
        key = (token, arr.shape, flags)
        header = self._headers.get(key)
        if header is None:
            header = self._headers[key] = pack_header(flags, token, arr.shape, view.nbytes,
                                                      call, self.rank)
        op = MpiSendOp(self, call, dest, timeout)
        op.request = self.link.isend(header, view, dest, tag, sync)
        return op

    def start_recv(self, call: str, source: int, tag: int, out: np.ndarray | None,
                   timeout: float | None) -> MpiRecvOp:
        """Start a receive: it takes the earliest fitting message, now or once one comes."""
        op = MpiRecvOp(self, call, source, tag, out, timeout)
        if not self.waiting:
            probed = self.link.improbe(op.mpi_source, op.mpi_tag)
            if probed is not None:
                op.matched(probed)
                return op
        self.waiting.append(op)
        return op

    def start_probe(self, call: str, source: int, tag: int, take: bool,
                    timeout: float | None) -> MpiProbeOp:
        """A probe (``take``: a matched probe) of ``(source, tag)``."""
        return MpiProbeOp(self, call, source, tag, take, timeout)

    def receive_probed(self, probe: MpiProbeOp, call: str, out: np.ndarray | None,
                       timeout: float | None) -> MpiRecvOp:
        """The receive of the message a matched probe took."""
        assert probe.probed is not None
        op = MpiRecvOp(self, call, probe.probed.source, probe.probed.tag, out, timeout)
        op.matched(probe.probed)
        return op


class MpiSendOp(_Operation):
    """A send in flight: done once MPI's request is (at once for a small message; once the
    receiver took a large one; once a receive matched it for a synchronous send)."""

    def __init__(self, channel: MpiChannel, call: str, dest: int,
                 timeout: float | None) -> None:
        super().__init__(channel, call, timeout)  # type: ignore[arg-type]
        self.mpi = channel
        self.dest = dest
        self.request: Any = None
        self.since = 0.0
        self._next_check = time.monotonic() + CHECK_EVERY

    def poll(self) -> bool:
        """Advance without blocking; True once the send has completed."""
        if self.done:
            return True
        channel = self.mpi
        if _completed(self.request):
            self.done = True
            if self in channel.in_flight:
                channel.in_flight.remove(self)
            return True
        if self not in channel.in_flight:
            self.since = time.monotonic()
            channel.in_flight.append(self)
        channel.drain()  # its receiver may wait for this rank's receives (`sendrecv`)
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + CHECK_EVERY
            why = channel.transport.lost(channel.group[self.dest])
            if why is not None:
                raise why[0]
        self._check_deadline(f"rank {self.dest} has not taken the message")
        return False

    def value(self) -> None:
        """A send returns nothing."""
        return None


class MpiRecvOp(Receiving):
    """A receive: waiting for a message, then (a large one) its bytes in flight."""

    def __init__(self, channel: MpiChannel, call: str, source: int, tag: int,
                 out: np.ndarray | None, timeout: float | None) -> None:
        super().__init__(channel, call, source, tag, timeout)  # type: ignore[arg-type]
        self.mpi = channel
        link = channel.link
        self.mpi_source = link.any_source if source == ANY_SOURCE else source
        self.mpi_tag = channel.check_tag(call, "tag", tag)
        self.out = out
        self.probed: Probed | None = None
        self.request: Any = None
        self.since = 0.0
        self._staged: np.ndarray | None = None
        self.error: BaseException | None = None
        self.result: tuple[Any, Status] | None = None

    def matched(self, probed: Probed) -> None:
        """MPI matched ``probed`` to this receive: receive its bytes."""
        link = self.mpi.link
        self.probed = probed
        if probed.head is None:
            view: Any = link.receive_header(probed)
            head: Head = unpack_header(view)
        else:  # a matched probe's, taken already
            view, head = probed.inline, probed.head
        flags, token, shape, n = head
        out = self.out
        if out is not None and n > out.nbytes:
            link.discard(probed, n)
            self.error = TruncationError(self.call, self.mpi.rank, probed.source, probed.tag,
                                         n, out.nbytes)
            return
        dtype = _BYTE if flags & OBJECT else dtype_from_token(token)
        data = out if out is not None else (np.empty(n, _BYTE) if flags & OBJECT
                                            else np.empty(shape, dtype))
        self.result = (data, Status(probed.source, probed.tag, n, dtype))
        if not probed.large:
            if n:
                byte_view(data)[:n] = view[HEADER_BYTES:HEADER_BYTES + n]
            self.done = True
        elif probed.early is not None:
            self.request, self._staged = probed.early
        else:
            self.request = link.ireceive_payload(probed.source, probed.tag,
                                                 byte_view(data)[:n])

    def _finish(self) -> None:
        """The large message's payload is in."""
        if self._staged is not None:
            assert self.result is not None
            data = self.result[0]
            byte_view(data)[:self._staged.nbytes] = byte_view(self._staged)
        self.done = True

    def _found(self) -> bool:
        return self.probed is not None

    def _withdraw(self) -> bool:
        if self in self.mpi.waiting:
            self.mpi.waiting.remove(self)
            return True
        return False

    def poll(self) -> bool:
        """Advance without blocking; True once the message is in place."""
        state = self._until_matched()
        if state is not None:
            return state
        in_flight = self.mpi.in_flight
        if _completed(self.request):
            if self in in_flight:
                in_flight.remove(self)
            self._finish()
            return True
        if self not in in_flight:
            self.since = time.monotonic()
            in_flight.append(self)
        assert self.probed is not None
        self._check_deadline(f"the payload from rank {self.probed.source} has not arrived")
        return False


class MpiProbeOp(_Awaiting):
    """A probe: done once MPI has a fitting message; a matched probe (``take``) takes it,
    so only its `Message` can receive it."""

    def __init__(self, channel: MpiChannel, call: str, source: int, tag: int, take: bool,
                 timeout: float | None) -> None:
        super().__init__(channel, call, source, tag, timeout)  # type: ignore[arg-type]
        self.mpi = channel
        self.take = take
        self.mpi_source = channel.link.any_source if source == ANY_SOURCE else source
        self.mpi_tag = channel.check_tag(call, "tag", tag)
        self.probed: Probed | None = None
        self._status: Status | None = None

    def _found(self) -> bool:
        channel = self.mpi
        channel.drain()  # the receives posted before take their messages first
        link = channel.link
        if self.take:
            probed = link.improbe(self.mpi_source, self.mpi_tag)
            if probed is None:
                return False
            link.take(probed)  # read at once: a later header of its (source, tag) may not
            assert probed.head is not None  # overtake it
            flags, token, _, n = probed.head
            self.probed = probed
            self._status = Status(probed.source, probed.tag, n,
                                  _BYTE if flags & OBJECT else dtype_from_token(token))
        else:
            found = link.iprobe(self.mpi_source, self.mpi_tag)
            if found is None:
                return False
            # MPI's status carries no type: a probe reports bytes (`Status.get_count`)
            self._status = Status(*found, _BYTE)
        self.done = True
        return True

    def poll(self) -> bool:
        """Advance without blocking; True once a fitting message has arrived."""
        if self.done or self._found():
            return True
        self._still_possible()
        return False

    def status(self) -> Status:
        """The status of the message found (its size in bytes)."""
        assert self._status is not None
        return self._status
