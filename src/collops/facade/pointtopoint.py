"""mpi4py's point-to-point methods over collops' own (``comm.send``/``recv``/…, the
contract shared with the point-to-point branch).

A method whose collops counterpart is missing raises `NotImplementedError` naming it, locally
on the rank that calls it: nothing is sent.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..errors import CollopsError
from ..runtime.p2p import loaded
from .buffers import message
from .constants import ANY_SOURCE, ANY_TAG
from .datatypes import _BY_DTYPE
from .exceptions import mpi_error, not_implemented
from .requests import Prequest, Request, Status, fill


class Message:
    """A message matched by `PointToPoint.Mprobe`, received by its `Recv`/`recv`."""

    __slots__ = ("_message", "_status")

    def __init__(self, message: Any = None) -> None:
        """Wrap a collops matched message (MESSAGE_NULL when None)."""
        self._message = message

    def __bool__(self) -> bool:
        return self._message is not None

    def _take(self, call: str) -> Any:
        if self._message is None:
            raise mpi_error(_null_message(call))
        taken, self._message = self._message, None
        return taken

    def Recv(self, buf: Any, status: Status | None = None) -> None:
        """Receive the matched message into ``buf``."""
        arr = message(buf, "Message.Recv", "buf", None, True)[0]
        try:
            fill(status, self._take("Message.Recv").recv(arr))
        except CollopsError as exc:
            raise mpi_error(exc) from None

    def Irecv(self, buf: Any) -> Request:
        """Non-blocking `Recv`."""
        arr = message(buf, "Message.Irecv", "buf", None, True)[0]
        return Request(self._take("Message.Irecv").irecv(arr))

    def recv(self, status: Status | None = None) -> Any:
        """Receive the matched message as an object."""
        try:
            data, got = _unpickled(self._take("Message.recv").recv())
        except CollopsError as exc:
            raise mpi_error(exc) from None
        fill(status, got)
        return data

    def irecv(self) -> Request:
        """Non-blocking `recv`."""
        return Request(self._take("Message.irecv").irecv(), _unpickled)


def _unpickled(value: tuple[Any, Any]) -> tuple[Any, Any]:
    """A received ``(payload, status)`` with the payload unpickled (None stays None)."""
    data, status = value
    return loaded(data), status


def _null_message(call: str) -> CollopsError:
    from ..errors import ArgumentError
    return ArgumentError(call, "message", None, "the message is null (already received)")


MESSAGE_NULL = Message()
#: the dtypes with a predefined datatype: an array of one goes to collops as it is (collops
#: checks its layout), anything else through the buffer-spec parser
_MAPPED = _BY_DTYPE


class _Both:
    """A send and a receive completing together; the receive's value is the value."""

    def __init__(self, send: Any, receive: Any) -> None:
        self.send, self.receive = send, receive

    def test(self) -> bool:
        """Advance both; True once both completed."""
        sent = self.send.test()
        return bool(self.receive.test() and sent)

    def wait(self) -> Any:
        """Wait for both; the receive's ``(data, Status)``."""
        self.send.wait()
        return self.receive.wait()


class PointToPoint:
    """The point-to-point methods of `Comm` (``self._comm`` is the collops communicator)."""

    _comm: Any

    def _p2p(self, method: str, call: str) -> Any:
        found = getattr(self._comm, method, None)
        if found is None:
            raise not_implemented(f"collops' Comm.{method}", call)
        return found

    def _do(self, method: str, call: str, *args: Any, **kwargs: Any) -> Any:
        fn = self._p2p(method, call)
        try:
            return fn(*args, **kwargs)
        except CollopsError as exc:
            raise mpi_error(exc) from None

    def _out(self, buf: Any, call: str) -> np.ndarray:
        return message(buf, call, "buf", self._comm.rank, True)[0]

    def _in(self, buf: Any, call: str) -> np.ndarray:
        return message(buf, call, "buf", self._comm.rank, False)[0]

    # -- buffers --------------------------------------------------------------------------
    def Send(self, buf: Any, dest: int, tag: int = 0) -> None:
        """Send ``buf`` to ``dest``."""
        comm = self._comm
        if type(buf) is not np.ndarray or buf.dtype not in _MAPPED:  # else: as it is
            buf = message(buf, "Send", "buf", comm.rank, False)[0]
        try:
            comm.send(buf, dest, tag)
        except CollopsError as exc:
            raise mpi_error(exc) from None

    Bsend = Rsend = Send

    def Ssend(self, buf: Any, dest: int, tag: int = 0) -> None:
        """Send, completing once the receive has matched."""
        self._do("ssend", "Ssend", self._in(buf, "Ssend"), dest, tag)

    def Isend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """Non-blocking Send."""
        return Request(self._do("isend", "Isend", self._in(buf, "Isend"), dest, tag))

    Ibsend = Irsend = Isend

    def Issend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """Non-blocking Ssend."""
        return Request(self._do("issend", "Issend", self._in(buf, "Issend"), dest, tag))

    def Recv(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG,
             status: Status | None = None) -> None:
        """Receive into ``buf``."""
        comm = self._comm
        if type(buf) is not np.ndarray or buf.dtype not in _MAPPED:  # else: as it is
            buf = message(buf, "Recv", "buf", comm.rank, True)[0]
        try:
            got = comm.recv(buf, source, tag)
        except CollopsError as exc:
            raise mpi_error(exc) from None
        if status is not None:
            fill(status, got)

    def Irecv(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Non-blocking Recv."""
        return Request(self._do("irecv", "Irecv", self._out(buf, "Irecv"), source, tag))

    def Sendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                 source: int = ANY_SOURCE, recvtag: int = ANY_TAG,
                 status: Status | None = None) -> None:
        """Send ``sendbuf`` to ``dest`` and receive into ``recvbuf`` at once."""
        out = None if recvbuf is None else self._out(recvbuf, "Sendrecv")
        fill(status, self._do("sendrecv", "Sendrecv", self._in(sendbuf, "Sendrecv"), dest,
                              sendtag, out, source, recvtag))

    def Isendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                  source: int = ANY_SOURCE, recvtag: int = ANY_TAG) -> Request:
        """Non-blocking Sendrecv (MPI-4)."""
        out = None if recvbuf is None else self._out(recvbuf, "Isendrecv")
        receive = self._do("irecv", "Isendrecv", out, source, recvtag)
        send = self._do("isend", "Isendrecv", self._in(sendbuf, "Isendrecv"), dest, sendtag)
        return Request(_Both(send, receive))

    def Isendrecv_replace(self, buf: Any, dest: int, sendtag: int = 0,
                          source: int = ANY_SOURCE, recvtag: int = ANY_TAG) -> Request:
        """Non-blocking Sendrecv_replace (MPI-4)."""
        arr = self._out(buf, "Isendrecv_replace")
        receive = self._do("irecv", "Isendrecv_replace", arr, source, recvtag)
        send = self._do("isend", "Isendrecv_replace", arr.copy(), dest, sendtag)
        return Request(_Both(send, receive))

    def Sendrecv_replace(self, buf: Any, dest: int, sendtag: int = 0,
                         source: int = ANY_SOURCE, recvtag: int = ANY_TAG,
                         status: Status | None = None) -> None:
        """Send ``buf`` and receive into it."""
        arr = self._out(buf, "Sendrecv_replace")
        fill(status, self._do("sendrecv", "Sendrecv_replace", arr.copy(), dest, sendtag, arr,
                              source, recvtag))

    def Send_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """Persistent Send: each Start sends ``buf`` as it is then."""
        arr = self._in(buf, "Send_init")
        isend = self._p2p("isend", "Send_init")
        return Prequest(lambda: isend(arr, dest, tag))

    Bsend_init = Rsend_init = Send_init

    def Ssend_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """Persistent Ssend."""
        arr = self._in(buf, "Ssend_init")
        issend = self._p2p("issend", "Ssend_init")
        return Prequest(lambda: issend(arr, dest, tag))

    def Recv_init(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Prequest:
        """Persistent Recv."""
        arr = self._out(buf, "Recv_init")
        irecv = self._p2p("irecv", "Recv_init")
        return Prequest(lambda: irecv(arr, source, tag))

    # -- probes ----------------------------------------------------------------------------
    def Probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
              status: Status | None = None) -> bool:
        """Block until a matching message can be received; True."""
        fill(status, self._do("probe", "Probe", source, tag))
        return True

    probe = Probe

    def Iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
               status: Status | None = None) -> bool:
        """Whether a matching message can be received now."""
        got = self._do("iprobe", "Iprobe", source, tag)
        if got is None:
            return False
        fill(status, got)
        return True

    iprobe = Iprobe

    def Mprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
               status: Status | None = None) -> Message:
        """Match a message (to be received by the returned `Message` only)."""
        found = self._do("mprobe", "Mprobe", source, tag)
        fill(status, getattr(found, "status", None))
        return Message(found)

    mprobe = Mprobe

    def Improbe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
                status: Status | None = None) -> Message | None:
        """`Mprobe` without blocking (None when nothing matches)."""
        found = self._do("improbe", "Improbe", source, tag)
        if found is None:
            return None
        fill(status, getattr(found, "status", None))
        return Message(found)

    improbe = Improbe

    # -- objects ---------------------------------------------------------------------------
    def send(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Send a picklable object."""
        self._do("send_object", "send", obj, dest, tag)

    bsend = send

    def ssend(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Send an object, completing once matched."""
        self.issend(obj, dest, tag).wait()

    def isend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        """Non-blocking send of an object."""
        return Request(self._do("isend_object", "isend", obj, dest, tag))

    ibsend = isend

    def issend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        """Non-blocking synchronous send of an object (complete once matched): the object
        send of collops' point-to-point, made synchronous."""
        from ..runtime.p2p import P2PRequest
        start = self._p2p("_start_send", "issend")
        try:
            return Request(P2PRequest(self._comm, start("issend", obj, dest, tag, True, None,
                                                        True)))
        except CollopsError as exc:
            raise mpi_error(exc) from None

    def recv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG,
             status: Status | None = None) -> Any:
        """Receive an object (``buf``, deprecated in mpi4py, is not needed here: a
        `UserWarning` says so, as mpi4py's does)."""
        if buf is not None:
            warnings.warn("the 'buf' argument is deprecated", UserWarning, stacklevel=2)
        obj, got = self._do("recv_object", "recv", source, tag)
        fill(status, got)
        return obj

    def irecv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Non-blocking receive of an object; ``wait()`` returns it."""
        return Request(self._do("irecv_object", "irecv", source, tag))

    def sendrecv(self, sendobj: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                 source: int = ANY_SOURCE, recvtag: int = ANY_TAG,
                 status: Status | None = None) -> Any:
        """Send an object and receive one at once."""
        obj, got = self._do("sendrecv_object", "sendrecv", sendobj, dest, sendtag,
                            source=source, recvtag=recvtag)
        fill(status, got)
        return obj
