"""On a binary tree, alltoall piles its traffic onto the links next to the root.

Expected loads are derived here from the tree's shape alone: a message between two leaves
climbs to their lowest common ancestor and comes down again, so the link joining a subtree of
s leaves to its parent carries, in each direction, every message between those s leaves and
the other p − s: s(p − s)·m bytes. The root's links (s = p/2) carry p²m/4 — the maximum —
against (p − 1)m on a leaf's link.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from collops.schedule import RECV, SEND, ScheduleBuilder
from collops.sim import simulate, simulate_schedules
from collops.topology import parse_topology

P, M = 16, 4096


def _subtrees(topo) -> tuple[int, dict[int, set[int]]]:
    """(root node, set of leaves under every node), by BFS from the degree-2 node."""
    degree = np.bincount(topo.link_src, minlength=topo.num_nodes)
    root = int(np.flatnonzero(degree == 2)[0])  # binary tree: leaves 1, inner 3, root 2
    neighbours: dict[int, list[int]] = {v: [] for v in range(topo.num_nodes)}
    for a, b in zip(topo.link_src.tolist(), topo.link_dst.tolist(), strict=True):
        neighbours[a].append(b)
    parent, order, queue = {root: -1}, [], deque([root])
    while queue:
        v = queue.popleft()
        order.append(v)
        for w in neighbours[v]:
            if w not in parent:
                parent[w] = v
                queue.append(w)
    under: dict[int, set[int]] = {v: ({v} if degree[v] == 1 else set()) for v in order}
    for v in reversed(order):
        if parent[v] >= 0:
            under[parent[v]] |= under[v]
    return root, under


def _expected_loads(topo, messages: list[tuple[int, int]], m: int) -> np.ndarray:
    """Up/down tree routing: a link into subtree S carries the messages entering S."""
    _, under = _subtrees(topo)
    loads = np.zeros(topo.num_links)
    for link, (a, b) in enumerate(zip(topo.link_src.tolist(), topo.link_dst.tolist(),
                                      strict=True)):
        going_down = len(under[b]) < len(under[a])
        inside = under[b] if going_down else under[a]
        for src, dst in messages:
            if going_down and src not in inside and dst in inside:
                loads[link] += m
            if not going_down and src in inside and dst not in inside:
                loads[link] += m
    return loads


def test_alltoall_link_loads_peak_at_the_root() -> None:
    topo = parse_topology(f"tree:2:{P}")
    result = simulate("alltoall", "linear", topo, size_bytes=M)
    root, under = _subtrees(topo)
    expected = np.empty(topo.num_links)
    for link, (a, b) in enumerate(zip(topo.link_src.tolist(), topo.link_dst.tolist(),
                                      strict=True)):
        s = min(len(under[a]), len(under[b]))  # leaves on the side away from the root
        expected[link] = s * (P - s) * M
    np.testing.assert_allclose(result.link_loads, expected)
    pairs = [(a, b) for a in range(P) for b in range(P) if a != b]
    np.testing.assert_allclose(result.link_loads, _expected_loads(topo, pairs, M))
    hottest = np.flatnonzero(result.link_loads == result.link_loads.max())
    touching_root = (topo.link_src[hottest] == root) | (topo.link_dst[hottest] == root)
    assert touching_root.all() and len(hottest) == 4
    leaf_link = (P - 1) * M
    assert result.max_link_load_bytes / leaf_link == pytest.approx(P * P / 4 / (P - 1))
    assert result.max_link_load_bytes == P * P * M / 4
    assert result.mean_link_load_bytes == pytest.approx(expected.mean())


def _rank_order_alltoall(p: int, count: int) -> list:
    """Every rank sends to 0, 1, …, p−1 (skipping itself), in that order: seed 000's foil."""
    out = []
    for r in range(p):
        b = ScheduleBuilder(r, p, send=p * count, recv=p * count)
        for j in range(p):
            if j != r:
                b.recv(j, RECV(j * count, count))
        for j in range(p):
            if j != r:
                b.send(j, SEND(j * count, count))
        out.append(b.build())
    return out


def test_rank_order_has_one_hot_destination_per_slot() -> None:
    """Slot i (one injection link per leaf): ranks > i send to i, ranks ≤ i to i + 1."""
    topo = parse_topology(f"tree:2:{P}")
    result = simulate_schedules(_rank_order_alltoall(P, M), topo)
    rounds = result.phase_hotspots
    assert len(rounds) == P - 1 and (rounds.phase == 0).all()
    for i in range(P - 1):
        slot = [(r, i if r > i else i + 1) for r in range(P)]
        loads = _expected_loads(topo, slot, M)
        assert rounds.hot_load_bytes[i] == loads.max()
        assert loads[rounds.hot_link[i]] == loads.max()
        assert rounds.hot_load_bytes[i] >= max(P - 1 - i, i + 1) * M  # one hot destination
    random = simulate("alltoallv", "random_chunked", topo, size_bytes=M,
                      params={"seed": 1, "chunk": M})
    assert random.max_link_load_bytes == result.max_link_load_bytes  # same bytes in total …
    assert random.time_s < result.time_s  # … but spread over the slots
