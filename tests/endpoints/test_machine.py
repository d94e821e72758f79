"""The machine hierarchy: sysfs detection, the machine as a network, per-level costs."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from collops.endpoints.affinity import compare_on_machine
from collops.errors import ArgumentError
from collops.topology import Machine, MachineNetwork, detect_machine, parse_topology
from collops.topology.machine import DEFAULT_LEVELS, LevelParams, hierarchical_time


def test_machine_spec_parses_and_round_trips():
    net = parse_topology("machine:2x4x2")
    assert isinstance(net, MachineNetwork)
    assert net.machine.shape == (2, 4, 2) and net.num_compute_nodes == 16
    assert net.num_nodes == 16 + 8 + 2 + 1
    assert pickle.loads(pickle.dumps(net)) == net
    assert str(net) == "machine:2x4x2"
    with pytest.raises(ArgumentError):
        Machine.parse("machine:2x0")


def test_routes_climb_to_the_lowest_shared_level():
    net = MachineNetwork("machine:2x4x2")
    src = np.array([0, 0, 0, 5])
    dst = np.array([1, 2, 8, 5])
    assert net.hops(src, dst).tolist() == [2, 4, 6, 0]
    assert net.machine.crossing_level(src, dst).tolist() == [1, 2, 3, 0]
    offsets, links = net.routes(src[2:3], dst[2:3])
    assert net.link_level[links].tolist() == [1, 2, 3, 3, 2, 1]
    assert net.node_label(0) == "t0.0.0" and net.node_label(16) == "core[0]"


def test_hierarchical_time_by_hand():
    levels = (LevelParams(1.0, 100.0), LevelParams(10.0, 10.0), LevelParams(100.0, 1.0))
    m = Machine((2, 1, 2), levels)
    # phase 0: two messages into thread 1 inside its core (1 + 100/100 each, in turn);
    # phase 1: one 5-byte message across modules (100 + 5/1), also 5 s on every module link
    t = hierarchical_time(m, np.array([0, 0, 0]), np.array([1, 1, 2]), np.array([100, 100, 5]),
                          np.array([0, 0, 1]))
    assert t == pytest.approx(2 * (1 + 1) + (100 + 5))


def _fake_sysfs(tmp_path, layout):
    cpu_root = tmp_path / "cpu"
    for cpu, (package, core) in enumerate(layout):
        topo = cpu_root / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(f"{package}\n")
        (topo / "core_id").write_text(f"{core}\n")
    return cpu_root


def test_detect_machine_from_sysfs(tmp_path):
    # 2 packages x 2 cores x 2 threads, Linux-style numbering: siblings are cpu n and n+4
    layout = [(0, 0), (0, 1), (1, 0), (1, 1), (0, 0), (0, 1), (1, 0), (1, 1)]
    machine, thread_of = detect_machine(_fake_sysfs(tmp_path, layout), tmp_path / "none")
    assert machine.shape == (2, 2, 2)
    assert thread_of[0] == 0 and thread_of[4] == 1   # hyperthread siblings share core 0
    assert thread_of[1] == 2 and thread_of[2] == 4


def test_detect_machine_irregular_falls_back_to_flat(tmp_path):
    layout = [(0, 0), (0, 1), (0, 1)]
    machine, thread_of = detect_machine(_fake_sysfs(tmp_path, layout), tmp_path / "none")
    assert machine.shape == (1, 3, 1) and sorted(thread_of.values()) == [0, 1, 2]


def test_detect_this_machine():
    machine, thread_of = detect_machine()
    assert machine.threads == len(thread_of) >= 1


def test_affinity_tree_crosses_modules_least_whatever_the_mapping():
    rows = {r.algorithm: r for r in compare_on_machine("reduce", "machine:4x8x2", 65536,
                                                       "spread")}
    assert rows["affinity_tree"].crossings[2] == 3      # one message per extra module
    assert rows["binomial"].crossings[2] == 48
    assert rows["affinity_tree"].hierarchical_s < rows["binomial"].hierarchical_s / 4


def test_simulated_column_follows_the_machine_levels():
    # a slower socket interconnect costs the spread binomial tree (48 module crossings) far
    # more than affinity_tree (3), in the simulator as in the α-β model
    slow = Machine((4, 8, 2), (*DEFAULT_LEVELS[:2], LevelParams(1.5e-6, 1e9)))
    rows = {}
    for machine in (Machine.parse("machine:4x8x2"), slow):
        rows[machine.levels] = {r.algorithm: r.simulated_s for r in compare_on_machine(
            "bcast", machine, 65536, "spread")}
    default, slower = rows[DEFAULT_LEVELS], rows[slow.levels]
    grew = {name: slower[name] - default[name] for name in default}
    assert grew["affinity_tree"] > 0 and grew["binomial"] > 5 * grew["affinity_tree"]
