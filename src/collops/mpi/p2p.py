"""Point-to-point messages on MPI's own point-to-point (`docs/p2p.md`, "Over MPI").

Each collops communicator has two MPI communicators of its own for point-to-point, made where
the collops communicator is made (`MpiTransport.communicator_made`, collective over its
ranks; the world's with the transport), their ranks in the collops communicator's order. A
collops message is MPI's message on the first, with the user's tag as MPI tag, so MPI
matches it: wildcards, non-overtaking order per (source, tag, communicator), a synchronous
send is ``MPI_Issend``. It begins with a `HEADER_BYTES` header (flags, size, the sender's
dtype token and shape):

* a **small** message (header and payload at most `COPY_MAX` bytes) is one MPI message,
  copied through a scratch buffer at each end; a probe's count less the header is its size;
* a **large** one is its header alone (`LARGE_HEADER` bytes, which no small message has),
  then the payload, straight from the user's array, on the second communicator with the same
  tag. The receiver that matched the header posts ``MPI_Irecv`` of the payload straight into
  its buffer at once — so payloads of one (source, tag) are taken in their headers' order —
  and a probe reads the payload's size there (``MPI_Iprobe``).

A receive takes its header with ``MPI_Improbe``/``MPI_Mrecv``, so it knows the size before
any byte lands: truncation is an error naming both sizes, and a receive with no buffer
allocates the sender's dtype and shape.
"""

from __future__ import annotations

import struct
import time
from typing import Any

import numpy as np

from ..errors import ArgumentError, TransportError
from .transport import mpi_error

#: the header of every message: flags, payload bytes, dimensions, dtype token length, token,
#: dims; a small message's payload follows it
HEADER_BYTES = 128
#: a large message's header alone is this long (shorter than any small message)
LARGE_HEADER = HEADER_BYTES - 8
#: largest small message (header included): one MPI message, copied at both ends
COPY_MAX = 64 * 1024
#: header flag: the payload is a pickled object
OBJECT = 1
#: seconds a probe waits for the payload of a large message whose header it saw
PAYLOAD_DUE = 10.0
_HEAD = struct.Struct("<BBBq")
_ROOM = LARGE_HEADER - _HEAD.size
_BYTE = np.dtype(np.uint8)

Head = tuple[int, str, tuple[int, ...], int]


def pack_header(flags: int, token: str, shape: tuple[int, ...], nbytes: int, call: str,
                rank: int) -> bytes:
    """The header of a message of ``nbytes`` bytes of dtype ``token`` and ``shape``."""
    raw = token.encode()
    if len(raw) + 8 * len(shape) > _ROOM:
        raise ArgumentError(call, "x", shape, f"over MPI a message's dtype token and shape "
                            f"take at most {_ROOM} bytes (here {len(raw)} + 8 x {len(shape)} "
                            "dimensions): reshape it", rank)
    head = (_HEAD.pack(flags, len(shape), len(raw), nbytes) + raw
            + struct.pack(f"<{len(shape)}q", *shape))
    return head + bytes(HEADER_BYTES - len(head))


def unpack_header(buf: Any) -> Head:
    """``(flags, dtype token, shape, payload bytes)`` of a header (`pack_header`)."""
    flags, ndim, tlen, nbytes = _HEAD.unpack_from(buf)
    at = _HEAD.size
    token = bytes(buf[at: at + tlen]).decode()
    shape = struct.unpack_from(f"<{ndim}q", buf, at + tlen)
    return flags, token, shape, nbytes


class Probed:
    """A message MPI matched (``MPI_Improbe``) to a receive or a matched probe. A matched
    probe's is taken at once (``head`` and, small, ``inline``; large, ``early``: the
    payload's receive into a buffer of its own), so no later header overtakes it."""

    __slots__ = ("message", "source", "tag", "count", "head", "inline", "early")

    def __init__(self, message: Any, source: int, tag: int, count: int) -> None:
        self.message, self.source, self.tag, self.count = message, source, tag, count
        self.head: Head | None = None
        self.inline: bytes | None = None
        self.early: tuple[Any, np.ndarray] | None = None

    @property
    def large(self) -> bool:
        """Whether the payload follows on its own (the message is its header alone)."""
        return self.count == LARGE_HEADER


class Link:
    """One collops communicator's MPI communicators for point-to-point, on this rank."""

    def __init__(self, transport: Any, mc: Any, data: Any) -> None:
        self.transport = transport
        self.mc, self.data = mc, data
        MPI = transport._MPI
        self._MPI = MPI
        self._status = MPI.Status()
        self._byte = MPI.BYTE
        self._scratch = bytearray(COPY_MAX)
        self._scratch_view = memoryview(self._scratch)
        self.any_source, self.any_tag = MPI.ANY_SOURCE, MPI.ANY_TAG
        #: the largest tag MPI takes (at least 32767; MPICH: 2**29 - 1)
        self.tag_ub = int(mc.Get_attr(MPI.TAG_UB) or 32767)
        #: requests nobody waits for (large headers, discarded payloads) with their buffers,
        #: and sends in flight: completed before MPI is finalized (`flush`)
        self.background: list[tuple[Any, Any]] = []

    def _failed(self, what: str, exc: Any) -> Exception:
        return mpi_error(self.transport.rank, what, exc)

    def _keep(self, request: Any, keep: Any) -> None:
        background = self.background
        if len(background) > 64:
            background[:] = [item for item in background if not item[0].Get_status()]
        background.append((request, keep))

    # -- sending -------------------------------------------------------------------------------
    def isend(self, header: bytes, payload: memoryview, dest: int, tag: int,
              sync: bool) -> Any:
        """Start sending a message (its header, then its payload); its MPI request."""
        n = payload.nbytes
        self.transport._sends += 1
        try:
            if HEADER_BYTES + n <= COPY_MAX:
                packet = bytearray(header)
                packet += payload
                request = (self.mc.Issend if sync else self.mc.Isend)(packet, dest, tag)
                keep: Any = packet
            else:
                first = header[:LARGE_HEADER]
                self._keep(self.mc.Isend(first, dest, tag), first)
                request = (self.data.Issend if sync else self.data.Isend)(payload, dest, tag)
                keep = payload
        except self._MPI.Exception as exc:
            raise self._failed(f"sending {n} bytes to rank {dest} (tag {tag})", exc) from exc
        self._keep(request, keep)
        return request

    def send_small(self, header: bytes, payload: bytes, dest: int, tag: int) -> Any:
        """Send a small message (header and payload at most `COPY_MAX` bytes) as one MPI
        message: None once it completed at once, else its MPI request in flight."""
        packet = header + payload
        self.transport._sends += 1
        try:
            request = self.mc.Isend(packet, dest, tag)
            if request.Test():
                return None
        except self._MPI.Exception as exc:
            raise self._failed(f"sending {len(payload)} bytes to rank {dest} (tag {tag})",
                               exc) from exc
        self._keep(request, packet)
        return request

    def flush(self, end: float) -> None:
        """Let the requests still in flight complete (until ``time.monotonic()`` reaches
        ``end``), as ``MPI_Finalize`` would."""
        while self.background and time.monotonic() < end:
            self.background = [item for item in self.background if not item[0].Test()]
            if self.background:
                time.sleep(1e-3)

    # -- receiving -----------------------------------------------------------------------------
    def improbe(self, source: int, tag: int) -> Probed | None:
        """Take the earliest message a receive of ``(source, tag)`` would (None: none yet)."""
        status = self._status
        try:
            message = self.mc.Improbe(source, tag, status)
        except self._MPI.Exception as exc:
            raise self._failed(f"probing for a message from rank {source}", exc) from exc
        if message is None:
            return None
        return Probed(message, status.Get_source(), status.Get_tag(),
                      status.Get_count(self._MPI.BYTE))

    def receive_small(self, source: int, tag: int, spin: bool
                      ) -> tuple[memoryview, int] | Probed | None:
        """The earliest message a receive from rank ``source`` (not a wildcard) with ``tag``
        would take, received as ``MPI_Recv`` would (one ``MPI_Irecv`` into the scratch
        buffer, which every message of this communicator fits, tested for the spin stage of
        the transport's wait if ``spin``, else once, then cancelled): a small one as a view
        of it (valid until the next receive) and its tag; a large one's header as a `Probed`
        whose header is in (its payload is still to receive); None if none came."""
        status = self._status
        try:
            request = self.mc.Irecv(self._scratch_view, source, tag)
            done = request.Test(status)
            if not done and spin and self.transport._spin_seconds > 0:
                end = time.monotonic() + self.transport._spin_seconds
                while not done and time.monotonic() < end:
                    done = request.Test(status)
            if not done:
                request.Cancel()
                request.Wait(status)
                if status.Is_cancelled():
                    return None
            count = status.Get_count(self._byte)
        except self._MPI.Exception as exc:
            raise self._failed(f"receiving a message from rank {source}", exc) from exc
        view = self._scratch_view[:count]
        found = tag if tag != self.any_tag else status.Get_tag()
        if count == LARGE_HEADER:
            probed = Probed(None, source, found, count)
            probed.head, probed.inline = unpack_header(view), bytes(view)
            return probed
        return view, found

    def iprobe(self, source: int, tag: int) -> tuple[int, int, int] | None:
        """``(source, tag, payload bytes)`` of the message a receive of ``(source, tag)``
        would take, without taking it (None: none yet)."""
        status, MPI = self._status, self._MPI
        try:
            if not self.mc.Iprobe(source, tag, status):
                return None
            found, count = (status.Get_source(), status.Get_tag()), status.Get_count(MPI.BYTE)
            if count != LARGE_HEADER:
                return (*found, count - HEADER_BYTES)
            # the earliest payload of that (source, tag) not yet received is this message's
            due = time.monotonic() + PAYLOAD_DUE
            while not self.data.Iprobe(*found, status):
                if time.monotonic() > due:
                    raise TransportError(f"rank {self.transport.rank}: the payload of a "
                                         f"message from rank {found[0]} (tag {found[1]}) "
                                         f"did not follow its header within {PAYLOAD_DUE} s")
            return (*found, status.Get_count(MPI.BYTE))
        except self._MPI.Exception as exc:
            raise self._failed(f"probing for a message from rank {source}", exc) from exc

    def receive_header(self, probed: Probed) -> memoryview:
        """Receive a matched message (a small one, or a large one's header): a view of it,
        valid until the next receive."""
        view = self._scratch_view[:probed.count]
        try:
            probed.message.Recv(view)
        except self._MPI.Exception as exc:
            raise self._failed(f"receiving a message from rank {probed.source}", exc) from exc
        return view

    def ireceive_payload(self, source: int, tag: int, into: Any) -> Any:
        """Post the receive of the payload of the large message from ``(source, tag)`` whose
        header was just received; the MPI request."""
        try:
            return self.data.Irecv(into, source, tag)
        except self._MPI.Exception as exc:
            raise self._failed(f"receiving a payload from rank {source}", exc) from exc

    def take(self, probed: Probed) -> None:
        """Receive a matched probe's message now (`Probed`)."""
        view = self.receive_header(probed)
        probed.head = unpack_header(view)
        if probed.large:
            buf = np.empty(probed.head[3], _BYTE)
            probed.early = (self.ireceive_payload(probed.source, probed.tag, buf), buf)
        else:
            probed.inline = bytes(view)

    def discard(self, probed: Probed, nbytes: int) -> None:
        """Take the payload of a large message nobody reads (a truncated receive)."""
        if probed.large and probed.early is None:
            buf = np.empty(nbytes, _BYTE)
            self._keep(self.ireceive_payload(probed.source, probed.tag, buf), buf)

    def free(self) -> None:
        """Free the MPI communicators (collective over the ranks, as the collops one's
        free)."""
        try:
            self.mc.Free()
            self.data.Free()
        except self._MPI.Exception as exc:
            raise self._failed("freeing a point-to-point MPI communicator", exc) from exc


# -- each collops communicator's links, kept by the transport ------------------------------------
Links = dict[tuple[tuple[int, ...], int], Any]


def make_link(transport: Any, links: Links, group: tuple[int, ...], context: int) -> None:
    """Make the two MPI communicators of collops communicator ``(group, context)`` (collective
    over ``group``, where the collops communicator is made, under the caller's
    `MpiTransport.blocking` guard); `link_of` wraps them."""
    if (group, context) in links:
        return
    MPI = transport._MPI
    members = transport.comm.Get_group().Incl(list(group))
    try:
        mc = transport.comm.Create_group(members, 0x4000 | (context & 0x3FFF))
        mc.Set_errhandler(MPI.ERRORS_RETURN)
        data = mc.Dup()
    except MPI.Exception as exc:
        raise mpi_error(transport.rank, "making the point-to-point MPI communicators over "
                        f"ranks {list(group)}", exc) from exc
    finally:
        members.Free()
    links[(group, context)] = (mc, data)


def link_comm(links: Links, group: tuple[int, ...], context: int, second: bool = False) -> Any:
    """The first MPI communicator of collops communicator ``(group, context)``'s link (None
    if it has none): the parent of its other MPI communicators (`NativeComms`); ``second``:
    the second, the parent of an ``idup``'s."""
    found = links.get((group, context))
    if found is None:
        return None
    if isinstance(found, Link):
        return found.data if second else found.mc
    return found[1] if second else found[0]


def link_of(transport: Any, links: Links, group: tuple[int, ...], context: int) -> Link | None:
    """The `Link` of collops communicator ``(group, context)``, None if it has no MPI
    communicators (one not made through `make_link`)."""
    found = links.get((group, context))
    if found is None or isinstance(found, Link):
        return found
    link = links[(group, context)] = Link(transport, *found)
    return link


def free_link(transport: Any, links: Links, group: tuple[int, ...], context: int) -> None:
    """Free collops communicator ``(group, context)``'s MPI communicators, if it has any."""
    found = links.pop((group, context), None)
    if found is not None:
        (found if isinstance(found, Link) else Link(transport, *found)).free()


def flush_links(links: Links, end: float) -> None:
    """Let every link's requests in flight complete, until ``end`` (`Link.flush`)."""
    for link in links.values():
        if isinstance(link, Link):
            link.flush(end)
