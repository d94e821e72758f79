"""Hot spots over time: the flow and packet models report per time window the link that
carried the most bytes, and the windows add up to the run."""

from __future__ import annotations

import numpy as np
import pytest

from collops.sim import simulate
from collops.sim.timeline import WINDOWS, LinkTimeline, hops_to_windows
from collops.topology import NetworkParams, parse_topology

PARAMS = NetworkParams(bandwidth=1e9, hop_latency=0.0, overhead=0.0, packet_size=256)


def test_link_timeline_keeps_every_byte_while_windows_double() -> None:
    line = LinkTimeline(3, windows=4, width=1.0)
    rate = np.array([2.0, 0.0, 5.0])
    line.add(0.5, 37.5, rate)  # outgrows 8 windows of 1: the width doubles to 8
    stats = line.stats(37.5)
    assert line.width == 8.0
    assert stats.time_s.sum() == pytest.approx(37.5)
    assert len(stats) == 5  # windows of 8 up to 37.5
    assert stats.hot_link.tolist() == [2] * 5
    assert stats.hot_load_bytes.sum() == pytest.approx(5.0 * 37.0)
    assert stats.hot_load_bytes[1] == pytest.approx(5.0 * 8)


def test_hop_log_binned_by_start() -> None:
    log = [(0.0, 1, 100), (0.5, 1, 100), (1.6, 0, 300), (3.9, 2, 50)]
    stats = hops_to_windows(log, 3, 4.0, windows=4)
    assert stats.hot_link.tolist() == [1, 0, 0, 2]
    assert stats.hot_load_bytes.tolist() == [200.0, 300.0, 0.0, 50.0]
    assert stats.messages.tolist() == [2, 1, 0, 1]  # the hops begun in each window
    assert stats.time_s.sum() == pytest.approx(4.0)


@pytest.mark.parametrize("model", ["flow", "packet"])
def test_one_message_fills_its_link_over_time(model: str) -> None:
    topo = parse_topology("ring:2", PARAMS)
    m = 64 * 1024
    r = simulate("bcast", "linear", topo, size_bytes=m, model=model, gamma=0.0)
    spots = r.phase_hotspots
    assert len(spots) > 1  # non-empty, and cut in time rather than in rounds
    assert spots.time_s.sum() == pytest.approx(r.time_s)
    assert spots.hot_load_bytes.sum() == pytest.approx(m, rel=1e-6)
    assert spots.mean_load_bytes is not None
    assert spots.mean_load_bytes.sum() * topo.num_links == pytest.approx(m, rel=1e-6)
    # the one link is busy at full bandwidth in every full window (the packet model puts a
    # packet's bytes in the window where it starts: within a packet of it)
    slack = 1e-6 + (0 if model == "flow" else PARAMS.packet_size)
    full = spots.hot_load_bytes[:-1] - spots.time_s[:-1] * PARAMS.bandwidth
    assert np.abs(full).max() <= slack


def test_rank_order_hot_spot_shows_over_time() -> None:
    """Every rank sends to 0 first, then 1, …: no link carries more than its bandwidth in any
    window, the hot one runs at its bandwidth at first, and the windows add up to the run."""
    topo = parse_topology("switch:8", PARAMS)
    r = simulate("alltoall", "linear", topo, size_bytes=32 * 1024, model="flow", gamma=0.0,
                 params={"order": "plain"}, window=1)
    spots = r.phase_hotspots
    assert WINDOWS <= len(spots) <= 2 * WINDOWS
    assert spots.time_s.sum() == pytest.approx(r.time_s)
    rate = spots.hot_load_bytes / spots.time_s
    assert rate.max() <= PARAMS.bandwidth * (1 + 1e-9)
    assert rate.mean() > 0.5 * PARAMS.bandwidth
    # at first all but rank 0 send to rank 0: its down-link is saturated
    assert rate[0] == pytest.approx(PARAMS.bandwidth)
