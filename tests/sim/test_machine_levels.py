"""The simulator on a machine hierarchy: every link at its own level's bandwidth and latency
(issue 6: the simulator models the hierarchy, so affinity's benefit shows in numbers).

The expected times are worked out by hand from the `LevelParams`: a message between two
hardware threads climbs to the lowest level L they share and down again (links of levels
1..L, then L..1), pays level L's latency once in all and streams at the bandwidth of its
slowest link.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from collops.errors import ArgumentError
from collops.sim import simulate
from collops.topology import Machine, MachineNetwork, parse_topology
from collops.topology.machine import DEFAULT_LEVELS, LevelParams

NBYTES = 1 << 20
#: deliberately unlike the defaults: 1 µs / 1 GB/s in a core, 3 µs / 0.5 GB/s in a module,
#: 10 µs / 0.1 GB/s across modules
LEVELS = (LevelParams(1e-6, 1e9), LevelParams(3e-6, 5e8), LevelParams(1e-5, 1e8))
MACHINE = Machine((2, 2, 2), LEVELS)        # modules x cores x threads
NEAR, MIDDLE, FAR = [0, 1], [0, 2], [0, 4]  # same core, same module, different modules


def _one_message(net: MachineNetwork, placement: list[int], nbytes: int,
                 model: str = "congestion") -> float:
    """Time of a two-rank bcast (one message) without local copy time."""
    result = simulate("bcast", "binomial", net, 2, nbytes, model=model, placement=placement,
                      gamma=0.0)
    assert result.messages == 1
    return result.time_s


def test_a_message_pays_the_bandwidth_and_latency_of_the_levels_it_crosses():
    net = MachineNetwork("machine:2x2x2")
    core, module, node = DEFAULT_LEVELS[:3]
    near = _one_message(net, NEAR, NBYTES)
    far = _one_message(net, FAR, NBYTES)
    # by hand: the far message's slowest link is a node link and its latency the node's
    expected = (NBYTES / node.bandwidth - NBYTES / core.bandwidth
                + node.latency - core.latency)
    assert far - near == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(("placement", "level"), [(NEAR, 0), (MIDDLE, 1), (FAR, 2)])
def test_congestion_time_is_overhead_latency_and_bytes_over_the_crossed_level(placement, level):
    net = MachineNetwork(MACHINE)
    nbytes = 4096
    crossed = LEVELS[level]
    by_hand = net.params.overhead + crossed.latency + nbytes / crossed.bandwidth
    assert _one_message(net, placement, nbytes) == pytest.approx(by_hand, rel=1e-12)


@pytest.mark.parametrize(("placement", "level"), [(NEAR, 0), (MIDDLE, 1), (FAR, 2)])
def test_packet_time_pipelines_through_links_of_every_level_crossed(placement, level):
    net = MachineNetwork(MACHINE)
    packet = net.params.packet_size - net.params.header_bytes
    packets = 4
    # the route: links of levels 1..L up, then L..1 down, each a FIFO at its level's speed;
    # identical packets through servers in series: the sum of one packet's service times,
    # plus (packets - 1) at the slowest, plus the latencies (level L's, in all)
    route = [p.bandwidth for p in LEVELS[:level + 1]] * 2
    by_hand = (net.params.overhead + sum(packet / bw for bw in route)
               + (packets - 1) * packet / min(route) + LEVELS[level].latency)
    measured = _one_message(net, placement, packets * packet, model="packet")
    assert measured == pytest.approx(by_hand, rel=1e-12)


def test_route_latencies_add_up_to_each_levels_latency():
    net = MachineNetwork(MACHINE)
    threads = np.arange(MACHINE.threads)
    src, dst = np.zeros_like(threads), threads
    offsets, links = net.routes(src, dst)
    along = np.r_[0.0, np.cumsum(net.link_latency[links])]
    per_route = along[offsets[1:]] - along[offsets[:-1]]
    levels = MACHINE.crossing_level(src, dst)
    expected = np.array([0.0] + [p.latency for p in LEVELS])[levels]
    assert per_route == pytest.approx(expected, rel=1e-12)
    assert not net.uniform_links
    assert net.link_bandwidth.tolist() == [LEVELS[lv - 1].bandwidth
                                           for lv in net.link_level.tolist()]


def test_a_level_faster_than_the_one_below_adds_no_latency():
    odd = Machine((2, 2), (LevelParams(5e-6, 1e9), LevelParams(2e-6, 1e9)))
    net = MachineNetwork(odd)
    assert net.link_latency.min() >= 0.0
    assert float(net.link_latency[net.link_level == 2].max()) == 0.0


def test_per_link_values_are_checked_and_survive_pickling():
    with pytest.raises(ArgumentError):
        MachineNetwork(Machine((2, 2), (LevelParams(1e-6, 0.0), LevelParams(1e-6, 1e9))))
    net = MachineNetwork(MACHINE)
    again = pickle.loads(pickle.dumps(net))
    assert again == net and again.machine.levels == LEVELS
    assert again.link_bandwidth.tolist() == net.link_bandwidth.tolist()
    assert again.link_latency.tolist() == net.link_latency.tolist()


@pytest.mark.parametrize("spec", ["torus:4x4", "ring:5", "fattree:4", "hypercube:3"])
def test_uniform_topologies_give_every_link_the_network_parameters(spec):
    topo = parse_topology(spec)
    assert topo.uniform_links
    assert topo.link_bandwidth.shape == (topo.num_links,)
    assert set(topo.link_bandwidth.tolist()) == {topo.params.bandwidth}
    assert set(topo.link_latency.tolist()) == {topo.params.hop_latency}
    assert not topo.link_bandwidth.flags.writeable


@pytest.mark.parametrize("model", ["congestion", "packet"])
def test_uniform_ring_time_is_unchanged_alpha_beta(model):
    # ring allgather on ring:P is (p - 1)(α + m β) plus one hop latency per step
    p, nbytes = 8, 256
    topo = parse_topology(f"ring:{p}")
    params = topo.params
    result = simulate("allgather", "ring", topo, p, nbytes, model=model, gamma=0.0)
    by_hand = (p - 1) * (params.overhead + params.hop_latency + nbytes / params.bandwidth)
    assert result.time_s == pytest.approx(by_hand, rel=1e-9)


def test_affinity_tree_beats_binomial_in_simulation_when_ranks_are_spread():
    from collops.endpoints.affinity import compare_on_machine

    for model in ("congestion", "packet"):
        rows = {r.algorithm: r for r in compare_on_machine("reduce", "machine:4x8x2", 65536,
                                                           "spread", model=model)}
        assert rows["affinity_tree"].simulated_s < rows["binomial"].simulated_s / 1.5, model
