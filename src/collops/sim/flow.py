"""The flow model: every message a flow over its route, rates max-min fair, event by event.

It executes the schedules themselves (like the packet model) in continuous time:

* **Ranks.** A step becomes ready when its local dependencies have completed. Each rank has
  one CPU: issuing a send costs ``overhead`` of CPU time, a copy or reduce step
  ``bytes × gamma``, served in the order steps become ready. A receive completes when its
  local dependencies have completed *and* its message has arrived.
* **Window.** A rank keeps at most ``window`` of its sends in flight (0: no limit, every send
  is issued as soon as the schedule makes it ready). A send is in flight from its issue until
  its last byte has arrived at the receiver (end-to-end); then the rank issues its next
  ready send in schedule order. A local edge out of a send is satisfied once the send is
  *issued* (as in `collops.sim.program`): chains of sends (``random_chunked``, a ``linear``
  exchange) express issue order, and the window alone limits what is in flight.
* **Flows.** After its overhead a message becomes a flow of its wire bytes over its route
  (`Topology.routes`). At every instant the rates of the flows in the network are the
  max-min fair allocation of the links' bandwidths (progressive filling,
  `collops.sim.maxmin`), recomputed whenever a flow starts or ends. A flow's last byte
  arrives at its destination the route's latency (the sum of its links' latencies) after it
  left its source. A message between ranks on one node crosses no link and moves at
  ``bandwidth``.

Between two events every rate is constant, so the next event is either the earliest timed
event (an overhead or a copy ending, a last byte arriving) or the earliest flow to drain.
Flows that drain at the same instant (within a relative 1e-9) end together, which keeps
symmetric patterns to one rate computation per wave.

`flow_model` runs it compiled (`collops.sim.flow_compiled`: the same events in C, flows
drained lazily, rates repaired locally) when that was built; `FlowSimulation` below is the
readable reference the tests hold the compiled run to.

What it models: bandwidth sharing among concurrent messages as it evolves (a rank moves on
when its own sends finish, not when a round ends), windows, per-message overhead and per-hop
latency. What it does not: packets, buffers and back-pressure (a flow holds its whole route
at once and never waits for buffer space), head-of-line blocking, protocol effects (eager or
rendezvous hand-shakes), and the CPU time of receiving.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from ..topology.base import csr_gather
from .congestion import RoundStats, wire_bytes
from .maxmin import max_min_rates_of_routes
from .program import Program
from .ranks import WindowedRanks
from .timeline import LinkTimeline

#: a flow within this fraction of its bytes from the end has drained
DRAINED = 1e-9
# timed events
_READY, _ISSUED, _ARRIVED, _LOCAL_DONE = range(4)


@dataclass(frozen=True, eq=False)
class FlowOutcome:
    """What the flow model measured for one program."""

    time_s: float
    link_loads: np.ndarray  # wire bytes carried by every link
    message_done_s: np.ndarray  # arrival time of every message's last byte
    rate_updates: int  # how often the max-min rates were recomputed
    hotspots: RoundStats  # per time window: the link that carried the most bytes
    refilled_flows: int = 0  # flows whose rates were filled, summed over the rate updates


@dataclass(frozen=True, eq=False)
class FlowNetwork:
    """Every message's route and wire bytes, and the links' capacities and loads."""

    route_offsets: np.ndarray  # CSR: message m crosses route_links[offsets[m]:offsets[m+1]]
    route_links: np.ndarray  # int32 link ids (half the memory of int64 at 4096 ranks)
    capacity: np.ndarray  # bytes/s of every link
    route_latency: np.ndarray  # seconds from a message's source to its destination
    wire: np.ndarray  # wire bytes of every message (float64)
    link_loads: np.ndarray  # wire bytes carried by every link


def flow_network(program: Program, topology: object, placement: np.ndarray,
                 excluded: Iterable[int] = frozenset()) -> FlowNetwork:
    """The routes, wire bytes, capacities and loads of a program's messages (routes taken
    from the topology in chunks, so that only the int32 link ids of all routes are held)."""
    params = topology.params  # type: ignore[attr-defined]
    nodes = np.asarray(placement, dtype=np.int64)
    capacity = np.asarray(topology.link_bandwidth, dtype=np.float64)  # type: ignore[attr-defined]
    latency = np.asarray(topology.link_latency, dtype=np.float64)  # type: ignore[attr-defined]
    if len(capacity) >= 1 << 31:
        raise ValueError(f"{len(capacity)} links: the flow model numbers links in int32")
    wire = np.asarray(wire_bytes(program.msg_bytes, params.packet_size, params.header_bytes),
                      dtype=np.float64)
    n = program.num_messages
    route_offsets = np.zeros(n + 1, dtype=np.int64)
    route_latency = np.zeros(n)
    loads = np.zeros(len(capacity))
    pieces = []
    for start, stop, offsets, links in topology.route_chunks(  # type: ignore[attr-defined]
            nodes[program.msg_src], nodes[program.msg_dst], frozenset(int(x) for x in excluded)):
        offsets = np.asarray(offsets, dtype=np.int64)
        links = np.asarray(links, dtype=np.int32)
        route_offsets[start + 1:stop + 1] = route_offsets[start] + offsets[1:]
        along = np.r_[0.0, np.cumsum(latency[links])]
        route_latency[start:stop] = along[offsets[1:]] - along[offsets[:-1]]
        loads += np.bincount(links, weights=np.repeat(wire[start:stop], np.diff(offsets)),
                             minlength=len(capacity))
        pieces.append(links)
    route_links = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int32)
    return FlowNetwork(route_offsets, route_links, capacity, route_latency, wire, loads)


class FlowSimulation(WindowedRanks):
    """One flow-level run of a program in Python (build, then `run`): the readable reference
    of the compiled run (`collops.sim.flow_compiled`), which the tests hold to it."""

    def __init__(self, program: Program, topology: object, placement: np.ndarray, *,
                 excluded: Iterable[int] = frozenset(), gamma: float = 0.0, window: int = 0,
                 progress: Callable[[int, int], None] | None = None) -> None:
        if window < 0:
            raise ValueError(f"window must be >= 0, not {window}")
        params = topology.params  # type: ignore[attr-defined]
        self.program = program
        self.window = int(window)
        self.overhead = float(params.overhead)
        self.bandwidth = float(params.bandwidth)
        self.gamma = float(gamma)
        self.progress = progress
        net = flow_network(program, topology, placement, excluded)
        self.route_offsets, self.route_links = net.route_offsets, net.route_links.astype(np.int64)
        self.capacity, self.wire, self.link_loads = net.capacity, net.wire, net.link_loads
        self.route_latency = net.route_latency.tolist()
        self._init_ranks(program)
        self.msg_done = np.zeros(program.num_messages)
        # timed events and flows in the network
        self.now = 0.0
        self.events: list[tuple[float, int, int, int]] = []
        self.sequence = 0
        # the flows in the network: the first `active` entries (message id, bytes left, rate)
        self.active = 0
        self.flow_msg = np.zeros(program.num_messages, dtype=np.int64)
        self.flow_left = np.zeros(program.num_messages)
        self.flow_rate = np.zeros(program.num_messages)
        self.rates_stale = False
        self.rate_updates = 0
        self.refilled_flows = 0
        self.timeline = LinkTimeline(len(self.capacity))
        self.link_rate: np.ndarray = np.zeros(len(self.capacity))

    # -- the run loop ------------------------------------------------------------------
    def run(self) -> FlowOutcome:
        """Run to completion and return the measurements."""
        for step in np.flatnonzero(np.asarray(self.waiting) == 0).tolist():
            self._at(0.0, _READY, step)
        total = len(self.kind)
        while self.events or self.active:
            if self.events and self.events[0][0] <= self.now:  # everything due now, before
                self._handle_due()                              # the rates are recomputed
                continue
            if self.rates_stale:
                self._update_rates()
            next_event = self.events[0][0] if self.events else np.inf
            n = self.active
            with np.errstate(divide="ignore", invalid="ignore"):  # an empty flow drains now
                drain = np.where(self.flow_left[:n] > 0, self.flow_left[:n] / self.flow_rate[:n],
                                 0.0)
            soonest = max(0.0, float(drain.min())) if n else np.inf
            if self.now + soonest <= next_event:
                done = drain <= soonest * (1 + DRAINED)  # the first to drain is always in
                self._advance(self.now + soonest)
                self._drain(done)
            else:
                self._advance(next_event)
                self._handle_due()
            if self.progress is not None:
                self.progress(self.steps_done, total)
        if self.steps_done != total:
            raise RuntimeError(f"flow model stalled: {total - self.steps_done} steps never ran")
        return FlowOutcome(self.finished, self.link_loads, self.msg_done, self.rate_updates,
                           self.timeline.stats(self.finished), self.refilled_flows)

    def _at(self, time: float, what: int, item: int) -> None:
        self.sequence += 1
        heapq.heappush(self.events, (time, self.sequence, what, item))

    def _advance(self, time: float) -> None:
        """Move the clock to ``time``; flows in the network drain at their rates meanwhile."""
        n = self.active
        if n and time > self.now:
            self.flow_left[:n] -= self.flow_rate[:n] * (time - self.now)
            self.timeline.add(self.now, time, self.link_rate)
        self.now = time

    def _update_rates(self) -> None:
        n = self.active
        self.flow_rate[:n] = max_min_rates_of_routes(
            self.flow_msg[:n], self.route_offsets, self.route_links, self.capacity,
            self.bandwidth)
        flows = self.flow_msg[:n]
        hops = self.route_offsets[flows + 1] - self.route_offsets[flows]
        self.link_rate = np.bincount(
            self.route_links[csr_gather(self.route_offsets, flows)],
            weights=np.repeat(np.minimum(self.flow_rate[:n], self.bandwidth), hops),
            minlength=len(self.capacity))
        self.rates_stale = False
        self.rate_updates += 1
        self.refilled_flows += n

    def _drain(self, done: np.ndarray) -> None:
        """The flows marked ``done`` left their source: their last byte is on its way."""
        n = self.active
        for msg in self.flow_msg[:n][done].tolist():
            self._at(self.now + self.route_latency[msg], _ARRIVED, msg)
        keep = np.flatnonzero(~done)
        kept = len(keep)
        self.flow_msg[:kept] = self.flow_msg[keep]
        self.flow_left[:kept] = self.flow_left[keep]
        self.flow_rate[:kept] = self.flow_rate[keep]
        self.active = kept
        self.rates_stale = True

    # -- steps -------------------------------------------------------------------------
    def _handle_due(self) -> None:
        """Handle every timed event due by now (those they schedule for now included)."""
        while self.events and self.events[0][0] <= self.now:
            _, _, what, item = heapq.heappop(self.events)
            self._handle(what, item)

    def _handle(self, what: int, item: int) -> None:
        if what == _READY:
            self._ready(item)
        elif what == _ISSUED:
            self._start_flow(item)
        elif what == _ARRIVED:
            self._arrived(item)
        else:
            self._complete(item)

    def _clock(self) -> float:
        return self.now

    def _issue_at(self, time: float, step: int) -> None:
        self._at(time, _ISSUED, step)

    def _local_done_at(self, time: float, step: int) -> None:
        self._at(time, _LOCAL_DONE, step)

    def _start_flow(self, step: int) -> None:
        msg = self.msg_of_send[step]
        n = self.active
        self.flow_msg[n], self.flow_left[n], self.flow_rate[n] = msg, self.wire[msg], 0.0
        self.active = n + 1
        self.rates_stale = True
        self.timeline.started(self.now)
        self._complete(step)  # a send's successors wait for its issue only

    def _arrived(self, msg: int) -> None:
        self.msg_done[msg] = self.now
        self._message_arrived(msg)


#: the ε of ``approx`` without one
DEFAULT_EPS = 0.05


def parse_maxmin(text: str) -> float:
    """The relative ε of a max-min repair spec: ``exact`` → 0, ``approx`` → 0.05,
    ``approx:eps=E`` → E (0 <= E < 1; 0 is the exact repair)."""
    name, _, rest = text.strip().partition(":")
    if name == "exact" and not rest:
        return 0.0
    if name == "approx":
        if not rest:
            return DEFAULT_EPS
        key, _, value = rest.partition("=")
        try:
            eps = float(value) if key.strip() == "eps" else -1.0
        except ValueError:
            eps = -1.0
        if 0.0 <= eps < 1.0:
            return eps
    raise ValueError(f"max-min repair {text!r}: use exact, approx or approx:eps=E (0 <= E < 1)")


def flow_model(program: Program, topology: object, placement: np.ndarray,
               compiled: bool = True, **options: object) -> FlowOutcome:
    """Run the flow model (options: excluded, gamma, window, progress, maxmin_eps); compiled
    when the C run is built and ``compiled`` is true, else the Python reference (exact only)."""
    from . import flow_compiled
    if compiled and flow_compiled.available():
        return flow_compiled.run(program, topology, placement, **options)  # type: ignore[arg-type]
    if options.pop("maxmin_eps", 0.0):
        raise RuntimeError("the approximate max-min repair needs collops.sim._flowsim (built "
                           "with a C compiler)")
    return FlowSimulation(program, topology, placement, **options).run()  # type: ignore[arg-type]
