"""simulate(): results, JSON record, determinism, exclusion and in-network reduction."""

from __future__ import annotations

import numpy as np
import pytest

from collops.errors import ArgumentError
from collops.sim import parse_nodes, parse_size, simulate
from collops.sim.api import JSON_FIELDS
from collops.topology import parse_topology


def test_json_record_has_exactly_the_documented_fields() -> None:
    r = simulate("bcast", "binomial", "torus:2x2x2", size_bytes=1000)
    record = r.to_json_dict(closed_form_s=1.5e-5)
    assert tuple(record) == JSON_FIELDS
    assert record["nprocs"] == 8 and record["size"] == 1000 and record["closed_form_s"] == 1.5e-5
    assert r.to_json_dict()["closed_form_s"] is None
    assert r.bandwidth_Bps == pytest.approx(r.total_bytes / r.time_s)
    assert r.total_bytes == 7 * 1000


@pytest.mark.parametrize("model", ["congestion", "packet"])
def test_same_seed_same_result(model: str) -> None:
    def run(seed: int):
        return simulate("alltoallv", "random_chunked", "torus:2x2x4", size_bytes=3000,
                        model=model, placement="random", seed=seed,
                        params={"seed": 7, "chunk": 1024})
    a, b, c = run(5), run(5), run(6)
    assert a.time_s == b.time_s
    np.testing.assert_array_equal(a.link_loads, b.link_loads)
    np.testing.assert_array_equal(a.placement, b.placement)
    assert not np.array_equal(a.placement, c.placement)


def test_excluded_node_leaves_the_group_and_carries_nothing() -> None:
    topo = parse_topology("torus:4x4")
    r = simulate("alltoall", "pairwise", topo, size_bytes=512, excluded={5})
    assert r.nprocs == 15 and 5 not in r.placement.tolist()
    touching = (topo.link_src == 5) | (topo.link_dst == 5)
    assert r.link_loads[touching].sum() == 0
    assert r.link_loads.sum() > 0


def test_packet_and_congestion_agree_on_a_quiet_pattern() -> None:
    """Ring allgather on a ring is contention-free: both models give the same time."""
    a = simulate("allgather", "ring", "ring:6", size_bytes=4096, model="congestion")
    b = simulate("allgather", "ring", "ring:6", size_bytes=4096, model="packet")
    assert a.time_s == pytest.approx(b.time_s, rel=1e-6)
    np.testing.assert_allclose(a.link_loads, b.link_loads)


@pytest.mark.parametrize("collective,algorithm", [
    ("allreduce", "ring"), ("allreduce", "recursive_doubling"), ("allreduce", "rabenseifner"),
    ("reduce", "binomial"), ("reduce", "nary_tree"), ("gather", "binomial")])
@pytest.mark.parametrize("model", ["congestion", "packet"])
def test_a_named_host_algorithm_on_a_combining_tree_runs_its_own_schedule(
        collective: str, algorithm: str, model: str) -> None:
    # the combining tree is the plain k-ary tree plus reducing switches: a host algorithm
    # never uses them, so it must cost exactly what it costs on tree:2:8 (the reference)
    m = 1024
    combining = simulate(collective, algorithm, "combining-tree:2:8", size_bytes=m, model=model)
    plain = simulate(collective, algorithm, "tree:2:8", size_bytes=m, model=model)
    assert combining.source == plain.source == "registry"
    assert combining.time_s == pytest.approx(plain.time_s, rel=1e-12)
    np.testing.assert_array_equal(combining.link_loads, plain.link_loads)
    assert combining.max_link_load_bytes > m  # not the in-network sweep's m per link


def test_in_network_is_asked_for_and_refused_where_it_cannot_be() -> None:
    with pytest.raises(ArgumentError, match="cannot reduce"):
        simulate("allreduce", "ring", "tree:2:8", size_bytes=64, in_network=True)
    with pytest.raises(ArgumentError, match="not combined in the network"):
        simulate("allgather", "ring", "combining-tree:2:8", size_bytes=64, in_network=True)


def test_in_network_allreduce_uses_every_link_once() -> None:
    topo = parse_topology("combining-tree:2:8")
    m = 4096
    r = simulate("allreduce", "ring", topo, size_bytes=m, in_network=True)
    assert r.source == "in-network"
    np.testing.assert_array_equal(r.link_loads, m)  # up-sweep on every up link, down likewise
    levels, params = 2 * 3, topo.params
    expected = (params.overhead + m / params.bandwidth + levels * params.hop_latency
                + (levels - 1) * params.packet_size / params.bandwidth)
    assert r.time_s == pytest.approx(expected)
    for flag in (False, None):
        p2p = simulate("allreduce", "ring", topo, size_bytes=m, in_network=flag)
        assert p2p.source == "registry" and p2p.time_s > r.time_s


def test_gather_by_or_combines_in_the_network_where_it_can() -> None:
    m, p = 512, 8
    tree = parse_topology(f"combining-tree:2:{p}")
    r = simulate("gather", "or_combine", tree, size_bytes=m)
    assert r.source == "in-network"
    # every contribution combines on its way to rank 0's leaf: all up links but the three on
    # rank 0's own path carry the whole buffer once, and the result descends those 3 levels
    up = tree.link_src < tree.link_dst  # leaves and lower switches have the smaller ids
    loaded = r.link_loads > 0
    np.testing.assert_array_equal(r.link_loads[loaded], p * m)
    assert np.count_nonzero(loaded & up) == (2 * p - 2) - 3
    assert np.count_nonzero(loaded & ~up) == 3
    # elsewhere the seed's schedule runs: a binomial OR-reduction of whole p·m-byte buffers
    host = simulate("gather", "or_combine", "torus:2x2x2", size_bytes=m)
    assert host.source == "registry" and host.messages == p - 1
    assert host.time_s > 0 and host.max_link_load_bytes >= p * m
    on_tree = simulate("gather", "or_combine", "tree:2:8", size_bytes=m)
    assert on_tree.source == "registry"


def test_cli_helpers() -> None:
    assert parse_size("64K") == 65536 and parse_size("3") == 3 and parse_size("1M") == 1 << 20
    assert parse_nodes("3,10-12") == {3, 10, 11, 12}
    with pytest.raises(ValueError):
        parse_size("lots")


@pytest.mark.parametrize("model", ["congestion", "flow"])
def test_idle_node_hosts_no_rank_but_forwards(model: str) -> None:
    topo = parse_topology("torus:4x4")
    idle = simulate("alltoall", "linear", topo, size_bytes=512, model=model, idle={5})
    assert idle.nprocs == 15 and 5 not in idle.placement.tolist()
    nodes = idle.placement
    src, dst = np.repeat(nodes, 15), np.tile(nodes, 15)
    keep = src != dst
    # routes cross node 5 unchanged: the loads are those of the clean routes
    expected = topo.link_loads(src[keep], dst[keep], 512.0)
    np.testing.assert_allclose(idle.link_loads, expected)
    through = (topo.link_src == 5) | (topo.link_dst == 5)
    assert idle.link_loads[through].sum() > 0
    excluded = simulate("alltoall", "linear", topo, size_bytes=512, model=model, excluded={5})
    assert excluded.link_loads[through].sum() == 0
