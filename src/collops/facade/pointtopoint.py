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
from ..runtime.overlap import may_overlap
from ..runtime.p2p import loaded
from ..runtime.status import Status as CollopsStatus
from .buffers import fast_array, message
from .constants import ANY_SOURCE, ANY_TAG, PROC_NULL
from .datatypes import _BY_DTYPE
from .exceptions import mpi_error, not_implemented
from .handles import Handle
from .requests import Prequest, Request, Status, fill, new_request
from .staging import Stage


class _NoProc:
    """The handle of ``MESSAGE_NO_PROC``: what a matched probe of ``PROC_NULL`` gives; its
    receive ends at once with PROC_NULL's status and leaves the buffer as it is."""

    __slots__ = ()

    def status(self) -> Any:
        """PROC_NULL's status (source PROC_NULL, tag ANY_TAG, no data)."""
        return CollopsStatus(PROC_NULL, ANY_TAG, 0)

    def recv(self, out: Any = None) -> tuple[Any, Any]:
        """Nothing to receive: ``(out, PROC_NULL's status)``."""
        return out, self.status()

    def irecv(self, out: Any = None) -> Any:
        """A receive already complete (`_Received`)."""
        return _Received(self.recv(out))


class _Received:
    """A collops-request stand-in whose receive is already complete (``MESSAGE_NO_PROC``'s)."""

    __slots__ = ("_value",)

    def __init__(self, value: Any) -> None:
        self._value = value

    def test(self) -> bool:
        """Complete already."""
        return True

    def wait(self) -> Any:
        """The receive's ``(data, status)``."""
        return self._value


_NO_PROC = _NoProc()


class Message(Handle):
    """A message matched by `PointToPoint.Mprobe`, received by its `Recv`/`recv` (mpi4py's
    handle semantics: ``Message(m)`` is another handle of ``m``; receiving through a handle
    makes it null, except the predefined ``MESSAGE_NO_PROC``, which stays as it is)."""

    __slots__ = ("_message", "__weakref__")
    _message: Any

    def __init__(self, message: Any = None) -> None:
        """Wrap a collops matched message (MESSAGE_NULL when None), or copy a handle."""
        self._message = message._message if isinstance(message, Message) else message

    def __bool__(self) -> bool:
        return self._message is not None

    def _handle(self) -> Any:
        """What identifies the message (None when null)."""
        return self._message

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return self._message is other._message

    def __hash__(self) -> int:
        return id(self._message)

    def __repr__(self) -> str:
        state = ("null" if self._message is None else
                 "no-proc" if self._message is _NO_PROC else "matched")
        return f"<collops.MPI.Message {state}>"

    def __reduce__(self) -> Any:
        """Pickled as mpi4py's: MESSAGE_NULL and MESSAGE_NO_PROC are themselves, copies of
        them equal handles; a matched message cannot be pickled (it belongs to its process)."""
        for name in ("MESSAGE_NULL", "MESSAGE_NO_PROC"):
            if self is globals().get(name):
                return name
        if self._message is None:
            return Message, ()
        if self._message is _NO_PROC:
            return Message, (MESSAGE_NO_PROC,)
        raise ValueError(f"cannot pickle {self!r}: a matched message belongs to its process")

    def _take(self, call: str) -> Any:
        taken = self._message
        if taken is None:
            raise mpi_error(_null_message(call))
        if self is not MESSAGE_NO_PROC:
            self._message = None
        return taken

    def Recv(self, buf: Any, status: Status | None = None) -> None:
        """Receive the matched message into ``buf``."""
        stage = Stage()
        arr = message(buf, "Message.Recv", "buf", None, True, 1, stage)[0]
        stage.pack()
        try:
            fill(status, self._take("Message.Recv").recv(arr))
        except CollopsError as exc:
            raise mpi_error(exc) from None
        stage.unpack()

    def Irecv(self, buf: Any) -> Request:
        """Non-blocking `Recv`."""
        stage = Stage()
        arr = message(buf, "Message.Irecv", "buf", None, True, 1, stage)[0]
        stage.pack()
        return Request(self._take("Message.Irecv").irecv(arr), stage.finisher())

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

    @classmethod
    def Probe(cls, comm: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG,
              status: Status | None = None) -> Message:
        """``comm.Mprobe(source, tag, status)``."""
        return comm.Mprobe(source, tag, status)  # type: ignore[no-any-return]

    @classmethod
    def Iprobe(cls, comm: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG,
               status: Status | None = None) -> Message | None:
        """``comm.Improbe(source, tag, status)``."""
        return comm.Improbe(source, tag, status)  # type: ignore[no-any-return]

    probe = Probe
    iprobe = Iprobe


def _matched(found: Any) -> Message:
    """A new handle of the message collops' matched probe found: ``MESSAGE_NO_PROC``'s for
    a probe of PROC_NULL (whose status names PROC_NULL, as no real message's does)."""
    return Message(_NO_PROC if found.status.source == PROC_NULL else found)


def _unpickled(value: tuple[Any, Any]) -> tuple[Any, Any]:
    """A received ``(payload, status)`` with the payload unpickled (None stays None)."""
    data, status = value
    return loaded(data), status


def _null_message(call: str) -> CollopsError:
    from ..errors import ArgumentError
    return ArgumentError(call, "message", None, "the message is null (already received)")


MESSAGE_NULL = Message()
MESSAGE_NO_PROC = Message(_NO_PROC)
#: the dtypes with a predefined datatype: an array of one goes to collops as it is (collops
#: checks its layout), anything else through the buffer-spec parser
_MAPPED = _BY_DTYPE


def _as_is(buf: Any) -> np.ndarray | None:
    """The array collops takes as it is for the commonest specs — an ndarray of a predefined
    type's dtype, ``[ndarray, its own predefined type]`` — or None: parse the spec."""
    if type(buf) is np.ndarray:
        return buf if buf.dtype in _MAPPED else None
    return fast_array(buf)


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

    def _out(self, buf: Any, call: str, stage: Stage) -> np.ndarray:
        arr = _as_is(buf)
        return message(buf, call, "buf", self._comm.rank, True, 1, stage)[0] if arr is None \
            else arr

    def _in(self, buf: Any, call: str, stage: Stage) -> np.ndarray:
        arr = _as_is(buf)
        return message(buf, call, "buf", self._comm.rank, False, 1, stage)[0] if arr is None \
            else arr

    def _staged(self, method: str, call: str, stage: Stage, *args: Any) -> Request:
        """`Request` of ``comm.<method>(*args)`` started now, its gapped buffers packed first
        and a receive's written back when it completes."""
        stage.pack()
        return Request(self._do(method, call, *args), stage.finisher())

    # -- buffers --------------------------------------------------------------------------
    def Send(self, buf: Any, dest: int, tag: int = 0) -> None:
        """Send ``buf`` to ``dest``."""
        comm = self._comm
        arr = buf if type(buf) is np.ndarray and buf.dtype in _MAPPED else _as_is(buf)
        if arr is None:  # else: as it is
            stage = Stage()
            arr = message(buf, "Send", "buf", comm.rank, False, 1, stage)[0]
            stage.pack()
        try:
            comm.send(arr, dest, tag)
        except CollopsError as exc:
            raise mpi_error(exc) from None

    Bsend = Rsend = Send

    def Ssend(self, buf: Any, dest: int, tag: int = 0) -> None:
        """Send, completing once the receive has matched."""
        stage = Stage()
        arr = self._in(buf, "Ssend", stage)
        stage.pack()
        self._do("ssend", "Ssend", arr, dest, tag)

    def Isend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """Non-blocking Send."""
        if type(buf) is np.ndarray and buf.dtype in _MAPPED:  # as it is: nothing staged
            try:
                return new_request(self._comm.isend(buf, dest, tag))
            except CollopsError as exc:
                raise mpi_error(exc) from None
        stage = Stage()
        return self._staged("isend", "Isend", stage, self._in(buf, "Isend", stage), dest, tag)

    Ibsend = Irsend = Isend

    def Issend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """Non-blocking Ssend."""
        stage = Stage()
        return self._staged("issend", "Issend", stage, self._in(buf, "Issend", stage), dest,
                            tag)

    def Recv(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG,
             status: Status | None = None) -> None:
        """Receive into ``buf``."""
        comm = self._comm
        stage = None
        arr = buf if type(buf) is np.ndarray and buf.dtype in _MAPPED else _as_is(buf)
        if arr is None:  # else: as it is
            stage = Stage()
            arr = message(buf, "Recv", "buf", comm.rank, True, 1, stage)[0]
            stage.pack()
        try:
            got = comm.recv(arr, source, tag)
        except CollopsError as exc:
            raise mpi_error(exc) from None
        if stage:
            stage.unpack()
        if status is not None:
            fill(status, got)

    def Irecv(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Non-blocking Recv."""
        if type(buf) is np.ndarray and buf.dtype in _MAPPED:  # as it is: nothing staged
            try:
                return new_request(self._comm.irecv(buf, source, tag))
            except CollopsError as exc:
                raise mpi_error(exc) from None
        stage = Stage()
        return self._staged("irecv", "Irecv", stage, self._out(buf, "Irecv", stage), source,
                            tag)

    def Sendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                 source: int = ANY_SOURCE, recvtag: int = ANY_TAG,
                 status: Status | None = None) -> None:
        """Send ``sendbuf`` to ``dest`` and receive into ``recvbuf`` at once."""
        if type(sendbuf) is np.ndarray and type(recvbuf) is np.ndarray \
                and sendbuf.dtype in _MAPPED and recvbuf.dtype in _MAPPED:  # nothing staged
            try:
                got = self._comm.sendrecv(sendbuf, dest, sendtag, recvbuf, source, recvtag)
            except CollopsError as exc:
                raise mpi_error(exc) from None
            if status is not None:
                fill(status, got)
            return
        stage = Stage()
        out = None if recvbuf is None else self._out(recvbuf, "Sendrecv", stage)
        x = self._in(sendbuf, "Sendrecv", stage)
        stage.pack()
        fill(status, self._do("sendrecv", "Sendrecv", x, dest, sendtag, out, source, recvtag))
        stage.unpack()

    def Isendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                  source: int = ANY_SOURCE, recvtag: int = ANY_TAG) -> Request:
        """Non-blocking Sendrecv (MPI-4)."""
        stage = Stage()
        out = None if recvbuf is None else self._out(recvbuf, "Isendrecv", stage)
        x = self._in(sendbuf, "Isendrecv", stage)
        stage.pack()
        if out is not None and may_overlap(out, x):  # the receive may complete at once
            x = x.copy()
        receive = self._do("irecv", "Isendrecv", out, source, recvtag)
        send = self._do("isend", "Isendrecv", x, dest, sendtag)
        return Request(_Both(send, receive), stage.finisher())

    def Isendrecv_replace(self, buf: Any, dest: int, sendtag: int = 0,
                          source: int = ANY_SOURCE, recvtag: int = ANY_TAG) -> Request:
        """Non-blocking Sendrecv_replace (MPI-4)."""
        stage = Stage()
        arr = self._out(buf, "Isendrecv_replace", stage)
        stage.pack()
        outgoing = arr.copy()  # before the receive is posted: it may complete at once
        receive = self._do("irecv", "Isendrecv_replace", arr, source, recvtag)
        send = self._do("isend", "Isendrecv_replace", outgoing, dest, sendtag)
        return Request(_Both(send, receive), stage.finisher())

    def Sendrecv_replace(self, buf: Any, dest: int, sendtag: int = 0,
                         source: int = ANY_SOURCE, recvtag: int = ANY_TAG,
                         status: Status | None = None) -> None:
        """Send ``buf`` and receive into it."""
        stage = Stage()
        arr = self._out(buf, "Sendrecv_replace", stage)
        stage.pack()
        fill(status, self._do("sendrecv", "Sendrecv_replace", arr.copy(), dest, sendtag, arr,
                              source, recvtag))
        stage.unpack()

    def Send_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """Persistent Send: each Start sends ``buf`` as it is then."""
        return self._persistent("isend", "Send_init", buf, False, dest, tag)

    Bsend_init = Rsend_init = Send_init

    def Ssend_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """Persistent Ssend."""
        return self._persistent("issend", "Ssend_init", buf, False, dest, tag)

    def Recv_init(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Prequest:
        """Persistent Recv."""
        return self._persistent("irecv", "Recv_init", buf, True, source, tag)

    def _persistent(self, method: str, call: str, buf: Any, receive: bool, peer: int,
                    tag: int) -> Prequest:
        """A persistent request each of whose starts runs ``comm.<method>(arr, peer, tag)``
        (gapped buffers packed at each start, a receive's written back at each completion)."""
        stage = Stage()
        arr = (self._out if receive else self._in)(buf, call, stage)
        start = self._p2p(method, call)

        def begin() -> Any:
            stage.pack()
            return start(arr, peer, tag)
        return Prequest(begin, stage.finisher())

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
        fill(status, found.status)
        return _matched(found)

    mprobe = Mprobe

    def Improbe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
                status: Status | None = None) -> Message | None:
        """`Mprobe` without blocking (None when nothing matches)."""
        found = self._do("improbe", "Improbe", source, tag)
        if found is None:
            return None
        fill(status, found.status)
        return _matched(found)

    improbe = Improbe

    # -- objects ---------------------------------------------------------------------------
    def send(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Send a picklable object."""
        try:
            self._comm.send_object(obj, dest, tag)
        except CollopsError as exc:
            raise mpi_error(exc) from None

    bsend = send

    def ssend(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Send an object, completing once matched."""
        self.issend(obj, dest, tag).wait()

    def isend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        """Non-blocking send of an object."""
        try:
            return new_request(self._comm.isend_object(obj, dest, tag))
        except CollopsError as exc:
            raise mpi_error(exc) from None

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
        try:
            obj, got = self._comm.recv_object(source, tag)
        except CollopsError as exc:
            raise mpi_error(exc) from None
        if status is not None:
            fill(status, got)
        return obj

    def irecv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Non-blocking receive of an object; ``wait()`` returns it."""
        try:
            return new_request(self._comm.irecv_object(source, tag))
        except CollopsError as exc:
            raise mpi_error(exc) from None

    def sendrecv(self, sendobj: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                 source: int = ANY_SOURCE, recvtag: int = ANY_TAG,
                 status: Status | None = None) -> Any:
        """Send an object and receive one at once."""
        obj, got = self._do("sendrecv_object", "sendrecv", sendobj, dest, sendtag,
                            source=source, recvtag=recvtag)
        fill(status, got)
        return obj
