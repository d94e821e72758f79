"""Geometries: sets of endpoints that run collectives, with their algorithm lists.

A geometry is made collectively by every task of the client's communicator, from a list of
endpoints (several per task allowed). Each local endpoint becomes a `Member`: one rank of
the geometry, with three communicators over a `MuxTransport` — one for ordinary collectives,
one for the data of active-message collectives, one for active-message *headers*.

**Ordinary collectives** (``Xfer("allreduce", …)``) are posted by every endpoint, each
without blocking; when one completes on an endpoint, that endpoint runs the dispatch
callback named by the transfer on the data it received, then the completion callback.

**Active-message collectives** (ambroadcast, amscatter, amgather, amreduce) are posted by
the root alone; `endpoints.active` runs them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..algorithms.patterns import is_power_of_two
from ..algorithms.registry import get_algorithm
from ..algorithms.spec import CallSpec
from ..errors import ArgumentError
from ..runtime.comm import Comm, Request
from .active import ActiveMessages
from .catalog import CONTIGUOUS, AlgorithmLists, Verdict, algorithm_lists
from .client import Client, Context, Endpoint
from .mux import MuxTransport
from .xfer import AM_COLLECTIVES, Delivery, DispatchError, Xfer, spec_of

#: communicators per geometry member: ordinary collectives, AM data, AM headers
COLLECTIVES_BLOCK, AM_DATA_BLOCK, AM_HEADER_BLOCK = 0, 1, 2
#: collectives whose non-root endpoints may have no data: size-based preferences skip them
_ROOT_DESCRIBES = frozenset({"bcast", "scatter", "scatterv"})


class Member(ActiveMessages):
    """One local endpoint's part in a geometry: its rank, communicators and AM state."""

    def __init__(self, geometry: Geometry, rank: int, endpoint: Endpoint,
                 transports: list[MuxTransport]) -> None:
        self.geometry = geometry
        self.rank = rank
        self.endpoint = endpoint
        self.context: Context = endpoint.context
        label = f"{geometry.name}[{rank}]"
        self.comm = Comm(transports[COLLECTIVES_BLOCK], timeout=None, name=label)
        self.init_active_messages(
            Comm(transports[AM_DATA_BLOCK], timeout=None, name=label + ".am"),
            transports[AM_HEADER_BLOCK])
        self.context.members.append(self)

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
