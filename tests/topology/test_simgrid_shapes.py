"""SimGrid's shapes in collops: its fat-tree description and d-mod-k routing, its torus
tie-break, and its host numbering (dimension 0 fastest) as a placement."""

from __future__ import annotations

import math

import numpy as np
import pytest

from collops.errors import ArgumentError
from collops.topology import NetworkParams, parse_topology, place


def simgrid_torus_path(dims: tuple[int, ...], src: tuple[int, ...],
                       dst: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The coordinates SimGrid's TorusZone visits, one dimension after another, with its
    direction test (written from its description: + when the target lies within L/2 ahead,
    directly or across the wrap)."""
    here, path = list(src), [tuple(src)]
    for j, length in enumerate(dims):
        mine, goal, half = src[j], dst[j], length // 2
        plus = (mine < goal <= mine + half) or (mine > half and (mine + half) % length >= goal)
        while here[j] != goal:
            here[j] = (here[j] + (1 if plus else -1)) % length
            path.append(tuple(here))
    return path


@pytest.mark.parametrize("dims", [(4,), (6,), (4, 4), (4, 2, 6), (5, 4)])
def test_simgrid_tie_break_matches_torus_zone(dims: tuple[int, ...]) -> None:
    spec = "torus:" + "x".join(map(str, dims))
    torus = parse_topology(spec, tie_break="simgrid")
    n = math.prod(dims)
    src, dst = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
    offsets, links = torus.routes(src, dst)
    loads = np.zeros(torus.num_links)
    for i, (s, t) in enumerate(zip(src.tolist(), dst.tolist(), strict=True)):
        coords = simgrid_torus_path(dims, tuple(torus.coordinates(s).tolist()),
                                    tuple(torus.coordinates(t).tolist()))
        expected = [int(torus.node_of(c)) for c in coords]
        chain = links[offsets[i]:offsets[i + 1]]
        assert [*torus.link_src[chain].tolist(), t] == expected, (s, t)
        np.add.at(loads, chain, 1.0)
    assert np.allclose(torus.link_loads(src, dst), loads)
    plain = parse_topology(spec)
    assert plain != torus
    assert np.array_equal(plain.hops(src, dst), torus.hops(src, dst))  # both minimal


def test_tie_break_on_a_ring_of_four() -> None:
    ring = parse_topology("ring:4", tie_break="simgrid")
    for s, d, path in [(0, 2, [0, 1, 2]), (2, 0, [2, 1, 0]), (1, 3, [1, 2, 3]), (3, 1, [3, 0, 1])]:
        _, lk = ring.routes([s], [d])
        assert [*ring.link_src[lk].tolist(), d] == path
    with pytest.raises(ArgumentError):
        NetworkParams(tie_break="minus")


def test_column_major_placement_is_simgrid_numbering() -> None:
    torus = parse_topology("torus:2x3x4")
    nodes = place(torus, 24, "column-major")
    for host, node in enumerate(nodes.tolist()):
        # SimGrid host i: coordinate j = (i / prod(dims[:j])) % dims[j]
        want = [(host // math.prod((2, 3, 4)[:j])) % d for j, d in enumerate((2, 3, 4))]
        assert torus.coordinates(node).tolist() == want
    assert 5 not in place(torus, 23, "column-major", excluded={5}).tolist()
    with pytest.raises(ArgumentError):
        place(parse_topology("tree:2:4"), 4, "column-major")


def test_simgrid_fat_tree_shape_and_d_mod_k() -> None:
    fat = parse_topology("fattree:2;8,8;1,8;1,1")
    assert str(fat) == "fattree:2;8,8;1,8;1,1"
    assert fat.num_compute_nodes == 64 and fat.num_nodes == 64 + 8 + 8
    assert fat.num_links == 2 * (64 + 64)  # every host to its leaf, every leaf to every spine
    leaf, spine = 64, 72
    for s, t in [(0, 9), (17, 63), (63, 0), (5, 40)]:
        _, lk = fat.routes([s], [t])
        # up to the source's leaf, spine t mod 8 (d-mod-k), the destination's leaf
        assert [*fat.link_src[lk].tolist(), t] == [s, leaf + s // 8, spine + t % 8,
                                                     leaf + t // 8, t]
    _, lk = fat.routes([3], [6])
    assert fat.link_dst[lk].tolist() == [leaf, 6]
    # a full-bisection shift permutation loads every up-link of a leaf exactly once
    src = np.arange(64)
    loads = fat.link_loads(src, (src + 8) % 64)
    assert loads.max() == 1.0


def test_three_level_fat_tree_routes_through_the_top_only_when_needed() -> None:
    fat = parse_topology("fattree:3;4,4,4;1,4,4;1,1,1")
    assert fat.level_sizes == (64, 16, 16, 16)  # type: ignore[attr-defined]
    assert fat.hops([0, 0, 0, 0], [0, 3, 4, 16]).tolist() == [0, 2, 4, 6]
    # d-mod-k: destinations of the same position mod 16 share their path above level 1
    _, a = fat.routes([0], [21])
    _, b = fat.routes([1], [37])
    assert fat.link_dst[a][1] == fat.link_dst[b][1]


@pytest.mark.parametrize("bad", ["fattree:2;8,8;1,8", "fattree:2;8;1,8;1,1",
                                 "fattree:2;8,8;1,8;2,1", "fattree:0;;;", "fattree:1;0;1;1"])
def test_bad_fat_tree_descriptions(bad: str) -> None:
    with pytest.raises(ArgumentError):
        parse_topology(bad)
