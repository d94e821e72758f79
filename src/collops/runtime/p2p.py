"""Point-to-point messaging as methods of `Comm` (MPI's send, receive, probe and their
non-blocking, synchronous, matched and object forms); the protocol is in `p2p_channel`.

Blocking calls run their operation to completion through the communicator's `Progress`, so
non-blocking collectives advance meanwhile; non-blocking calls return a `P2PRequest`, the
collectives' `Request` with `cancel` for receives. Arguments are checked before anything is
sent: ranks in range (or `PROC_NULL`, or `ANY_SOURCE` for a source), tags in 0…`TAG_UB`
(or `ANY_TAG` for a receive), buffers C-contiguous.
"""

from __future__ import annotations

import pickle
from collections.abc import Generator
from typing import Any

import numpy as np

from ..datatypes import as_array, dtype_token
from ..errors import ArgumentError
from .arguments import checked_int, writeable_buffer
from .commbase import CommBase
from .matching import ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB
from .overlap import may_overlap
from .p2p_channel import Channel
from .p2p_mpi import MpiChannel
from .request import Request
from .status import Status

_PICKLE = 5
_OBJECT_TOKEN = dtype_token(np.dtype(np.uint8))
_NULL_STATUS = Status(PROC_NULL, ANY_TAG, 0)
#: dtype -> its token in envelopes (`datatypes.dtype_token`)
_TOKENS: dict[np.dtype, str] = {}


def loaded(data: Any) -> Any:
    """The object a received message holds: None for no message (PROC_NULL) or an empty one
    (a buffer send of nothing, as mpi4py reads it)."""
    return None if data is None or len(data) == 0 else pickle.loads(data)


def _one(op: Any, unpickle: bool = False) -> Generator[Any, None, Any]:
    """The phases of a point-to-point request: one operation, then its value."""
    yield op
    if unpickle:
        data, status = op.value()
        return loaded(data), status
    return op.value()


class P2PRequest(Request):
    """A point-to-point operation in flight; a receive's may be cancelled."""

    def __init__(self, comm: CommBase, op: Any, unpickle: bool = False) -> None:
        self._op = op
        super().__init__(comm, _one(op, unpickle))

    def cancel(self) -> None:
        """Withdraw a receive that has not matched yet: its wait then returns
        ``(out, Status(cancelled=True))`` (MPI_Cancel); no effect on a send or a matched
        receive."""
        cancel = getattr(self._op, "cancel", None)
        if cancel is not None:
            cancel()


class Message:
    """A message taken by a matched probe (`Comm.mprobe`): only its own receive gets it."""

    def __init__(self, comm: P2P, op: Any) -> None:
        self._comm = comm
        self._op = op
        self._received = False
        #: the message's status (PROC_NULL's for a probe of PROC_NULL)
        self.status = _NULL_STATUS if op is None else op.status()

    def _start(self, out: Any, call: str) -> Any:
        if self._received:
            raise ArgumentError(call, "message", self.status, "this message was received "
                                "already", self._comm.rank)
        self._received = True
        if self._op is None:
            return None
        comm = self._comm
        return comm._channel().receive_probed(self._op, call, comm._recv_buffer(call, out),
                                              comm._timeout(None, call))

    def recv(self, out: Any = None) -> tuple[Any, Status]:
        """Receive this message: ``(data, Status)`` as `Comm.recv`."""
        op = self._start(out, "Message.recv")
        if op is None:
            return out, _NULL_STATUS
        return self._comm._complete(op)

    def irecv(self, out: Any = None) -> Request:
        """Start receiving this message; the request's wait gives ``(data, Status)``."""
        op = self._start(out, "Message.irecv")
        return P2PRequest(self._comm, _Done((out, _NULL_STATUS)) if op is None else op)


class _Done:
    """A finished operation (a PROC_NULL peer's)."""

    done = True
    deadline = None

    def __init__(self, value: Any) -> None:
        self._value = value

    def poll(self) -> bool:
        """Already complete."""
        return True

    def value(self) -> Any:
        """The operation's value."""
        return self._value


class P2P(CommBase):
    """The point-to-point methods of `Comm`."""

    _p2p: Channel | MpiChannel

    # -- helpers -----------------------------------------------------------------------------
    def _channel(self) -> Channel | MpiChannel:
        try:
            return self._p2p
        except AttributeError:
            link_of = getattr(self.transport, "point_to_point_link", None)
            link = None if link_of is None else link_of(tuple(self._group), self.context)
            self._p2p = (Channel(self.transport, self._group, self.rank, self.context)
                         if link is None else
                         MpiChannel(self.transport, link, self._group, self.rank, self.context))
            return self._p2p

    def _peer(self, call: str, name: str, value: Any, wildcard: bool = False) -> int:
        if type(value) is int and 0 <= value < self.size:
            return value
        peer = checked_int(call, name, value, self.rank)
        if 0 <= peer < self.size or peer == PROC_NULL or (wildcard and peer == ANY_SOURCE):
            return peer
        allowed = ", ANY_SOURCE" if wildcard else ""
        raise ArgumentError(call, name, value, f"must be a rank in [0, {self.size}), "
                            f"PROC_NULL{allowed}", self.rank)

    def _tag(self, call: str, name: str, value: Any, wildcard: bool = False) -> int:
        if type(value) is int and 0 <= value <= TAG_UB:
            return value
        tag = checked_int(call, name, value, self.rank)
        if 0 <= tag <= TAG_UB or (wildcard and tag == ANY_TAG):
            return tag
        rule = (f"must be in [0, TAG_UB={TAG_UB}]" + (" or ANY_TAG" if wildcard else
                                                       "; ANY_TAG is for receives only"))
        raise ArgumentError(call, name, value, rule, self.rank)

    def _send_buffer(self, call: str, x: Any) -> np.ndarray:
        if isinstance(x, np.ndarray) and not x.flags.c_contiguous:
            raise ArgumentError(call, "x", x.shape, "must be a C-contiguous array (copy it "
                                "with numpy.ascontiguousarray)", self.rank)
        if x is None:
            raise ArgumentError(call, "x", x, "an array is required (send_object sends "
                                "objects)", self.rank)
        return as_array(x, call, "x", self.rank)

    def _recv_buffer(self, call: str, out: Any) -> np.ndarray | None:
        if out is None:
            return None
        out = writeable_buffer(call, out, self.rank)
        if not out.flags.c_contiguous or not out.flags.writeable:
            raise ArgumentError(call, "out", out.shape, "must be a writeable C-contiguous "
                                "array", self.rank)
        return out

    def _complete(self, op: Any) -> Any:
        """Run ``op`` to completion (other operations advancing meanwhile); its value."""
        if not op.poll():
            self._progress.wait(op)
        return op.value()

    def _start_send(self, call: str, x: Any, dest: Any, tag: Any, sync: bool,
                    timeout: float | None, is_object: bool = False) -> Any:
        dest = self._peer(call, "dest", dest)
        tag = self._tag(call, "tag", tag)
        if is_object:
            arr = np.frombuffer(pickle.dumps(x, protocol=_PICKLE), np.uint8)
            token = _OBJECT_TOKEN
        else:
            arr = self._send_buffer(call, x)
            token = _TOKENS.get(arr.dtype) or _TOKENS.setdefault(arr.dtype,
                                                                 dtype_token(arr.dtype))
        timeout = self._timeout(timeout, call)
        if dest == PROC_NULL:
            return _Done(None)
        return self._channel().start_send(call, arr, token, dest, tag, sync, is_object, timeout)

    def _source_and_tag(self, call: str, source: Any, tag: Any,
                        timeout: float | None) -> tuple[int, int, float | None]:
        """A receive's or probe's checked source, tag and timeout."""
        return (self._peer(call, "source", source, wildcard=True),
                self._tag(call, "tag", tag, wildcard=True), self._timeout(timeout, call))

    def _start_recv(self, call: str, out: Any, source: Any, tag: Any,
                    timeout: float | None) -> Any:
        source, tag, timeout = self._source_and_tag(call, source, tag, timeout)
        buffer = self._recv_buffer(call, out)
        if source == PROC_NULL:
            return _Done((buffer, _NULL_STATUS))
        return self._channel().start_recv(call, source, tag, buffer, timeout)

    def _start_probe(self, call: str, source: Any, tag: Any, take: bool,
                     timeout: float | None) -> Any:
        source, tag, timeout = self._source_and_tag(call, source, tag, timeout)
        if source == PROC_NULL:
            return None
        return self._channel().start_probe(call, source, tag, take, timeout)

    # -- sends ---------------------------------------------------------------------------------
    def send(self, x: Any, dest: int, tag: int = 0, *, timeout: float | None = None) -> None:
        """Send array ``x`` to rank ``dest`` (returns once ``x`` may be reused)."""
        if (type(x) is np.ndarray and type(dest) is int and type(tag) is int and timeout is None
                and 0 <= tag <= TAG_UB and 0 <= dest < self.size and dest != self.rank):
            try:
                channel = self._p2p
            except AttributeError:
                channel = self._channel()
            sent = channel.send_now(x, dest, tag)
            if sent is True:
                return
            if sent is not False:
                self._complete(sent)
                return
        self._complete(self._start_send("send", x, dest, tag, False, timeout))

    def isend(self, x: Any, dest: int, tag: int = 0) -> Request:
        """Start sending ``x`` to ``dest``; ``x`` must stay unchanged until the request
        completes."""
        return P2PRequest(self, self._start_send("isend", x, dest, tag, False, None))

    def ssend(self, x: Any, dest: int, tag: int = 0, *, timeout: float | None = None) -> None:
        """Send ``x`` to ``dest`` and return only once a receive has matched it."""
        self._complete(self._start_send("ssend", x, dest, tag, True, timeout))

    def issend(self, x: Any, dest: int, tag: int = 0) -> Request:
        """Start a synchronous send: the request completes once a receive matched it."""
        return P2PRequest(self, self._start_send("issend", x, dest, tag, True, None))

    # -- receives ------------------------------------------------------------------------------
    def recv(self, out: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG, *,
             timeout: float | None = None) -> tuple[Any, Status]:
        """Receive a message: ``(data, Status)``; ``data`` is ``out`` (the message's bytes at
        its start) or, if None, a new array of the sender's dtype and shape. A message larger
        than ``out`` raises `TruncationError`."""
        if (type(out) is np.ndarray and type(source) is int and type(tag) is int
                and timeout is None and 0 <= source < self.size and source != self.rank
                and ANY_TAG <= tag <= TAG_UB):
            try:
                channel = self._p2p
            except AttributeError:
                channel = self._channel()
            got = channel.receive_now(out, source, tag, not self._progress.active)
            if type(got) is tuple:
                return got
            if got is not None:  # matched, its bytes to come
                return self._complete(got)  # type: ignore[no-any-return]
        return self._complete(self._start_recv("recv", out, source, tag, timeout))  # type: ignore[no-any-return]

    def irecv(self, out: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Start a receive; the request's wait gives ``(data, Status)`` (see `recv`)."""
        return P2PRequest(self, self._start_recv("irecv", out, source, tag, None))

    def sendrecv(self, x: Any, dest: int, sendtag: int = 0, out: Any = None,
                 source: int = ANY_SOURCE, recvtag: int = ANY_TAG, *,
                 timeout: float | None = None) -> tuple[Any, Status]:
        """Send ``x`` to ``dest`` and receive from ``source`` at once (no deadlock in a ring).
        An ``out`` that shares memory with ``x`` gets what arrives, and ``x``'s values as they
        were are sent (as MPI's ``Sendrecv_replace``)."""
        if out is not None and isinstance(x, np.ndarray) and isinstance(out, np.ndarray) \
                and may_overlap(out, x):
            x = x.copy()  # the receive may complete as it is posted, before the send reads x
        receive = self._start_recv("sendrecv", out, source, recvtag, timeout)
        self._complete(self._start_send("sendrecv", x, dest, sendtag, False, timeout))
        return self._complete(receive)  # type: ignore[no-any-return]

    # -- probes --------------------------------------------------------------------------------
    def probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, *,
              timeout: float | None = None) -> Status:
        """Wait for a message a receive of ``(source, tag)`` would take; its `Status`."""
        op = self._start_probe("probe", source, tag, False, timeout)
        if op is None:
            return _NULL_STATUS
        self._complete_probe(op)
        return op.status()

    def iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Status | None:
        """The `Status` of a message a receive of ``(source, tag)`` would take, if one has
        arrived; else None."""
        op = self._start_probe("iprobe", source, tag, False, None)
        if op is None:
            return _NULL_STATUS
        return op.status() if op.poll() else None

    def mprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, *,
               timeout: float | None = None) -> Message:
        """Wait for a fitting message and take it: only the returned `Message` receives it."""
        op = self._start_probe("mprobe", source, tag, True, timeout)
        if op is not None:
            self._complete_probe(op)
        return Message(self, op)

    def improbe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Message | None:
        """`mprobe` without waiting: the `Message`, or None if no fitting message arrived."""
        op = self._start_probe("improbe", source, tag, True, None)
        if op is not None and not op.poll():
            return None
        return Message(self, op)

    def _complete_probe(self, op: Any) -> None:
        if not op.poll():
            self._progress.wait(op)  # type: ignore[arg-type]

    # -- objects -------------------------------------------------------------------------------
    def send_object(self, obj: Any, dest: int, tag: int = 0, *,
                    timeout: float | None = None) -> None:
        """Send any picklable object to ``dest`` (one pickle, one message)."""
        self._complete(self._start_send("send_object", obj, dest, tag, False, timeout, True))

    def isend_object(self, obj: Any, dest: int, tag: int = 0) -> Request:
        """Start sending an object (pickled at once)."""
        return P2PRequest(self, self._start_send("isend_object", obj, dest, tag, False, None,
                                                 True))

    def recv_object(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, *,
                    timeout: float | None = None) -> tuple[Any, Status]:
        """Receive an object: ``(obj, Status)``."""
        data, status = self._complete(self._start_recv("recv_object", None, source, tag,
                                                       timeout))
        return loaded(data), status

    def irecv_object(self, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Start receiving an object; the request's wait gives ``(obj, Status)``."""
        op = self._start_recv("irecv_object", None, source, tag, None)
        if isinstance(op, _Done):
            return P2PRequest(self, op)
        return P2PRequest(self, op, unpickle=True)

    def sendrecv_object(self, obj: Any, dest: int, sendtag: int = 0, source: int = ANY_SOURCE,
                        recvtag: int = ANY_TAG, *,
                        timeout: float | None = None) -> tuple[Any, Status]:
        """Send an object to ``dest`` and receive one from ``source`` at once."""
        receive = self._start_recv("sendrecv_object", None, source, recvtag, timeout)
        self._complete(self._start_send("sendrecv_object", obj, dest, sendtag, False, timeout,
                                        True))
        data, status = self._complete(receive)
        return loaded(data), status
