"""Topologies as values: parsing, printing, equality, serialisation; rank placement."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from collops.errors import ArgumentError
from collops.topology import (
    NetworkParams,
    Topology,
    load_topology,
    parse_topology,
    place,
    save_topology,
)

SPECS = ["ring:8", "mesh:3x4", "torus:8x8x8", "torus:2x3x4x5", "hypercube:4", "tree:2:16",
         "combining-tree:2:16", "tree:3:10", "fattree:4", "switch:12",
         "fattree:2;8,8;1,8;1,1", "fattree:3;4,4,4;1,4,4;1,1,1"]


@pytest.mark.parametrize("spec", SPECS)
def test_spec_round_trip(spec: str) -> None:
    topology = parse_topology(spec)
    assert str(topology) == spec
    assert parse_topology(str(topology)) == topology
    assert hash(parse_topology(spec)) == hash(topology)
    assert Topology.from_dict(topology.to_dict()) == topology
    assert pickle.loads(pickle.dumps(topology)) == topology
    assert json.loads(json.dumps(topology.to_dict())) == topology.to_dict()


def test_spec_is_normalised() -> None:
    assert str(parse_topology(" TORUS:4X4 ")) == "torus:4x4"
    assert parse_topology("torus:4x4") != parse_topology("mesh:4x4")
    assert parse_topology("tree:2:8") != parse_topology("combining-tree:2:8")


def test_params_are_part_of_the_value() -> None:
    fast = parse_topology("torus:4x4", bandwidth=1e10)
    assert fast.params.bandwidth == 1e10 and fast != parse_topology("torus:4x4")
    same = parse_topology("torus:4x4", NetworkParams(bandwidth=1e10))
    assert same == fast and hash(same) == hash(fast)
    assert Topology.from_dict(fast.to_dict()) == fast
    nested = {"spec": "torus:4x4", "params": {"bandwidth": 1e10}}
    assert Topology.from_dict(nested) == fast
    assert {fast, same} == {fast}
    simgrid = parse_topology("torus:4x4", tie_break="simgrid", buffer_packets=4)
    assert simgrid != parse_topology("torus:4x4")
    assert Topology.from_dict(json.loads(json.dumps(simgrid.to_dict()))) == simgrid
    assert pickle.loads(pickle.dumps(simgrid)) == simgrid


def test_topology_is_immutable() -> None:
    topology = parse_topology("ring:4")
    with pytest.raises(AttributeError):
        topology.spec = "ring:5"  # type: ignore[misc]
    with pytest.raises(ValueError):
        topology.link_src[0] = 3


@pytest.mark.parametrize("bad", ["", "torus", "torus:", "torus:4xq", "torus:0x4", "cube:3",
                                 "tree:1:8", "tree:2", "fattree:3", "ring:0", "hypercube:-1",
                                 "switch:2:3", "torus:100000x100000"])
def test_bad_specs_are_argument_errors(bad: str) -> None:
    with pytest.raises(ArgumentError):
        parse_topology(bad)


@pytest.mark.parametrize("bad", [{"bandwidth": 0}, {"packet_size": 0}, {"header_bytes": 256},
                                 {"overhead": -1}, {"colour": 3}])
def test_bad_params_are_argument_errors(bad: dict[str, float]) -> None:
    with pytest.raises(ArgumentError):
        parse_topology("ring:4", **bad)


def test_load_json_and_toml(tmp_path: Path) -> None:
    topology = parse_topology("torus:4x4x2", hop_latency=5e-8, packet_size=512)
    save_topology(topology, tmp_path / "t.json")
    assert load_topology(tmp_path / "t.json") == topology
    (tmp_path / "t.toml").write_text(
        'spec = "torus:4x4x2"\n[params]\nhop_latency = 5e-8\npacket_size = 512\n')
    assert load_topology(tmp_path / "t.toml") == topology


def test_structure_counts() -> None:
    torus = parse_topology("torus:8x8x8")
    assert torus.num_nodes == 512 and torus.num_links == 512 * 6
    assert parse_topology("mesh:3x4").num_links == 2 * (2 * 4 + 3 * 3)
    assert parse_topology("hypercube:4").num_links == 16 * 4
    assert parse_topology("ring:2").num_links == 2
    tree = parse_topology("tree:2:16")
    assert tree.num_nodes == 31 and tree.num_links == 60 and tree.is_switch(16)
    assert parse_topology("torus:4x4").node_label(6) == "(1,2)"


# --------------------------------------------------------------------- placement
def test_row_major_and_random_placement() -> None:
    torus = parse_topology("torus:4x4")
    assert place(torus, 5).tolist() == [0, 1, 2, 3, 4]
    assert place(torus, 5, excluded={1, 3}).tolist() == [0, 2, 4, 5, 6]
    random = place(torus, 16, "random", seed=3)
    assert sorted(random.tolist()) == list(range(16))
    assert np.array_equal(random, place(torus, 16, "random", seed=3))
    assert not np.array_equal(random, place(torus, 16, "random", seed=4))
    assert 7 not in place(torus, 15, "random", excluded={7}).tolist()
    tree = parse_topology("tree:2:8")
    assert place(tree, 8).tolist() == list(range(8))  # ranks never land on switches
    with pytest.raises(ArgumentError):
        place(torus, 17)
    with pytest.raises(ArgumentError):
        place(torus, 16, excluded={0})


def test_placement_from_file(tmp_path: Path) -> None:
    torus = parse_topology("torus:4x4")
    (tmp_path / "p.txt").write_text("15 14, 3\n0")
    assert place(torus, 4, str(tmp_path / "p.txt")).tolist() == [15, 14, 3, 0]
    (tmp_path / "p.json").write_text("[2, 1]")
    assert place(torus, 2, tmp_path / "p.json").tolist() == [2, 1]
    with pytest.raises(ArgumentError):
        place(torus, 3, tmp_path / "p.json")
    (tmp_path / "dup.txt").write_text("1 1")
    with pytest.raises(ArgumentError):
        place(torus, 2, tmp_path / "dup.txt")
    with pytest.raises(ArgumentError):
        place(torus, 2, tmp_path / "p.json", excluded={2})
    with pytest.raises(ArgumentError):
        place(torus, 2, "no-such-mode")
