"""The buffered packet model against timelines worked out by hand.

Units: packets of 256 bytes on links of 256 MB/s, so a packet crosses a link in 1 µs; no
overhead, no local copies. Each expected time is derived in the test's docstring."""

from __future__ import annotations

import numpy as np
import pytest

from collops.schedule import RECV as RECV_AREA
from collops.schedule import SEND, ScheduleBuilder
from collops.sim.credit import CreditPacketSimulation
from collops.sim.packet import PacketSimulation
from collops.sim.program import program_from_schedules
from collops.topology import NetworkParams, parse_topology

US = 1e-6
PACKET = 256


def _params(latency_us: float = 0.0, buffers: int = 0) -> NetworkParams:
    return NetworkParams(bandwidth=PACKET / US, hop_latency=latency_us * US,
                         packet_size=PACKET, overhead=0.0, buffer_packets=buffers)


def _program(p: int, messages: list[tuple[int, int, int]]):
    """Schedules sending ``(src, dst, packets)`` in list order per rank, receives posted."""
    builders = []
    for r in range(p):
        out = sum(n for s, _, n in messages if s == r) * PACKET
        into = sum(n for _, d, n in messages if d == r) * PACKET
        builders.append(ScheduleBuilder(r, p, send=out, recv=into))
    sent, got = [0] * p, [0] * p
    for s, d, n in messages:
        builders[s].send(d, SEND(sent[s], n * PACKET))
        builders[d].recv(s, RECV_AREA(got[d], n * PACKET))
        sent[s] += n * PACKET
        got[d] += n * PACKET
    return program_from_schedules([b.build() for b in builders], 1)


def _run(spec: str, params: NetworkParams, messages: list[tuple[int, int, int]],
         window: int = 0) -> np.ndarray:
    topo = parse_topology(spec, params)
    program = _program(topo.num_compute_nodes, messages)
    outcome = CreditPacketSimulation(program, topo, topo.compute_nodes, window=window).run()
    done = np.zeros(len(messages))
    # messages are numbered by send step; map them back to the list's order
    for i, (s, d, _) in enumerate(messages):
        mine = np.flatnonzero((program.msg_src == s) & (program.msg_dst == d))
        done[i] = outcome.message_done_s[mine[0]]
    return done / US


@pytest.mark.parametrize("buffers", [0, 1, 2, 5])
def test_pipeline_without_latency(buffers: int) -> None:
    """3 packets over 2 hops: the packets pipeline, (n + h − 1) packet times = 4 µs, whatever
    the buffers (a credit comes back the instant a packet moves on)."""
    done = _run("mesh:1x3", _params(buffers=buffers), [(0, 2, 3)])
    assert done[0] == pytest.approx(4.0)


@pytest.mark.parametrize(("buffers", "expected"), [(1, 6.0), (2, 5.0), (0, 5.0)])
def test_one_packet_buffers_stall_the_pipeline(buffers: int, expected: float) -> None:
    """3 packets over links 0→1 (a), 1→2 (b), latency 0.5 µs. Unbounded or 2 slots: a sends
    at 0, 1, 2; b at 1.5, 2.5, 3.5; the last arrives at 5. One slot: packet 2 may enter a
    only when packet 1 leaves a's buffer (1.5): a at 0, 1.5, 3; b at 1.5, 3, 4.5; the last
    arrives at 6 µs."""
    done = _run("mesh:1x3", _params(latency_us=0.5, buffers=buffers), [(0, 2, 3)])
    assert done[0] == pytest.approx(expected)


def test_head_of_line_blocking() -> None:
    """switch:4. Host 0 sends X (4 packets) to host 1, then Y (1 packet) to host 2; host 3
    sends Z (4 packets) to host 1. The hub's link to host 1 serves X and Z in turns from
    t = 1: X at 1, 3, 5, 7 and Z at 2, 4, 6, 8. Y reaches the hub at 5, behind X's packets in
    the buffer of link 0→hub, and can take the idle link to host 2 only when X's last packet
    leaves (7): it arrives at 8 µs. The unbuffered packet model queues at the output links,
    so Y crosses the hub at once: 4–5 on 0→hub, 5–6 to host 2."""
    messages = [(0, 1, 4), (0, 2, 1), (3, 1, 4)]
    done = _run("switch:4", _params(), messages)
    assert done.tolist() == pytest.approx([8.0, 8.0, 9.0])
    topo = parse_topology("switch:4", _params())
    program = _program(4, messages)
    plain = PacketSimulation(program, topo, topo.compute_nodes).run()
    y = np.flatnonzero((program.msg_src == 0) & (program.msg_dst == 2))[0]
    assert plain.message_done_s[y] / US == pytest.approx(6.0)


def test_back_pressure_reaches_the_sender() -> None:
    """As above with one slot per buffer. X1 crosses the hub at 1–2, then Z1 at 2–3 while X2
    waits in the hub's buffer of 0→hub, which is full: Y's packet cannot enter link 0→hub
    until X2 leaves it (3), crosses it at 3–4 and reaches host 2 at 5 — X2 crossed at 3–4
    and Z2 at 4–5, X ends at 4."""
    done = _run("switch:4", _params(buffers=1), [(0, 1, 2), (0, 2, 1), (3, 1, 2)])
    assert done.tolist() == pytest.approx([4.0, 5.0, 5.0])


@pytest.mark.parametrize(("window", "expected"), [(1, [3.0, 5.0]), (0, [3.0, 4.0])])
def test_window_counts_a_send_until_its_last_packet_arrives(window: int,
                                                            expected: list[float]) -> None:
    """switch:4, host 0 sends 2 packets to host 1, then 1 packet to host 2. The first
    arrives at 3 (0→hub at 0 and 1, hub→1 at 1 and 2). With a window of one the second is
    issued only then: 3–4, 4–5. Without, its packet follows at once: 2–3, 3–4."""
    done = _run("switch:4", _params(), [(0, 1, 2), (0, 2, 1)], window=window)
    assert done.tolist() == pytest.approx(expected)
