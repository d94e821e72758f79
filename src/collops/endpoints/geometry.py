"""Geometries: sets of endpoints that run collectives, with their algorithm lists.

A geometry is made collectively by every task of the client's communicator, from a list of
endpoints (several per task allowed). Each local endpoint becomes a `Member`: one rank of
the geometry, with three communicators over a `MuxTransport` — one for ordinary collectives,
one for the data of active-message collectives, one for active-message *headers*.

**Ordinary collectives** (``Xfer("allreduce", …)``) are posted by every endpoint, each
without blocking; when one completes on an endpoint, that endpoint runs the dispatch
callback named by the transfer on the data it received, then the completion callback.

**Active-message collectives** (ambroadcast, amscatter, amgather, amreduce) are posted by
the root alone. The root sends every other endpoint a fixed-size header — collective,
dispatch id, dtype, shape, operator, algorithm and an AM sequence number — on the header
communicator, where every member keeps one receive pre-posted per peer (the k-th header
from a peer carries tag k), so `Context.advance` learns of a new AM by testing those
receives; no probe is needed. Root and peers then run the data collective with the chosen
registry algorithm, tagged by (root, AM number) so concurrent AMs from different roots
never mix. A peer runs its dispatch callback — on the data it received (ambroadcast,
amscatter), or to obtain its contribution (amgather, amreduce) — and reports back to the
root with a status header; the root's transfer completes when its own part is done and every
peer reported success, and fails with `DispatchError` naming the endpoint whose callback
raised — then it tells every peer to drop its part (an *abort* header). So a raising callback
surfaces on the posting endpoint instead of hanging it, and leaves nothing in flight.
"""

from __future__ import annotations

import pickle
import struct
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..algorithms.patterns import is_power_of_two
from ..algorithms.registry import get_algorithm
from ..algorithms.spec import REDUCING, CallSpec, make_spec
from ..datatypes import dtype_from_token, dtype_token
from ..errors import ArgumentError, PeerFailed
from ..ops import as_op
from ..runtime.comm import Comm, Request
from ..runtime.engine import Execution
from ..transport.base import Handle
from ..transport.tags import CALL_BITS
from .catalog import CONTIGUOUS, AlgorithmLists, Verdict, algorithm_lists
from .client import Client, Context, Endpoint
from .mux import MuxTransport
from .xfer import AM_COLLECTIVES, Delivery, DispatchError, Xfer, spec_of

#: bytes of an active-message header (a length word and a pickled record, zero-padded)
HEADER_BYTES = 1024
_LENGTH = struct.Struct("<I")
#: communicators per geometry member: ordinary collectives, AM data, AM headers
COLLECTIVES_BLOCK, AM_DATA_BLOCK, AM_HEADER_BLOCK = 0, 1, 2
_SEQ_MASK = (1 << CALL_BITS) - 1
#: collectives whose non-root endpoints may have no data: size-based preferences skip them
_ROOT_DESCRIBES = frozenset({"bcast", "scatter", "scatterv"})


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
class _RootAM:
    """An active message this member started: its transfer, data phase and peer reports."""

    xfer: Xfer
    request: Request
    waiting_for: int
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
    received: np.ndarray | None
    delivery: Delivery


class Member:
    """One local endpoint's part in a geometry: its rank, communicators and AM state."""

    def __init__(self, geometry: Geometry, rank: int, endpoint: Endpoint,
                 transports: list[MuxTransport]) -> None:
        self.geometry = geometry
        self.rank = rank
        self.endpoint = endpoint
        self.context: Context = endpoint.context
        n = geometry.size
        label = f"{geometry.name}[{rank}]"
        self.comm = Comm(transports[COLLECTIVES_BLOCK], timeout=None, name=label)
        self.am_comm = Comm(transports[AM_DATA_BLOCK], timeout=None, name=label + ".am")
        self.headers = transports[AM_HEADER_BLOCK]
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
            if peer != rank:
                self._post_header_receive(peer)
        self.context.members.append(self)

    # -- headers -----------------------------------------------------------------------------
    def _post_header_receive(self, peer: int) -> None:
        buf = np.zeros(HEADER_BYTES, np.uint8)
        tag = self.received_headers[peer] & _SEQ_MASK
        self.posted[peer] = (self.headers.irecv(peer, tag, buf.data), buf)

    def send_header(self, peer: int, record: dict[str, Any]) -> None:
        """Send the next header of the stream to ``peer`` (completes at once or eagerly)."""
        tag = self.sent_headers[peer] & _SEQ_MASK
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

    # -- active messages: the root's side ------------------------------------------------------
    def start_am(self, xfer: Xfer) -> None:
        """Announce ``xfer`` to every peer and start the root's part of its data phase."""
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
        receive = None
        if data_coll in ("bcast", "scatter", "reduce"):
            receive = np.empty(shape, data.dtype)
        elif data_coll == "gather":
            receive = np.empty((n, *shape), data.dtype)
        request = Request(self.am_comm, self._data_phase(record, data, receive))
        self.as_root[seq] = _RootAM(xfer, request, n - 1)
        xfer.args["_am_seq"] = seq

    def poll_root(self, xfer: Xfer) -> bool:
        """Advance a started AM; True once the root's part is done and every peer reported."""
        state = self.as_root[xfer.args["_am_seq"]]
        lost = [p for p in self.gone if p not in state.reported]
        if state.waiting_for and lost:
            del self.as_root[xfer.args["_am_seq"]]
            _abandon(state.request, self.am_comm)
            raise self.gone[lost[0]]
        if state.errors:
            seq = xfer.args["_am_seq"]
            del self.as_root[seq]
            _abandon(state.request, self.am_comm)
            for peer in range(self.geometry.size):
                if peer != self.rank:
                    self.send_header(peer, {"kind": "abort", "seq": seq})
            raise DispatchError(f"{xfer.collective} from endpoint {self.rank} of "
                                f"{self.geometry.name}: " + "; ".join(state.errors))
        if not state.finished_phase and state.request.test():
            state.finished_phase = True
            state.value = state.request.wait()
        if state.finished_phase and state.waiting_for == 0:
            del self.as_root[xfer.args["_am_seq"]]
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
        data_coll = AM_COLLECTIVES[coll]
        dtype = dtype_from_token(record["dtype"])
        shape = tuple(record["shape"])
        delivery = Delivery(self.geometry, self.endpoint, coll, record["dispatch"], root,
                            dtype, shape)
        try:
            fn = self._dispatch(coll, record["dispatch"])
            send = None
            receive = None
            if data_coll in ("bcast", "scatter"):
                receive = np.empty(shape, dtype)
            else:
                send = np.ascontiguousarray(fn(None, delivery), dtype=dtype)
                if send.shape != shape:
                    raise DispatchError(f"returned shape {send.shape}, the root announced "
                                        f"{shape}")
        except BaseException as exc:  # noqa: BLE001 - reported to the root
            self._report(root, record, exc)
            return
        request = Request(self.am_comm, self._data_phase(record, send, receive))
        self.as_peer.append(_PeerAM(record, request, receive, delivery))

    def _finish_peer(self, am: _PeerAM) -> None:
        record = am.header
        error: BaseException | None = None
        if am.received is not None:
            try:
                fn = self._dispatch(record["collective"], record["dispatch"])
                fn(am.received, am.delivery)
            except BaseException as exc:  # noqa: BLE001 - reported to the root
                error = exc
        self._report(record["root"], record, error)

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
        seq = (record["seq"] * n + record["root"]) & _SEQ_MASK
        execution = self.am_comm._execute(  # a fixed tag per (root, AM number)
            spec, None if send is None else send.reshape(-1),
            None if receive is None else receive.reshape(-1), seq, 0, record["algorithm"],
            dict(record["params"]), record["timeout"])
        yield execution
        return receive

    # -- ordinary collectives ------------------------------------------------------------------
    def start(self, xfer: Xfer) -> None:
        """Start ``xfer`` on this member's communicator (non-blocking)."""
        if xfer.active_message:
            self.start_am(xfer)
            return
        xfer.args["_request"] = start_collective(self.comm, xfer)

    def poll_xfer(self, xfer: Xfer) -> bool:
        """Advance a transfer posted here; True once it completed."""
        if xfer.active_message:
            return self.poll_root(xfer)
        request: Request = xfer.args["_request"]
        if not request.test():
            return False
        value = request.wait()
        if xfer.dispatch_id is not None:
            fn = self._dispatch(xfer.collective, xfer.dispatch_id)
            delivery = Delivery(self.geometry, self.endpoint, xfer.collective, xfer.dispatch_id,
                                xfer.root)
            try:
                fn(value, delivery)
            except BaseException as exc:
                raise DispatchError(f"dispatch callback {xfer.dispatch_id} of "
                                    f"{xfer.collective} on {self.endpoint!r} raised "
                                    f"{type(exc).__name__}: {exc}") from exc
        self.geometry.complete(xfer, value)
        return True



def _abandon(request: Request, comm: Comm) -> None:
    """Stop polling the schedule of a request whose transfer failed (runtime internals)."""
    current = getattr(request, "_current", None)
    active = comm._progress.active
    if current in active:
        active.remove(current)


def start_collective(comm: Comm, x: Xfer) -> Request:
    """The non-blocking call of ``comm`` that runs ordinary transfer ``x``."""
    c, kw, a = x.collective, {"algorithm": x.algorithm, "timeout": x.timeout, **x.params}, x.args
    if c == "barrier":
        return comm.ibarrier(**kw)
    if c == "bcast":
        return comm.ibcast(x.data, x.root, **kw)
    if c == "reduce":
        return comm.ireduce(x.data, x.op, x.root, **kw)
    if c in ("allreduce", "scan", "exscan", "reduce_scatter_block"):
        return getattr(comm, "i" + c)(x.data, x.op, **kw)  # type: ignore[no-any-return]
    if c == "reduce_scatter":
        return comm.ireduce_scatter(x.data, x.op, a.get("counts"), **kw)
    if c in ("gather", "scatter"):
        return getattr(comm, "i" + c)(x.data, x.root, **kw)  # type: ignore[no-any-return]
    if c == "gatherv":
        return comm.igatherv(x.data, x.root, a.get("counts"), **kw)
    if c == "scatterv":
        return comm.iscatterv(x.data, a.get("counts"), x.root, **kw)
    if c in ("allgather", "alltoall"):
        return getattr(comm, "i" + c)(x.data, **kw)  # type: ignore[no-any-return]
    if c == "allgatherv":
        return comm.iallgatherv(x.data, a.get("counts"), **kw)
    if c == "alltoallv":
        return comm.ialltoallv(x.data, a["sendcounts"], a.get("sdispls"), a.get("recvcounts"),
                               **kw)
    raise ArgumentError("Xfer", "collective", c, "not an ordinary collective")


class Geometry:
    """A set of endpoints used for collectives, with algorithm lists and preferences."""

    def __init__(self, client: Client, endpoints: Sequence[Endpoint], *, name: str = "",
                 preferences: dict[str, Any] | None = None) -> None:
        if not endpoints:
            raise ArgumentError("Geometry", "endpoints", endpoints, "needs at least one")
        if len(set(endpoints)) != len(endpoints):
            raise ArgumentError("Geometry", "endpoints", endpoints, "lists an endpoint twice")
        self.client = client
        self.endpoints = list(endpoints)
        self.size = len(self.endpoints)
        client.geometries_made += 1
        self.name = name or f"{client.name}.geometry{client.geometries_made}"
        self.preferences = preferences or {}
        slot: list[int] = []
        seen: dict[int, int] = {}
        for ep in self.endpoints:
            slot.append(seen.get(ep.task, 0))
            seen[ep.task] = slot[-1] + 1
        slots = max(seen.values())
        # reserve one communicator context per (block, slot pair): collective over all tasks
        self.destroyed = False
        self._reserved = [client.comm.dup() for _ in range(3 * slots * slots)]
        reserved = [c.context for c in self._reserved]
        group = getattr(client.comm, "_group", list(range(client.tasks)))
        task_rank = [group[ep.task] for ep in self.endpoints]
        self._cpus = client.task_cpus()
        self._members: dict[Endpoint, Member] = {}
        for rank, ep in enumerate(self.endpoints):
            if not ep.local:
                continue
            muxes = [MuxTransport(client.comm.transport, client.transport_lock, client.loopback,
                                  rank, task_rank, slot,
                                  reserved[b * slots * slots:(b + 1) * slots * slots], slots)
                     for b in range(3)]
            self._members[ep] = Member(self, rank, ep, muxes)
            client.joined(ep, self)
        caps = client.comm.transport.capabilities()
        nodes = {caps.node_of_rank[r] if r < len(caps.node_of_rank) else 0 for r in task_rank}
        resources = set(caps.resources) | {CONTIGUOUS}
        if caps.in_network_reduction:
            resources.add("in_network_reduction")
        if len(nodes) <= 1:
            resources.add("one_node")
        if is_power_of_two(self.size):
            resources.add("power_of_two_size")
        self.resources = frozenset(resources)

    def __repr__(self) -> str:
        return f"<Geometry {self.name} of {self.size} endpoints, {len(self._members)} here>"

    def destroy(self) -> None:
        """Give the geometry's communicator contexts back (PAMI_Geometry_destroy; collective
        over the client's tasks, as making it was): its transfers in flight here complete
        first, as a freed communicator's calls do; afterwards it takes no transfer."""
        while self._in_flight():
            self.client.advance()
            self.client.wait_for_activity(0.001)
        self._members = {}
        for comm in self._reserved:
            comm.free()
        self._reserved = []
        self.destroyed = True

    def _in_flight(self) -> bool:
        """Whether a transfer of this geometry is still in flight on this task."""
        return any(x.geometry is self for c in self.client.contexts for x in c.xfers) or any(
            m.as_peer for m in self._members.values())

    # -- members -------------------------------------------------------------------------------
    @property
    def local_endpoints(self) -> list[Endpoint]:
        """The endpoints of this geometry on the calling task."""
        return list(self._members)

    def member(self, endpoint: Endpoint) -> Member:
        """The local member behind ``endpoint``."""
        if self.destroyed:
            raise ArgumentError("Geometry", "geometry", self.name, "was destroyed",
                                self.client.task)
        try:
            return self._members[endpoint]
        except KeyError:
            raise ArgumentError("Geometry", "endpoint", endpoint,
                                f"is not an endpoint of {self.name} on this task") from None

    def rank_of(self, endpoint: Endpoint) -> int:
        """The index of ``endpoint`` in the geometry."""
        return self.endpoints.index(endpoint)

    # -- algorithm lists -----------------------------------------------------------------------
    def algorithms(self, collective: str) -> AlgorithmLists:
        """The *always works* and *must query* algorithm lists of ``collective`` here."""
        coll = AM_COLLECTIVES.get(collective, collective)
        ranges = {}
        for rule in self.preferences.get(coll, {}).get("rules", ()):
            ranges[rule["algorithm"]] = (int(rule.get("min_bytes", 0)),
                                         None if rule.get("max_bytes") is None
                                         else int(rule["max_bytes"]))
        return algorithm_lists(coll, self.resources, self._spec_of, ranges)

    def _spec_of(self, call: Any) -> CallSpec | Verdict:
        if isinstance(call, Xfer):
            return spec_of(call, self.size)
        return Verdict(False, (f"cannot describe a call from {type(call).__name__}",))

    def check(self, xfer: Xfer) -> Verdict:
        """Whether ``xfer``'s algorithm (it must name one) is valid here for this call."""
        coll = xfer.data_collective
        for entry in (*self.algorithms(coll).always, *self.algorithms(coll).must_query):
            if entry.name == xfer.algorithm:
                return entry.check(xfer)
        return Verdict(False, (f"{xfer.algorithm!r} is not offered for {coll} on this "
                               "geometry",))

    def preferred_algorithm(self, xfer: Xfer) -> str | None:
        """The algorithm the geometry's preferences give ``xfer`` (None: automatic)."""
        coll = xfer.data_collective
        prefs = self.preferences.get(coll, {})
        if not prefs:
            return None
        lists = self.algorithms(coll)
        offered = {e.name: e for e in (*lists.always, *lists.must_query)}
        spec = spec_of(xfer, self.size)
        if isinstance(spec, CallSpec) and (coll not in _ROOT_DESCRIBES or xfer.active_message):
            for rule in prefs.get("rules", ()):
                entry = offered.get(rule["algorithm"])
                if entry is not None and entry.check(spec):
                    return entry.name
        for name in prefs.get("prefer", ()):
            entry = offered.get(name)
            if entry is None:
                continue
            if not isinstance(spec, CallSpec) or entry.check(spec):
                return name
        return None

    # -- posting -------------------------------------------------------------------------------
    def post(self, xfer: Xfer, via: Endpoint | None = None) -> Xfer:
        """Post ``xfer`` without blocking through ``via`` (default: the first local endpoint)."""
        if self.destroyed:
            raise ArgumentError("Geometry.post", "geometry", self.name, "was destroyed",
                                self.client.task)
        if via is None:
            if not self._members:
                raise ArgumentError("Geometry.post", "via", None,
                                    f"this task has no endpoint in {self.name}")
            via = next(iter(self._members))
        member = self.member(via)
        if xfer.completed or xfer.endpoint is not None:
            raise ArgumentError("Geometry.post", "xfer", xfer, "already posted")
        if xfer.geometry is not None and xfer.geometry is not self:
            raise ArgumentError("Geometry.post", "xfer", xfer, f"was made for geometry "
                                f"{xfer.geometry.name}, not {self.name}")
        if xfer.algorithm is None:
            xfer.algorithm = self.preferred_algorithm(xfer)
        else:
            get_algorithm(xfer.data_collective, xfer.algorithm, member.rank)
        xfer.geometry, xfer.endpoint = self, via
        if xfer.active_message:
            xfer.root = member.rank
        with member.context.lock:
            member.start(xfer)
            member.context.xfers.append(xfer)
        return xfer

    def complete(self, xfer: Xfer, value: Any) -> None:
        """Record a transfer's result and run its completion callback."""
        xfer.result = value
        xfer.completed = True
        if xfer.done is not None:
            xfer.done(xfer)

    # -- affinity (seed 003) -------------------------------------------------------------------
    def affinity_params(self, machine: str | None = None, mapping: str = "fill",
                        arity: int = 2) -> dict[str, Any]:
        """Parameters of ``affinity_tree`` for this geometry.

        With ``machine`` (e.g. ``"machine:2x4x2"``) a virtual machine and ``mapping``;
        without, the real machine from sysfs and each endpoint's task's pinned CPU (the
        ``fill`` mapping when some task is not pinned to one CPU).
        """
        if machine is not None:
            return {"machine": machine.removeprefix("machine:"), "mapping": mapping,
                    "arity": arity}
        from ..topology.machine import detect_machine
        real, thread_of = detect_machine()
        cpus = [self._cpus[ep.task] for ep in self.endpoints]
        if any(c is None or c not in thread_of for c in cpus):
            chosen = "fill"
        else:
            chosen = ",".join(str(thread_of[int(c)]) for c in cpus if c is not None)
        return {"machine": "x".join(map(str, real.shape)), "mapping": chosen, "arity": arity}
