"""Without contention the simulator agrees with the α-β closed forms (within 1 %).

The expected numbers are computed here from the network parameters: α is the per-message
overhead, β = 1 / bandwidth. The closed forms have no per-hop or local-copy term, so those
are set to zero (``hop_latency=0``, ``gamma=0``); with them the costs differ by exactly those
terms, which `test_single_message_switching` checks separately.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from collops.schedule import RECV as RECV_AREA
from collops.schedule import SEND, ScheduleBuilder
from collops.sim import simulate, simulate_schedules
from collops.topology import NetworkParams, parse_topology

PARAMS = NetworkParams(bandwidth=2e9, hop_latency=0.0, packet_size=256, overhead=1e-6)
ALPHA, BETA = PARAMS.overhead, 1.0 / PARAMS.bandwidth
#: the models, the packet model also with finite buffers (credits, input queues)
MODELS = ["congestion", "flow", "packet", "packet:buffer_packets=4"]


def _network(spec: str, model: str) -> tuple[object, str]:
    """The topology and model name of a ``MODELS`` entry."""
    name, _, buffers = model.partition(":buffer_packets=")
    params = replace(PARAMS, buffer_packets=int(buffers or 0))
    return parse_topology(spec, params), name


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("p", [4, 8, 13])
def test_ring_allgather_on_ring(model: str, p: int) -> None:
    m = 32768
    topo, model = _network(f"ring:{p}", model)
    result = simulate("allgather", "ring", topo, size_bytes=m, model=model, gamma=0.0)
    expected = (p - 1) * (ALPHA + m * BETA)
    assert result.time_s == pytest.approx(expected, rel=0.01)
    assert result.messages == p * (p - 1)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("dim", [2, 3, 5])
def test_recursive_doubling_allgather_on_hypercube(model: str, dim: int) -> None:
    p, m = 2 ** dim, 8192
    topo, model = _network(f"hypercube:{dim}", model)
    result = simulate("allgather", "recursive_doubling", topo, size_bytes=m, model=model,
                      gamma=0.0)
    expected = math.log2(p) * ALPHA + (p - 1) * m * BETA
    assert result.time_s == pytest.approx(expected, rel=0.01)


def _one_message(p: int, src: int, dst: int, count: int) -> list:
    schedules = []
    for r in range(p):
        b = ScheduleBuilder(r, p, send=count if r == src else 0, recv=count if r == dst else 0)
        if r == src:
            b.send(dst, SEND(0, count))
        if r == dst:
            b.recv(src, RECV_AREA(0, count))
        schedules.append(b.build())
    return schedules


def test_single_message_switching() -> None:
    """One message over h hops: store-and-forward vs pipelined packets, from first principles."""
    params = NetworkParams(bandwidth=1e9, hop_latency=5e-8, packet_size=256, overhead=1e-6)
    topo = parse_topology("ring:8", params)
    m, hops = 64 * 256, 3
    schedules = _one_message(8, 0, 3, m)
    beta, lat = 1.0 / params.bandwidth, params.hop_latency
    message = simulate_schedules(schedules, topo, model="packet", switching="message")
    packet = simulate_schedules(schedules, topo, model="packet", switching="packet")
    assert message.time_s == pytest.approx(params.overhead + hops * (m * beta + lat), rel=1e-9)
    assert packet.time_s == pytest.approx(
        params.overhead + m * beta + hops * lat + (hops - 1) * 256 * beta, rel=1e-9)
    congestion = simulate_schedules(schedules, topo, model="congestion")
    assert congestion.time_s == pytest.approx(params.overhead + m * beta + hops * lat)
    for r in (message, packet, congestion):
        used = np.flatnonzero(r.link_loads)
        hops_taken = sorted(zip(topo.link_src[used].tolist(), topo.link_dst[used].tolist(),
                                strict=True))
        assert hops_taken == [(0, 1), (1, 2), (2, 3)]
        np.testing.assert_array_equal(r.link_loads[used], m)


def test_headers_add_wire_bytes() -> None:
    params = NetworkParams(bandwidth=1e9, hop_latency=0.0, packet_size=256, header_bytes=32,
                           overhead=0.0)
    topo = parse_topology("ring:4", params)
    m = 1000  # 224 payload bytes per packet: 5 packets, 5 headers
    schedules = _one_message(4, 0, 1, m)
    for model in ("congestion", "packet"):
        r = simulate_schedules(schedules, topo, model=model)
        assert r.link_loads.sum() == m + 5 * 32
        assert r.time_s == pytest.approx((m + 5 * 32) / 1e9)
