"""The congestion model on a machine hierarchy: every link at its own level's bandwidth and
latency (issue 6: the simulator models the hierarchy, so affinity's benefit shows)."""

from __future__ import annotations

import pytest

from collops.sim import simulate
from collops.topology import MachineNetwork, parse_topology
from collops.topology.machine import DEFAULT_LEVELS

NBYTES = 1 << 20


def _bcast_time(net: MachineNetwork, placement: list[int]) -> float:
    return simulate("bcast", "binomial", net, 2, NBYTES, placement=placement).time_s


def test_a_message_pays_the_bandwidth_and_latency_of_the_levels_it_crosses():
    net = MachineNetwork("machine:2x2x2")        # modules x cores x threads
    core, module, node = DEFAULT_LEVELS[:3]
    near = _bcast_time(net, [0, 1])              # two threads of one core
    far = _bcast_time(net, [0, 4])               # threads on different modules
    # by hand: the far message crosses core, module and node links up and down, so its
    # slowest link is a node link and it pays every level's latency twice
    expected = (NBYTES / node.bandwidth - NBYTES / core.bandwidth
                + 2 * (module.latency + node.latency))
    assert far - near == pytest.approx(expected, rel=1e-6)


def test_uniform_topologies_keep_one_bandwidth_for_every_link():
    torus = parse_topology("torus:4x4")
    assert getattr(torus, "link_bandwidth", None) is None


def test_affinity_tree_beats_binomial_in_simulation_when_ranks_are_spread():
    from collops.endpoints.affinity import compare_on_machine

    rows = {r.algorithm: r for r in compare_on_machine("reduce", "machine:4x8x2", 65536,
                                                       "spread")}
    assert rows["affinity_tree"].simulated_s < rows["binomial"].simulated_s
