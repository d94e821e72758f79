"""The packet-level model: every packet through every link's FIFO queue, in simulated time.

It runs on the discrete-event core (`collops.sim.des`) with plain callbacks, one event per
packet per hop, and executes the schedules themselves:

* **Ranks.** A step becomes ready when its local dependencies have completed. Each rank has
  one CPU: a send first costs ``overhead`` (α) of CPU time, a copy or reduce step costs
  ``bytes × gamma``; CPU work is served in the order steps become ready (ties: step id, i.e.
  schedule order). A receive completes when its local dependencies have completed *and* the
  last packet of its message has arrived.
* **Injection.** A node has ``injection_links`` injection engines. After its overhead a send
  takes the earliest free engine (issue order is kept), which streams the message's packets
  into the first link of its route at link speed; the send step completes when the last
  packet has been handed over (an eager send: the buffer is free again).
* **Links.** Every directed link is a FIFO server of its own bandwidth (``link_bandwidth``
  of the topology: ``bandwidth`` on uniform networks, its level's on a machine hierarchy). A
  packet arriving at a link waits until the link is free, occupies it for
  ``wire_bytes/link_bandwidth`` and reaches the next node the link's latency
  (``link_latency``; ``hop_latency`` on uniform networks) later, where it joins the next
  link's queue. An injection engine streams at the speed of the route's first link.
  Because service times are known on arrival, a link's queue is its "free at" time: a
  packet processed at time t starts at max(t, free_at) — FIFO in arrival order, ties broken
  by the event sequence number.
* **Switching.** ``switching="packet"``: messages travel as packets of ``packet_size`` bytes
  (``header_bytes`` of them header), each stored and forwarded per hop, so a message's
  packets pipeline along the route (cut-through at packet granularity).
  ``switching="message"``: the whole message is one unit, stored and forwarded at every hop
  (the seed-004 "message switching" baseline): time grows with hops × message size.

The run is deterministic: the same inputs give the same event order and the same times.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from ..schedule import StepKind
from .des import Environment
from .program import Program, step_lists

SEND, RECV = int(StepKind.SEND), int(StepKind.RECV)


@dataclass(frozen=True, eq=False)
class PacketOutcome:
    """What the packet model measured for one program."""

    time_s: float
    link_loads: np.ndarray
    packets: int
    events: int
    message_done_s: np.ndarray  # arrival time of every message's last packet
    hop_log: list[tuple[float, int, int]] | None = None  # (start, link, bytes) of every hop


def packet_units(nbytes: int, payload: int, header: int, switching: str) -> list[int]:
    """Wire sizes of the units a message of ``nbytes`` travels as: packets of ``payload``
    bytes plus ``header`` each, or (``switching="message"``) one unit of them all."""
    if switching == "message":
        packets = max(1, -(-nbytes // payload)) if header else 1
        return [nbytes + packets * header]
    full, rest = divmod(nbytes, payload)
    units = [payload + header] * full
    if rest or not units:
        units.append(rest + header)
    return units


class PacketSimulation:
    """One packet-level run of a program (build, then `run`)."""

    def __init__(self, program: Program, topology: object, placement: np.ndarray, *,
                 excluded: Iterable[int] = frozenset(), gamma: float = 0.0,
                 switching: str = "packet", seed: int = 0,
                 progress: Callable[[int, int], None] | None = None) -> None:
        if program.step_kind is None:
            raise ValueError("the packet model needs a program built from schedules")
        if switching not in ("packet", "message"):
            raise ValueError(f"switching must be 'packet' or 'message', not {switching!r}")
        params = topology.params  # type: ignore[attr-defined]
        self.env = Environment(seed=seed)
        self.program = program
        self.bandwidth = float(params.bandwidth)
        self.hop_latency = float(params.hop_latency)
        self.overhead = float(params.overhead)
        self.gamma = float(gamma)
        self.progress = progress
        self.packet_payload = int(params.packet_size) - int(params.header_bytes)
        self.header = int(params.header_bytes)
        self.switching = switching
        nodes = np.asarray(placement, dtype=np.int64)
        msg_src_node = nodes[program.msg_src]
        msg_dst_node = nodes[program.msg_dst]
        offsets, links = topology.routes(  # type: ignore[attr-defined]
            msg_src_node, msg_dst_node, frozenset(int(x) for x in excluded))
        self.route_offsets = offsets.tolist()
        self.route_links = links.tolist()
        self.num_links = int(topology.num_links)  # type: ignore[attr-defined]
        # per link: its bandwidth and its latency to the next node
        self.link_bandwidth = np.asarray(
            topology.link_bandwidth, dtype=np.float64).tolist()  # type: ignore[attr-defined]
        self.link_latency = np.asarray(
            topology.link_latency, dtype=np.float64).tolist()  # type: ignore[attr-defined]
        self.link_free = [0.0] * self.num_links
        self.link_bytes = [0.0] * self.num_links
        self.hop_log: list[tuple[float, int, int]] = []  # (start, link, bytes) of every hop
        inj = max(1, int(topology.injection_links))  # type: ignore[attr-defined]
        self.engines: list[list[float]] = [[0.0] * inj for _ in range(program.nranks)]
        self.cpu_free = [0.0] * program.nranks
        steps = step_lists(program)
        self.kind, self.step_bytes, self.step_rank = steps.kind, steps.nbytes, steps.rank
        self.succ_ptr, self.succ_idx, self.waiting = steps.succ_ptr, steps.succ_idx, steps.waiting
        self.msg_of_send, self.recv_of_msg = steps.msg_of_send, steps.recv_of_msg
        self.msg_bytes = program.msg_bytes.tolist()
        self.msg_packets_left = [0] * program.num_messages
        self.msg_done = [0.0] * program.num_messages
        self.finished = 0.0
        self.steps_done = 0
        self.packets = 0

    # -- step life cycle ---------------------------------------------------------------
    def run(self) -> PacketOutcome:
        """Run to completion and return the measurements."""
        env = self.env
        ready = [i for i, w in enumerate(self.waiting) if w == 0]
        for step in ready:
            env.call_at(0.0, self._ready, step)
        total = len(self.kind)
        report_every = max(1, total // 100)
        while env._queue:
            env.step()
            if self.progress is not None and env.processed_events % 4096 == 0:
                self.progress(min(self.steps_done, total), total)
        if self.steps_done != total:
            raise RuntimeError(f"packet model stalled: {total - self.steps_done} steps never ran")
        if self.progress is not None and total >= report_every:
            self.progress(total, total)
        return PacketOutcome(self.finished, np.asarray(self.link_bytes), self.packets,
                             env.processed_events, np.asarray(self.msg_done), self.hop_log)

    def _ready(self, step: int) -> None:
        now = self.env.now
        kind = self.kind[step]
        rank = self.step_rank[step]
        if kind == SEND:
            start = max(now, self.cpu_free[rank]) + self.overhead
            self.cpu_free[rank] = start
            self._inject(step, rank, start)
        elif kind == RECV:
            self.env.call_at(now, self._complete, step)  # its message is in (one of its waits)
        else:
            start = max(now, self.cpu_free[rank])
            end = start + self.step_bytes[step] * self.gamma
            self.cpu_free[rank] = end
            self.env.call_at(end, self._complete, step)

    def _complete(self, step: int) -> None:
        self.steps_done += 1
        now = self.env.now
        if now > self.finished:
            self.finished = now
        for i in range(self.succ_ptr[step], self.succ_ptr[step + 1]):
            nxt = self.succ_idx[i]
            self.waiting[nxt] -= 1
            if self.waiting[nxt] == 0:
                self._ready(nxt)

    # -- the network -------------------------------------------------------------------
    def _inject(self, step: int, rank: int, start: float) -> None:
        msg = self.msg_of_send[step]
        engines = self.engines[rank]
        engine = min(range(len(engines)), key=engines.__getitem__)
        t = max(start, engines[engine])
        units = packet_units(self.msg_bytes[msg], self.packet_payload, self.header,
                             self.switching)
        self.msg_packets_left[msg] = len(units)
        self.packets += len(units)
        first = self.route_offsets[msg]
        hops = self.route_offsets[msg + 1] - first
        # the engine streams at the speed of the first link (a local copy at `bandwidth`)
        bandwidth = self.link_bandwidth[self.route_links[first]] if hops else self.bandwidth
        for size in units:  # each unit enters its first link's queue as the engine starts it
            if hops == 0:
                self.env.call_at(t + size / bandwidth, self._deliver, msg)
            else:
                self.env.call_at(t, self._hop, (msg, 0, size))
            t += size / bandwidth
        engines[engine] = t
        self.env.call_at(t, self._complete, step)

    def _hop(self, packet: tuple[int, int, int]) -> None:
        msg, hop, size = packet
        now = self.env.now
        link = self.route_links[self.route_offsets[msg] + hop]
        start = now if now > self.link_free[link] else self.link_free[link]
        end = start + size / self.link_bandwidth[link]
        self.link_free[link] = end
        self.link_bytes[link] += size
        self.hop_log.append((start, link, size))
        arrive = end + self.link_latency[link]
        if hop + 1 < self.route_offsets[msg + 1] - self.route_offsets[msg]:
            self.env.call_at(arrive, self._hop, (msg, hop + 1, size))
        else:
            self.env.call_at(arrive, self._deliver, msg)

    def _deliver(self, msg: int) -> None:
        self.msg_packets_left[msg] -= 1
        if self.msg_packets_left[msg] == 0:
            self.msg_done[msg] = self.env.now
            recv = self.recv_of_msg[msg]
            self.waiting[recv] -= 1
            if self.waiting[recv] == 0:
                self._ready(recv)


def packet_model(program: Program, topology: object, placement: np.ndarray, **options: object
                 ) -> PacketOutcome:
    """Run the packet-level model (options: excluded, gamma, switching, seed, progress)."""
    return PacketSimulation(program, topology, placement, **options).run()  # type: ignore[arg-type]

