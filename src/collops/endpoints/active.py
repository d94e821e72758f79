"""Active-message collectives (ambroadcast, amscatter, amgather, amreduce) of a geometry
member: the header stream, the root's side and a peer's side.

The root announces an AM to every other endpoint with a fixed-size header — collective,
dispatch id, dtype, shape, operator, algorithm and an AM sequence number — on the header
communicator, where every member keeps one receive pre-posted per peer (the k-th header from
a peer carries tag k), so `Context.advance` learns of a new AM by testing those receives; no
probe is needed. Root and peers then run the data collective with the chosen registry
algorithm, tagged by (root, AM number) so concurrent AMs from different roots never mix.

Every endpoint where data lands — each endpoint of an ambroadcast or amscatter, the root of
an amgather or amreduce — runs its dispatch callback, the root's own included. A callback
registered ``two_phase`` is PAMI's header handler: it runs when the header arrives (on the
root: when the transfer is posted) with ``delivery.recv`` (`Recv`), and may name the buffer
the data lands in (no copy) and a ``recv.done`` run once it has; naming none, it runs again
on the data in a library buffer, as a callback of the default form runs once. Peers of an
amgather or amreduce call theirs to obtain their contribution.

A peer reports to the root with a status header once its callbacks ran; the root's transfer
completes when its own part is done and every peer reported success, and fails with
`DispatchError` naming the endpoint whose callback raised — then it tells every peer to drop
its part (an *abort* header). So a raising callback surfaces on the posting endpoint instead
of hanging it, and leaves nothing in flight.
"""

from __future__ import annotations

import dataclasses
import pickle
import struct
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..algorithms.spec import REDUCING, make_spec
from ..datatypes import dtype_from_token, dtype_token
from ..errors import ArgumentError, PeerFailed
from ..ops import as_op
from ..runtime.comm import Comm, Request
from ..runtime.engine import Execution
from ..transport.base import Handle
from ..transport.tags import CALL_BITS
from .mux import MuxTransport
from .p2p_values import Recv, bytes_of, recv_buffer_error
from .xfer import AM_COLLECTIVES, Delivery, DispatchError, Xfer

if TYPE_CHECKING:
    from .client import Context, Endpoint
    from .geometry import Geometry

#: bytes of an active-message header (a length word and a pickled record, zero-padded)
HEADER_BYTES = 1024
_LENGTH = struct.Struct("<I")
SEQ_MASK = (1 << CALL_BITS) - 1
#: data collectives whose every endpoint receives data (the others' peers contribute)
_EVERYONE_RECEIVES = ("bcast", "scatter")


def encode_header(record: dict[str, Any]) -> np.ndarray:
    """A header record as ``HEADER_BYTES`` bytes."""
    body = pickle.dumps(record, protocol=5)
    if len(body) + _LENGTH.size > HEADER_BYTES:
        record = {**record, "error": str(record.get("error", ""))[:400],
                  "params": record.get("params", {})}
        body = pickle.dumps(record, protocol=5)
    out = np.zeros(HEADER_BYTES, np.uint8)
    out[: _LENGTH.size] = np.frombuffer(_LENGTH.pack(len(body)), np.uint8)
    out[_LENGTH.size: _LENGTH.size + len(body)] = np.frombuffer(body, np.uint8)
    return out


def decode_header(raw: np.ndarray) -> dict[str, Any]:
    """The record of a header."""
    (length,) = _LENGTH.unpack(raw[: _LENGTH.size].tobytes())
    return pickle.loads(raw[_LENGTH.size: _LENGTH.size + length].tobytes())  # type: ignore


@dataclass
class Landing:
    """Where an endpoint's data of one AM lands and what runs once it has: the dispatch
    callback, what it was told, and the `Recv` a two-phase callback filled in."""

    fn: Callable[..., Any]
    delivery: Delivery
    receive: np.ndarray
    recv: Recv | None = None

    def run(self, data: np.ndarray) -> None:
        """The data has landed: ``recv.done`` when the callback named the buffer, else the
        callback on the data (the default form, or a two-phase callback that named none)."""
        if self.recv is not None and self.recv.buffer is not None:
            if self.recv.done is not None:
                self.recv.done(self.recv)
        else:
            self.fn(data, self.delivery)


@dataclass
class _RootAM:
    """An active message this member started: its transfer, data phase and peer reports."""

    xfer: Xfer
    request: Request
    waiting_for: int
    landing: Landing
    errors: list[str] = field(default_factory=list)
    #: the peers whose status arrived
    reported: set[int] = field(default_factory=set)
    finished_phase: bool = False
    value: Any = None


@dataclass
class _PeerAM:
    """An active message this member takes part in as a peer."""

    header: dict[str, Any]
    request: Request
    landing: Landing | None


class ActiveMessages:
    """The active-message part of a geometry member (`geometry.Member`)."""

    geometry: Geometry
    rank: int
    endpoint: Endpoint
    context: Context

    def init_active_messages(self, am_comm: Comm, headers: MuxTransport) -> None:
        """Set up the AM state and pre-post a header receive from every peer."""
        n = self.geometry.size
        self.am_comm = am_comm
        self.headers = headers
        self.sent_headers = [0] * n
        self.received_headers = [0] * n
        self.posted: dict[int, tuple[Handle, np.ndarray]] = {}
        #: peers whose task ended, so no header comes from them any more: peer -> PeerFailed
        self.gone: dict[int, PeerFailed] = {}
        self.am_started = 0
        self.as_root: dict[int, _RootAM] = {}
        self.as_peer: list[_PeerAM] = []
        self._unfinished_sends: list[tuple[Handle, np.ndarray]] = []
        for peer in range(n):
            if peer != self.rank:
                self._post_header_receive(peer)

    # -- headers -----------------------------------------------------------------------------
    def _post_header_receive(self, peer: int) -> None:
        buf = np.zeros(HEADER_BYTES, np.uint8)
        tag = self.received_headers[peer] & SEQ_MASK
        self.posted[peer] = (self.headers.irecv(peer, tag, buf.data), buf)

    def send_header(self, peer: int, record: dict[str, Any]) -> None:
        """Send the next header of the stream to ``peer`` (completes at once or eagerly)."""
        tag = self.sent_headers[peer] & SEQ_MASK
        self.sent_headers[peer] += 1
        raw = encode_header(record)
        handle = self.headers.isend(peer, tag, raw.data)
        if not handle.done:  # keep the bytes alive until the transport is done with them
            self._unfinished_sends.append((handle, raw))

    def poll_headers(self) -> int:
        """Handle arrived headers and advance peer-side AMs; returns events handled."""
        events = 0
        if self.posted:
            self.headers.progress()
        for peer, (handle, buf) in list(self.posted.items()):
            if not handle.done:
                continue
            if isinstance(handle.error, PeerFailed):
                del self.posted[peer]  # an AM still waiting for its status fails (poll_root)
                self.gone[peer] = handle.error
                continue
            if handle.error is not None:
                raise handle.error
            self.received_headers[peer] += 1
            record = decode_header(buf)
            self._post_header_receive(peer)
            events += 1
            if record["kind"] == "start":
                self._on_start(peer, record)
            elif record["kind"] == "abort":
                self._on_abort(peer, record)
            else:
                self._on_status(peer, record)
        for am in list(self.as_peer):
            if am.request.test():
                self.as_peer.remove(am)
                self._finish_peer(am)
                events += 1
        self._unfinished_sends = [(h, b) for h, b in self._unfinished_sends if not h.done]
        return events

    # -- where data lands --------------------------------------------------------------------
    def _landing(self, collective: str, dispatch_id: int | None, root: int, dtype: np.dtype,
                 shape: tuple[int, ...], received: tuple[int, ...]) -> Landing:
        """Run the header half of this endpoint's dispatch for an AM whose data lands here
        (``received``: the shape that lands): a two-phase callback may name the buffer."""
        fn = self._dispatch(collective, dispatch_id)
        delivery = Delivery(self.geometry, self.endpoint, collective, dispatch_id, root,
                            dtype, shape)
        if (collective, int(dispatch_id or 0)) not in self.context.two_phase:
            return Landing(fn, delivery, np.empty(received, dtype))
        nbytes = int(np.prod(received, dtype=np.int64)) * dtype.itemsize
        recv = Recv(self.geometry.endpoints[root], nbytes, dtype, received)
        fn(None, dataclasses.replace(delivery, recv=recv))
        if recv.buffer is None:
            return Landing(fn, delivery, np.empty(received, dtype), recv)
        error = recv_buffer_error(f"{collective} (dispatch's recv)", recv, self.endpoint.task)
        if error is not None:
            raise error
        receive = bytes_of(recv.buffer)[:nbytes].view(dtype).reshape(received)
        return Landing(fn, delivery, receive, recv)

    # -- active messages: the root's side ------------------------------------------------------
    def start_am(self, xfer: Xfer) -> None:
        """Announce ``xfer`` to every peer and start the root's part of its data phase; the
        root's own dispatch callback runs first (its header half)."""
        n, data_coll = self.geometry.size, xfer.data_collective
        if xfer.data is None:
            raise ArgumentError(xfer.collective, "data", None, "the root must give data")
        data = np.ascontiguousarray(xfer.data)
        shape = data.shape
        if data_coll == "scatter":
            if data.ndim == 0 or data.shape[0] % n:
                raise ArgumentError(xfer.collective, "data", data.shape,
                                    f"axis 0 must split into {n} equal blocks")
            shape = (data.shape[0] // n, *data.shape[1:])
        op = as_op(xfer.op, data_coll) if data_coll in REDUCING else None
        if op is not None:
            op.check(data.dtype, data_coll)
        received = (n, *shape) if data_coll == "gather" else shape
        try:
            landing = self._landing(xfer.collective, xfer.dispatch_id, self.rank, data.dtype,
                                    shape, received)
        except (ArgumentError, DispatchError):
            raise
        except Exception as exc:
            raise DispatchError(f"{xfer.collective}: the root's dispatch callback on "
                                f"{self.endpoint!r} raised {type(exc).__name__}: {exc}") from exc
        seq = self.am_started
        self.am_started += 1
        record = {"kind": "start", "collective": xfer.collective, "dispatch": xfer.dispatch_id,
                  "seq": seq, "root": self.rank, "dtype": dtype_token(data.dtype),
                  "shape": tuple(int(s) for s in shape), "op": op.name if op else None,
                  "algorithm": xfer.algorithm, "params": dict(xfer.params),
                  "timeout": xfer.timeout}
        for peer in range(n):
            if peer != self.rank:
                self.send_header(peer, record)
        request = Request(self.am_comm, self._data_phase(record, data, landing.receive))
        self.as_root[seq] = _RootAM(xfer, request, n - 1, landing)
        xfer.args["_am_seq"] = seq

    def poll_root(self, xfer: Xfer) -> bool:
        """Advance a started AM; True once the root's part is done and every peer reported."""
        seq = xfer.args["_am_seq"]
        state = self.as_root[seq]
        lost = [p for p in self.gone if p not in state.reported]
        if state.waiting_for and lost:
            del self.as_root[seq]
            _abandon(state.request, self.am_comm)
            raise self.gone[lost[0]]
        if not state.errors and not state.finished_phase and state.request.test():
            state.finished_phase = True
            state.value = state.request.wait()
            try:
                state.landing.run(state.value)
            except Exception as exc:  # noqa: BLE001 - fails the transfer below
                state.errors.append(f"dispatch callback on the root endpoint {self.rank} "
                                    f"({self.endpoint!r}) raised {type(exc).__name__}: {exc}")
        if state.errors:
            del self.as_root[seq]
            _abandon(state.request, self.am_comm)
            for peer in range(self.geometry.size):
                if peer != self.rank:
                    self.send_header(peer, {"kind": "abort", "seq": seq})
            raise DispatchError(f"{xfer.collective} from endpoint {self.rank} of "
                                f"{self.geometry.name}: " + "; ".join(state.errors))
        if state.finished_phase and state.waiting_for == 0:
            del self.as_root[seq]
            self.geometry.complete(xfer, state.value)
            return True
        return False

    def _on_status(self, peer: int, record: dict[str, Any]) -> None:
        state = self.as_root.get(record["seq"])
        if state is None:
            return  # the transfer already failed
        state.waiting_for -= 1
        state.reported.add(peer)
        if record.get("error"):
            state.errors.append(f"dispatch callback on endpoint {peer} "
                                f"({self.geometry.endpoints[peer]!r}) raised {record['error']}")

    # -- active messages: a peer's side -------------------------------------------------------
    def _on_abort(self, root: int, record: dict[str, Any]) -> None:
        """The root gave up on an AM (a peer's callback raised): drop our part of it."""
        for am in list(self.as_peer):
            if am.header["root"] == root and am.header["seq"] == record["seq"]:
                self.as_peer.remove(am)
                _abandon(am.request, self.am_comm)

    def _on_start(self, root: int, record: dict[str, Any]) -> None:
        coll = record["collective"]
        dtype = dtype_from_token(record["dtype"])
        shape = tuple(record["shape"])
        landing = None
        send = None
        try:
            if AM_COLLECTIVES[coll] in _EVERYONE_RECEIVES:
                landing = self._landing(coll, record["dispatch"], root, dtype, shape, shape)
            else:
                fn = self._dispatch(coll, record["dispatch"])
                delivery = Delivery(self.geometry, self.endpoint, coll, record["dispatch"],
                                    root, dtype, shape)
                send = np.ascontiguousarray(fn(None, delivery), dtype=dtype)
                if send.shape != shape:
                    raise DispatchError(f"returned shape {send.shape}, the root announced "
                                        f"{shape}")
        except BaseException as exc:  # noqa: BLE001 - reported to the root
            self._report(root, record, exc)
            return
        receive = None if landing is None else landing.receive
        request = Request(self.am_comm, self._data_phase(record, send, receive))
        self.as_peer.append(_PeerAM(record, request, landing))

    def _finish_peer(self, am: _PeerAM) -> None:
        error: BaseException | None = None
        if am.landing is not None:
            try:
                am.landing.run(am.landing.receive)
            except BaseException as exc:  # noqa: BLE001 - reported to the root
                error = exc
        self._report(am.header["root"], am.header, error)

    def _report(self, root: int, record: dict[str, Any], error: BaseException | None) -> None:
        if error is not None:
            self.context.dispatch_errors.append(error)
        text = f"{type(error).__name__}: {error}" if error is not None else ""
        self.send_header(root, {"kind": "status", "seq": record["seq"], "error": text})

    def _dispatch(self, collective: str, dispatch_id: int | None) -> Any:
        fn = self.context.dispatch.get((collective, int(dispatch_id or 0)))
        if fn is None:
            raise DispatchError(f"no dispatch callback {dispatch_id} registered for "
                                f"{collective} on {self.endpoint!r}")
        return fn

    def _data_phase(self, record: dict[str, Any], send: np.ndarray | None,
                    receive: np.ndarray | None) -> Generator[Execution, None, Any]:
        n = self.geometry.size
        data_coll = AM_COLLECTIVES[record["collective"]]
        dtype = dtype_from_token(record["dtype"])
        count = int(np.prod(record["shape"], dtype=np.int64))
        op = as_op(record["op"], data_coll) if record["op"] else None
        spec = make_spec(data_coll, n, dtype, count=count, root=record["root"], op=op)
        seq = (record["seq"] * n + record["root"]) & SEQ_MASK
        execution = self.am_comm._execute(  # a fixed tag per (root, AM number)
            spec, None if send is None else send.reshape(-1),
            None if receive is None else receive.reshape(-1), seq, 0, record["algorithm"],
            dict(record["params"]), record["timeout"])
        yield execution
        return receive


def _abandon(request: Request, comm: Comm) -> None:
    """Stop polling the schedule of a request whose transfer failed (runtime internals)."""
    current = getattr(request, "_current", None)
    active = comm._progress.active
    if current in active:
        active.remove(current)
