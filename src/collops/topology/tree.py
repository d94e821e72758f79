"""Switched networks: k-ary trees, combining trees, fat-trees and a single switch.

In all of them the compute nodes come first (ids ``0 .. hosts-1``) and the switches after.

``tree:K:N`` — N compute *leaves* under a tree of switches: leaves are grouped K at a time
(in id order) under a switch, those switches K at a time under the next level, and so on up
to one root; the last group of a level may be smaller. Every leaf sits at the same depth.
Routes go up to the lowest common ancestor and down again, so every message between the two
halves of the machine crosses the root: under rank-order alltoall the links next to the root
are the hot spots that seed 000 describes. ``combining-tree:K:N`` is the same network whose
switches carry an ALU (``in_network_reduction``), as the seeds' collective network does.

``fattree:K`` — the k-ary fat-tree of Al-Fares et al.: k pods, each with k/2 edge and k/2
aggregation switches, (k/2)² core switches, k/2 hosts per edge switch (k³/4 hosts). Up-ports
are chosen from the destination (no ECMP): aggregation switch ``t mod k/2`` and core switch
``(t mod k/2)·k/2 + (t div k/2) mod k/2``, a deterministic, evenly spread choice.

``switch:N`` — N hosts on one switch (a star): each host has one link up and one down.
"""

from __future__ import annotations

import numpy as np

from .base import NetworkParams, Topology
from .grid import PAIR_CHUNK


def _sorted_links(pairs_src: np.ndarray, pairs_dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((pairs_dst, pairs_src))
    return pairs_src[order], pairs_dst[order]


class KaryTree(Topology):
    """``tree:K:N``: N compute leaves under a k-ary tree of switches."""

    kind = "tree"
    arity: int
    leaves: int
    parent: np.ndarray      # parent of every node, -1 at the root
    ancestors: np.ndarray   # [level, leaf] -> ancestor at that level (level 0: the leaf)

    def __init__(self, arity: int, leaves: int, params: NetworkParams | None = None) -> None:
        arity, leaves = int(arity), int(leaves)
        parent_of: list[int] = []
        level = list(range(leaves))
        next_id = leaves
        parent = {}
        while len(level) > 1:
            upper = []
            for start in range(0, len(level), arity):
                for child in level[start:start + arity]:
                    parent[child] = next_id
                upper.append(next_id)
                next_id += 1
            level = upper
        num_nodes = next_id
        parent_of = [parent.get(v, -1) for v in range(num_nodes)]
        parent_arr = np.array(parent_of, dtype=np.int64)
        ancestors = [np.arange(leaves, dtype=np.int64)]
        while (parent_arr[ancestors[-1]] >= 0).any():
            ancestors.append(parent_arr[ancestors[-1]])
        children = np.flatnonzero(parent_arr >= 0)
        link_src, link_dst = _sorted_links(
            np.concatenate([children, parent_arr[children]]),
            np.concatenate([parent_arr[children], children]))
        object.__setattr__(self, "arity", arity)
        object.__setattr__(self, "leaves", leaves)
        object.__setattr__(self, "parent", parent_arr)
        object.__setattr__(self, "ancestors", np.array(ancestors))
        super().__init__(f"{self.kind}:{arity}:{leaves}", params, num_nodes,
                         np.arange(leaves), link_src, link_dst)
        object.__setattr__(self, "_up", self._link_table(children, parent_arr[children]))
        object.__setattr__(self, "_down", self._link_table(parent_arr[children], children,
                                                           by=children))

    _up: np.ndarray    # node -> link to its parent
    _down: np.ndarray  # node -> link from its parent

    def _link_table(self, a: np.ndarray, b: np.ndarray, by: np.ndarray | None = None
                    ) -> np.ndarray:
        table = np.full(self.num_nodes, -1, dtype=np.int64)
        table[a if by is None else by] = self.link_id(a, b)
        return table

    @property
    def height(self) -> int:
        """Levels of switches above the leaves."""
        return len(self.ancestors) - 1

    @property
    def root(self) -> int:
        """The root node."""
        return int(self.ancestors[-1][0])

    @property
    def max_route_length(self) -> int:
        """Twice the height."""
        return max(1, 2 * self.height)

    def _climb(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Levels from the leaves up to each pair's lowest common ancestor.

        Leaves are grouped ``arity`` at a time in id order, so leaf i's ancestor at level l
        is the (i // arity**l)-th node of that level.
        """
        up = (src != dst).astype(np.int64)
        a, b = src.copy(), dst.copy()
        for _ in range(self.height):
            a //= self.arity
            b //= self.arity
            up += a != b
        return up

    def _ancestor(self, leaves: np.ndarray, level: int) -> np.ndarray:
        """Node ids of the leaves' ancestors at ``level``."""
        return self.ancestors[level, leaves]

    def _node_paths(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        up = self._climb(src, dst)
        paths = np.full((len(src), 2 * self.height + 1), -1, dtype=np.int64)
        rows = np.arange(len(src))
        for level in range(self.height + 1):
            active = rows[up >= level]
            paths[active, level] = self._ancestor(src[active], level)
            down = rows[up > level]
            paths[down, 2 * up[down] - level] = self._ancestor(dst[down], level)
        return paths, 2 * up

    def _clean_link_loads(self, src: np.ndarray, dst: np.ndarray,
                          weights: np.ndarray) -> np.ndarray:
        loads = np.zeros(self.num_links, dtype=np.float64)
        for lo in range(0, len(src), PAIR_CHUNK):
            s, d = src[lo:lo + PAIR_CHUNK], dst[lo:lo + PAIR_CHUNK]
            w = weights[lo:lo + PAIR_CHUNK]
            up = self._climb(s, d)
            for level in range(self.height):
                active = up > level
                if not active.any():
                    break
                s, d, w, up = s[active], d[active], w[active], up[active]
                loads += np.bincount(self._up[self._ancestor(s, level)], weights=w,
                                     minlength=self.num_links)
                loads += np.bincount(self._down[self._ancestor(d, level)], weights=w,
                                     minlength=self.num_links)
        return loads


class CombiningTree(KaryTree):
    """``combining-tree:K:N``: a k-ary tree whose switches reduce in the network."""

    kind = "combining-tree"
    in_network_reduction = True


class FatTree(Topology):
    """``fattree:K``: the k-ary fat-tree (k pods, k³/4 hosts)."""

    kind = "fattree"
    k: int

    def __init__(self, k: int, params: NetworkParams | None = None) -> None:
        k = int(k)
        half = k // 2
        hosts = k * half * half
        edges = k * half
        first_edge, first_agg, first_core = hosts, hosts + edges, hosts + 2 * edges
        num_nodes = first_core + half * half
        host = np.arange(hosts)
        edge_of_host = first_edge + host // half
        edge = np.arange(edges)
        pod_of_edge = edge // half
        # every edge switch links to every aggregation switch of its pod
        e_src = np.repeat(first_edge + edge, half)
        e_dst = first_agg + np.repeat(pod_of_edge * half, half) + np.tile(np.arange(half), edges)
        # aggregation switch i of every pod links to core switches i*half .. i*half+half-1
        agg = np.arange(edges)
        a_src = np.repeat(first_agg + agg, half)
        a_dst = first_core + np.repeat((agg % half) * half, half) + np.tile(np.arange(half), edges)
        one_way_src = np.concatenate([host, e_src, a_src])
        one_way_dst = np.concatenate([edge_of_host, e_dst, a_dst])
        link_src, link_dst = _sorted_links(np.concatenate([one_way_src, one_way_dst]),
                                           np.concatenate([one_way_dst, one_way_src]))
        object.__setattr__(self, "k", k)
        super().__init__(f"fattree:{k}", params, num_nodes, host, link_src, link_dst)

    @property
    def max_route_length(self) -> int:
        """Host, edge, aggregation, core, aggregation, edge, host: six links."""
        return 6

    def _node_paths(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        half = self.k // 2
        hosts = self.k * half * half
        first_edge, first_agg = hosts, hosts + self.k * half
        first_core = first_agg + self.k * half
        s_edge, t_edge = src // half, dst // half
        s_pod, t_pod = s_edge // half, t_edge // half
        port = dst % half
        core = first_core + port * half + t_edge % half
        same_edge = s_edge == t_edge
        same_pod = s_pod == t_pod
        hops = np.where(src == dst, 0, np.where(same_edge, 2, np.where(same_pod, 4, 6)))
        paths = np.full((len(src), 7), -1, dtype=np.int64)
        paths[:, 0] = src
        up_agg = first_agg + s_pod * half + port
        down_agg = first_agg + t_pod * half + port
        columns = {
            2: [first_edge + s_edge, dst],
            4: [first_edge + s_edge, up_agg, first_edge + t_edge, dst],
            6: [first_edge + s_edge, up_agg, core, down_agg, first_edge + t_edge, dst],
        }
        for length, nodes in columns.items():
            rows = hops == length
            for column, values in enumerate(nodes, start=1):
                paths[rows, column] = values[rows]
        return paths, hops.astype(np.int64)


class Switch(Topology):
    """``switch:N``: N hosts on one switch, each with one link up and one down."""

    kind = "switch"

    def __init__(self, n: int, params: NetworkParams | None = None) -> None:
        n = int(n)
        host = np.arange(n)
        hub = np.full(n, n)
        super().__init__(f"switch:{n}", params, n + 1, host, np.concatenate([host, hub]),
                         np.concatenate([hub, host]))

    @property
    def max_route_length(self) -> int:
        """Up and down: two links."""
        return 2

    def _node_paths(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        hops = np.where(src == dst, 0, 2).astype(np.int64)
        paths = np.full((len(src), 3), -1, dtype=np.int64)
        paths[:, 0] = src
        moving = hops > 0
        paths[moving, 1] = self.num_nodes - 1
        paths[moving, 2] = dst[moving]
        return paths, hops
