"""The packet model with finite buffers: input queues, credits and end-to-end completion.

The packet model proper (`collops.sim.packet`) queues packets at the links they are about to
cross, without bound: a hot destination delays only the packets bound for it. This model
gives every router what a real one has — a buffer of ``buffer_packets`` packets at the end of
every incoming link — and runs it packet by packet:

* **Input queues.** A packet that crossed link l waits in l's buffer at the next node, in
  arrival order. Only the packet at the head of a buffer may move on: when it waits for a busy
  or full output, the packets behind it wait too, even those bound for an idle output
  (*head-of-line blocking*). A packet that has reached its destination leaves its buffer at
  once (the node consumes it).
* **Credits (back-pressure).** A link may start sending a packet only when the buffer at its
  far end has a free slot; the slot is reserved when the packet starts and given back (a
  credit, returned without delay) when the packet leaves that buffer. A full buffer stops the
  link feeding it, which fills the buffer behind it, and so on back to the senders.
* **Links.** A link sends one packet at a time, ``wire_bytes / link_bandwidth`` each; the
  packet reaches the next node the link's latency later. When a link is free, has a credit
  and several buffers' heads want it, it takes them in the order they asked (first come,
  first served; a buffer whose next packet wants the same link asks again, behind the others,
  which shares a link round-robin among its inputs).
* **Ranks.** Each node has ``injection_links`` injection queues (unbounded, at the node):
  after its ``overhead`` a send puts all its packets into the queue holding the fewest, and
  its successors in the schedule may run (an eager send). A rank keeps at most ``window``
  sends in flight (0: no limit); a send is in flight until its last packet has reached the
  destination (end-to-end), then the rank issues its next ready send in schedule order. A
  receive completes when its last packet has arrived and its local dependencies are done.
  Copies and reduces cost ``bytes × gamma`` of the rank's CPU, as in the other models.

With ``buffer_packets = 0`` buffers are unbounded (no back-pressure) but still first in,
first out, so head-of-line blocking remains. What it does not model: virtual channels
(deadlock on a torus with wrap-around links is possible in principle; a stall is reported),
adaptive routing, credit latency, and the CPU time of receiving.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

import numpy as np

from .des import Environment
from .packet import PacketOutcome, packet_units
from .program import Program
from .ranks import WindowedRanks

UNBOUNDED = 1 << 62

# a packet: [message, hop index of the link it last crossed (-1: at its source), wire bytes]
Packet = tuple[int, int, int]


class CreditPacketSimulation(WindowedRanks):
    """One run of the buffered packet model (build, then `run`)."""

    def __init__(self, program: Program, topology: object, placement: np.ndarray, *,
                 excluded: Iterable[int] = frozenset(), gamma: float = 0.0,
                 window: int = 0, buffer_packets: int | None = None, seed: int = 0,
                 progress: Callable[[int, int], None] | None = None) -> None:
        params = topology.params  # type: ignore[attr-defined]
        self.env = Environment(seed=seed)
        self.window = int(window)
        self.overhead = float(params.overhead)
        self.bandwidth = float(params.bandwidth)
        self.gamma = float(gamma)
        self.progress = progress
        self.payload = int(params.packet_size) - int(params.header_bytes)
        self.header = int(params.header_bytes)
        slots = int(params.buffer_packets if buffer_packets is None else buffer_packets)
        nodes = np.asarray(placement, dtype=np.int64)
        offsets, links = topology.routes(  # type: ignore[attr-defined]
            nodes[program.msg_src], nodes[program.msg_dst],
            frozenset(int(x) for x in excluded))
        self.route_offsets = offsets.tolist()
        self.route_links = links.tolist()
        num_links = int(topology.num_links)  # type: ignore[attr-defined]
        self.num_links = num_links
        self.link_bandwidth = np.asarray(topology.link_bandwidth,  # type: ignore[attr-defined]
                                         dtype=np.float64).tolist()
        self.link_latency = np.asarray(topology.link_latency,  # type: ignore[attr-defined]
                                       dtype=np.float64).tolist()
        self.link_bytes = [0.0] * num_links
        self.hop_log: list[tuple[float, int, int]] = []  # (start, link, bytes) of every hop
        # queues 0..num_links-1: the buffer at the end of each link; then the injection
        # queues, `inj` per rank
        inj = max(1, int(topology.injection_links))  # type: ignore[attr-defined]
        self.inj = inj
        self.queue: list[deque[Packet]] = [deque() for _ in range(num_links
                                                                   + program.nranks * inj)]
        self.credits = [slots if slots > 0 else UNBOUNDED] * num_links
        self.busy = [False] * num_links
        self.asking: list[deque[int]] = [deque() for _ in range(num_links)]
        self._init_ranks(program)
        self.msg_bytes = program.msg_bytes.tolist()
        self.packets_left = [0] * program.num_messages
        self.msg_done = [0.0] * program.num_messages
        self.packets = 0

    # -- the run -----------------------------------------------------------------------
    def run(self) -> PacketOutcome:
        """Run to completion and return the measurements."""
        env = self.env
        for step in [i for i, w in enumerate(self.waiting) if w == 0]:
            env.call_at(0.0, self._ready, step)
        total = len(self.kind)
        while env._queue:
            env.step()
            if self.progress is not None and env.processed_events % 4096 == 0:
                self.progress(min(self.steps_done, total), total)
        if self.steps_done != total:
            raise RuntimeError(f"buffered packet model stalled: {total - self.steps_done} "
                               "steps never ran (buffers full in a cycle)")
        return PacketOutcome(self.finished, np.asarray(self.link_bytes), self.packets,
                             env.processed_events, np.asarray(self.msg_done),
                             hop_log=self.hop_log)

    # -- ranks -------------------------------------------------------------------------
    def _clock(self) -> float:
        return self.env.now

    def _issue_at(self, time: float, step: int) -> None:
        self.env.call_at(time, self._inject, step)

    def _local_done_at(self, time: float, step: int) -> None:
        self.env.call_at(time, self._complete, step)

    def _inject(self, step: int) -> None:
        msg, rank = self.msg_of_send[step], self.step_rank[step]
        units = packet_units(self.msg_bytes[msg], self.payload, self.header, "packet")
        self.packets_left[msg] = len(units)
        self.packets += len(units)
        if self.route_offsets[msg + 1] == self.route_offsets[msg]:  # same node: a copy
            self.env.call_at(self.env.now + sum(units) / self.bandwidth, self._local, msg)
        else:
            first = self.num_links + rank * self.inj
            queue = min(range(first, first + self.inj), key=lambda q: len(self.queue[q]))
            was_empty = not self.queue[queue]
            self.queue[queue].extend((msg, -1, size) for size in units)
            if was_empty:
                self._head_moved(queue)
        self._complete(step)  # a send's successors wait for its issue only

    def _local(self, msg: int) -> None:
        self.packets_left[msg] = 1
        self._delivered(msg)

    def _delivered(self, msg: int) -> None:
        """One more packet of ``msg`` reached its destination."""
        self.packets_left[msg] -= 1
        if self.packets_left[msg] == 0:
            self.msg_done[msg] = self.env.now
            self._message_arrived(msg)

    # -- the network -------------------------------------------------------------------
    def _head_moved(self, queue: int) -> None:
        """The packet now at the head of ``queue`` asks for its next link (or leaves)."""
        while self.queue[queue]:
            msg, hop, _ = self.queue[queue][0]
            nxt = hop + 1
            if nxt == self.route_offsets[msg + 1] - self.route_offsets[msg]:
                self.queue[queue].popleft()  # at its destination: consumed at once
                self._credit(queue)
                self._delivered(msg)
                continue
            link = self.route_links[self.route_offsets[msg] + nxt]
            self.asking[link].append(queue)
            self._try_send(link)
            return

    def _credit(self, queue: int) -> None:
        """A packet left ``queue``: if it is a link's buffer, that link gets a credit back
        (acted on as an event of this instant, so credit chains do not nest calls)."""
        if queue < self.num_links:
            self.credits[queue] += 1
            self.env.call_at(self.env.now, self._try_send, queue)

    def _try_send(self, link: int) -> None:
        """Start the next packet on ``link`` if it is free, has a credit and is asked for."""
        if self.busy[link] or self.credits[link] == 0 or not self.asking[link]:
            return
        queue = self.asking[link].popleft()
        msg, hop, size = self.queue[queue].popleft()
        self.credits[link] -= 1
        self.busy[link] = True
        now = self.env.now
        end = now + size / self.link_bandwidth[link]
        self.link_bytes[link] += size
        self.hop_log.append((now, link, size))
        self.env.call_at(end, self._link_free, link)
        self.env.call_at(end + self.link_latency[link], self._arrive, (link, (msg, hop + 1, size)))
        self._credit(queue)
        self._head_moved(queue)

    def _link_free(self, link: int) -> None:
        self.busy[link] = False
        self._try_send(link)

    def _arrive(self, item: tuple[int, Packet]) -> None:
        link, packet = item
        self.queue[link].append(packet)
        if len(self.queue[link]) == 1:
            self._head_moved(link)
