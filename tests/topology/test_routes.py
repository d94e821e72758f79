"""Route properties on every kind of network, checked against a plain breadth-first search."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from collops.errors import ArgumentError
from collops.topology import DisconnectedError, Topology, parse_topology

SMALL = [
    "ring:1", "ring:2", "ring:5", "ring:6", "mesh:3x4", "mesh:1x5", "mesh:2x3x2", "torus:4x4",
    "torus:3x4x2", "torus:2x3", "torus:5", "torus:4x4x4", "hypercube:0", "hypercube:1",
    "hypercube:3", "hypercube:4", "tree:2:8", "tree:3:10", "tree:2:5", "tree:4:1",
    "combining-tree:2:7", "fattree:2", "fattree:4", "switch:1", "switch:5",
    "fattree:2;4,4;1,4;1,1", "fattree:3;2,2,2;1,2,2;1,1,1", "fattree:2;4,2;2,2;1,1",
    "fattree:1;5;1;1",
]
GRIDS = ["ring:7", "ring:6", "mesh:4x4", "mesh:3x2x3", "torus:4x4", "torus:5x4", "torus:3x3x3",
         "hypercube:4"]


def bfs_distances(topology: Topology, source: int, banned: frozenset[int] = frozenset()
                  ) -> dict[int, int]:
    """Hop distances from ``source`` crossing no banned node (endpoints may be anything)."""
    out: dict[int, list[int]] = {}
    for a, b in zip(topology.link_src.tolist(), topology.link_dst.tolist(), strict=True):
        out.setdefault(a, []).append(b)
    dist = {source: 0}
    queue = deque([source])
    while queue:
        node = queue.popleft()
        if node in banned and node != source:
            continue  # reachable itself, but traffic does not pass through it
        for nxt in out.get(node, []):
            if nxt not in dist:
                dist[nxt] = dist[node] + 1
                queue.append(nxt)
    return dist


def all_pairs(topology: Topology, skip: frozenset[int] = frozenset()
              ) -> tuple[np.ndarray, np.ndarray]:
    nodes = np.array([n for n in topology.compute_nodes.tolist() if n not in skip])
    return np.repeat(nodes, len(nodes)), np.tile(nodes, len(nodes))


def check_chains(topology: Topology, src: np.ndarray, dst: np.ndarray,
                 offsets: np.ndarray, links: np.ndarray) -> None:
    assert offsets[0] == 0 and offsets[-1] == len(links) and len(offsets) == len(src) + 1
    for i, (s, d) in enumerate(zip(src.tolist(), dst.tolist(), strict=True)):
        chain = links[offsets[i]:offsets[i + 1]]
        if s == d:
            assert len(chain) == 0
            continue
        assert topology.link_src[chain[0]] == s and topology.link_dst[chain[-1]] == d
        assert np.array_equal(topology.link_dst[chain[:-1]], topology.link_src[chain[1:]])


@pytest.mark.parametrize("spec", SMALL)
def test_routes_are_minimal_link_chains(spec: str) -> None:
    topology = parse_topology(spec)
    src, dst = all_pairs(topology)
    offsets, links = topology.routes(src, dst)
    check_chains(topology, src, dst, offsets, links)
    distances = {s: bfs_distances(topology, s) for s in set(src.tolist())}
    expected = [distances[s][d] for s, d in zip(src.tolist(), dst.tolist(), strict=True)]
    assert np.diff(offsets).tolist() == expected
    assert topology.hops(src, dst).tolist() == expected


@pytest.mark.parametrize("spec", SMALL)
def test_routes_are_deterministic_and_independent_of_batching(spec: str) -> None:
    topology = parse_topology(spec)
    src, dst = all_pairs(topology)
    offsets, links = topology.routes(src, dst)
    again = topology.routes(src, dst)
    assert np.array_equal(offsets, again[0]) and np.array_equal(links, again[1])
    rng = np.random.default_rng(1)
    pick = rng.permutation(len(src))[: max(1, len(src) // 3)]
    sub_offsets, sub_links = topology.routes(src[pick], dst[pick])
    for j, i in enumerate(pick.tolist()):
        assert np.array_equal(sub_links[sub_offsets[j]:sub_offsets[j + 1]],
                              links[offsets[i]:offsets[i + 1]])
    pieces = list(topology.route_chunks(src, dst, max_links=7))
    assert pieces[-1][1] == len(src)
    for start, stop, o, lk in pieces:
        assert np.array_equal(lk, links[offsets[start]:offsets[stop]])
        assert np.array_equal(o + offsets[start], offsets[start:stop + 1])


@pytest.mark.parametrize("spec", SMALL + ["torus:6x5x4", "mesh:5x3x4"])
def test_link_loads_equal_sum_over_routes(spec: str) -> None:
    topology = parse_topology(spec)
    rng = np.random.default_rng(7)
    src, dst = all_pairs(topology)
    weights = rng.integers(0, 1000, len(src)).astype(float)
    offsets, links = topology.routes(src, dst)
    expected = np.bincount(links, weights=np.repeat(weights, np.diff(offsets)),
                           minlength=topology.num_links)
    assert np.allclose(topology.link_loads(src, dst, weights), expected)
    assert np.allclose(topology.link_loads(src, dst, 3.0),
                       3.0 * np.bincount(links, minlength=topology.num_links))


def test_dimension_order_and_ties() -> None:
    torus = parse_topology("torus:4x4")
    offsets, links = torus.routes([0], [5])  # (0,0) -> (1,1): first dimension first
    assert torus.link_src[links].tolist() == [0, 4] and torus.link_dst[links].tolist() == [4, 5]
    ring = parse_topology("ring:4")
    for s, d, path in [(0, 2, [0, 1, 2]), (2, 0, [2, 3, 0]), (1, 3, [1, 2, 3]), (0, 3, [0, 3])]:
        _, lk = ring.routes([s], [d])
        assert [*ring.link_src[lk].tolist(), d] == path
    mesh = parse_topology("mesh:3x3")
    _, lk = mesh.routes([8], [0])
    assert [*mesh.link_src[lk].tolist(), 0] == [8, 5, 2, 1, 0]


def test_tree_routes_cross_the_lowest_common_ancestor() -> None:
    tree = parse_topology("tree:2:8")
    assert tree.num_nodes == 15 and tree.compute_nodes.tolist() == list(range(8))
    root = tree.root  # type: ignore[attr-defined]
    _, lk = tree.routes([0], [7])
    assert root in tree.link_dst[lk].tolist() and len(lk) == 6
    _, lk = tree.routes([0], [1])
    assert len(lk) == 2 and root not in tree.link_dst[lk].tolist()
    assert tree.in_network_reduction is False
    assert parse_topology("combining-tree:2:8").in_network_reduction is True


def test_fattree_and_switch_shapes() -> None:
    fat = parse_topology("fattree:4")
    assert fat.num_compute_nodes == 16 and fat.num_nodes == 16 + 8 + 8 + 4
    assert fat.num_links == 2 * (16 + 16 + 16)
    assert fat.hops([0, 0, 0, 0], [0, 1, 2, 15]).tolist() == [0, 2, 4, 6]
    star = parse_topology("switch:5")
    assert star.num_nodes == 6 and star.num_links == 10 and star.injection_links == 1


def test_injection_links() -> None:
    assert parse_topology("torus:4x4x4").injection_links == 6
    assert parse_topology("torus:2x4").injection_links == 3  # ± coincide in a dimension of 2
    assert parse_topology("hypercube:5").injection_links == 5
    assert parse_topology("mesh:3x3").injection_links == 4
    assert parse_topology("tree:2:4").injection_links == 1


def test_routes_refuse_switch_endpoints() -> None:
    tree = parse_topology("tree:2:4")
    with pytest.raises(ArgumentError):
        tree.routes([0], [tree.root])  # type: ignore[attr-defined]
    with pytest.raises(ArgumentError):
        parse_topology("ring:4").routes([0], [4])


# --------------------------------------------------------------------- excluded nodes
def exclusion_cases() -> list[tuple[str, frozenset[int]]]:
    cases = []
    for spec in GRIDS:
        topology = parse_topology(spec)
        rng = np.random.default_rng(len(spec))
        for count in (1, 2):
            if topology.num_nodes - count < 3:
                continue
            banned = frozenset(rng.choice(topology.num_nodes, count, replace=False).tolist())
            cases.append((spec, banned))
    cases.append(("torus:4x4", frozenset({5})))
    cases.append(("mesh:3x3", frozenset({4})))
    cases.append(("fattree:4", frozenset({16})))  # an edge switch with its two hosts skipped
    cases.append(("tree:2:8", frozenset({3})))     # a leaf: never a transit node anyway
    return cases


def connected_without(topology: Topology, banned: frozenset[int], nodes: list[int]) -> bool:
    reach = bfs_distances(topology, nodes[0], banned)
    return all(n in reach for n in nodes)


@pytest.mark.parametrize(("spec", "banned"), exclusion_cases(),
                         ids=lambda v: v if isinstance(v, str) else "-".join(map(str, sorted(v))))
def test_detours_avoid_excluded_nodes_and_stay_minimal(spec: str, banned: frozenset[int]) -> None:
    topology = parse_topology(spec)
    skip = set(banned)
    if spec.startswith("fattree"):
        skip |= {0, 1}  # the hosts under the excluded edge switch
    src, dst = all_pairs(topology, frozenset(skip))
    if not connected_without(topology, banned, sorted(set(src.tolist()))):
        with pytest.raises(DisconnectedError):
            topology.routes(src, dst, banned)
        return
    offsets, links = topology.routes(src, dst, banned)
    check_chains(topology, src, dst, offsets, links)
    lengths = np.diff(offsets)
    last = offsets[1:][lengths > 0] - 1
    transit = np.delete(topology.link_dst[links], last)
    assert not set(transit.tolist()) & banned
    distances = {s: bfs_distances(topology, s, banned) for s in set(src.tolist())}
    expected = [distances[s][d] for s, d in zip(src.tolist(), dst.tolist(), strict=True)]
    assert lengths.tolist() == expected
    assert topology.hops(src, dst, banned).tolist() == expected
    again = topology.routes(src, dst, banned)
    assert np.array_equal(again[1], links)
    weights = np.arange(len(src), dtype=float) % 13
    expected_loads = np.bincount(links, weights=np.repeat(weights, lengths),
                                 minlength=topology.num_links)
    loads = topology.link_loads(src, dst, weights, banned)
    assert np.allclose(loads, expected_loads)
    touching = np.isin(topology.link_src, list(banned)) | np.isin(topology.link_dst, list(banned))
    assert not loads[touching].any()


def test_clean_routes_unchanged_by_exclusion_elsewhere() -> None:
    torus = parse_topology("torus:4x4x4")
    src, dst = all_pairs(torus, frozenset({21}))
    clean = torus.routes(src, dst)
    detoured = torus.routes(src, dst, {21})
    crossed = np.zeros(len(src), dtype=bool)
    for i in range(len(src)):
        chain = clean[1][clean[0][i]:clean[0][i + 1]]
        crossed[i] = 21 in torus.link_dst[chain[:-1]].tolist()
    assert crossed.any()
    for i in np.flatnonzero(~crossed).tolist():
        assert np.array_equal(clean[1][clean[0][i]:clean[0][i + 1]],
                              detoured[1][detoured[0][i]:detoured[0][i + 1]])


def test_exclusions_that_disconnect_raise() -> None:
    ring = parse_topology("ring:6")
    with pytest.raises(DisconnectedError, match="no path"):
        ring.routes([0], [3], {2, 4})
    with pytest.raises(DisconnectedError):
        ring.link_loads([0], [3], 1.0, {2, 4})
    tree = parse_topology("tree:2:4")
    with pytest.raises(DisconnectedError):
        tree.routes([0], [3], {tree.root})  # type: ignore[attr-defined]


def test_excluded_endpoint_is_an_argument_error() -> None:
    with pytest.raises(ArgumentError, match="endpoint"):
        parse_topology("torus:3x3").routes([0], [4], {4})
    with pytest.raises(ArgumentError):
        parse_topology("torus:3x3").routes([0], [4], {99})


@pytest.mark.parametrize("spec", [*GRIDS, "tree:2:8", "fattree:2;4,4;1,4;1,1"])
def test_grouped_link_loads_equal_per_group_sums_over_routes(spec: str) -> None:
    topology = parse_topology(spec)
    src, dst = all_pairs(topology)
    rng = np.random.default_rng(1)
    group = rng.integers(0, 5, len(src))
    weights = rng.random(len(src))
    offsets, links = topology.routes(src, dst)
    hops = np.diff(offsets)
    expected = np.zeros((5, topology.num_links))
    np.add.at(expected, (np.repeat(group, hops), links), np.repeat(weights, hops))
    loads, got_hops = topology.grouped_link_loads(src, dst, weights, group, 5)
    np.testing.assert_allclose(loads, expected, atol=1e-9)
    np.testing.assert_array_equal(got_hops, hops)
