"""Generalised fat trees described as SimGrid describes them: ``fattree:LEVELS;DOWN;UP;LINKS``.

The description is SimGrid's ``FAT_TREE`` cluster (a parallel generalised fat tree, Zahavi's
PGFT): ``LEVELS`` levels of switches above the hosts; ``DOWN`` (one number per level, from the
bottom) the children of each switch of that level; ``UP`` the parents of each node of the
level below; ``LINKS`` the parallel cables between a node and each parent. So
``fattree:2;8,8;1,8;1,1`` is 64 hosts, 8 leaf switches of 8 hosts each, 8 spine switches each
linked once to every leaf (full bisection), and ``fattree:3;4,4,4;1,4,4;1,1,1`` a three-level
4-ary tree. Only single cables (``LINKS`` all 1) are modelled: links are identified by their
two ends.

Nodes are labelled as SimGrid labels them. A node of level l (hosts are level 0) has one digit
per level; digit i counts ``UP[i]`` values below l (which parent was taken at level i) and
``DOWN[i]`` values from l on (which child). Positions in a level enumerate the labels with
digit 0 fastest; node ids are the hosts (ids = positions, so host i is SimGrid's i-th host),
then level 1, level 2, …. A node of level l is linked to the nodes of level l+1 whose labels
differ from its own in digit l only.

Routing is SimGrid's d-mod-k: going up from level l, a message to host position t takes parent
``(t div prod(UP[:l])) mod UP[l]``, until the destination lies below (its digits from l on equal
the current node's); going down, the one child whose digit l−1 is the destination's.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ArgumentError
from .base import NetworkParams, Topology
from .tree import _sorted_links


class GeneralFatTree(Topology):
    """``fattree:LEVELS;DOWN;UP;LINKS``: SimGrid's fat tree, routed d-mod-k."""

    kind = "fattree"
    down: tuple[int, ...]
    up: tuple[int, ...]
    level_sizes: tuple[int, ...]   # nodes per level, hosts first
    level_first: tuple[int, ...]   # id of every level's first node

    def __init__(self, down: tuple[int, ...], up: tuple[int, ...],
                 links: tuple[int, ...] | None = None,
                 params: NetworkParams | None = None) -> None:
        levels = len(down)
        links = tuple(links) if links is not None else (1,) * levels
        spec = (f"fattree:{levels};" + ",".join(map(str, down)) + ";"
                + ",".join(map(str, up)) + ";" + ",".join(map(str, links)))
        if not (len(up) == len(links) == levels) or levels == 0:
            raise ArgumentError("fattree", "spec", spec,
                                "needs LEVELS > 0 and LEVELS numbers in DOWN, UP and LINKS")
        if min(*down, *up, *links) < 1:
            raise ArgumentError("fattree", "spec", spec, "every number must be >= 1")
        if any(count != 1 for count in links):
            raise ArgumentError("fattree", "spec", spec,
                                "parallel cables (LINKS > 1) are not modelled; use 1")
        sizes = [math.prod(down)]
        for level in range(1, levels + 1):
            sizes.append(math.prod(up[:level]) * math.prod(down[level:]))
        first = [0]
        for size in sizes[:-1]:
            first.append(first[-1] + size)
        set_ = object.__setattr__
        set_(self, "down", tuple(down))
        set_(self, "up", tuple(up))
        set_(self, "level_sizes", tuple(sizes))
        set_(self, "level_first", tuple(first))
        src, dst = [], []
        for level in range(levels):
            child = np.arange(sizes[level], dtype=np.int64)
            digits = self.labels(level, child)
            for parent_digit in range(up[level]):
                lifted = digits.copy()
                lifted[:, level] = parent_digit
                src.append(first[level] + child)
                dst.append(first[level + 1] + self.positions(level + 1, lifted))
        one_src, one_dst = np.concatenate(src), np.concatenate(dst)
        link_src, link_dst = _sorted_links(np.concatenate([one_src, one_dst]),
                                           np.concatenate([one_dst, one_src]))
        super().__init__(spec, params, sum(sizes), np.arange(sizes[0]), link_src, link_dst)

    @property
    def levels(self) -> int:
        """Levels of switches above the hosts."""
        return len(self.down)

    @property
    def max_route_length(self) -> int:
        """Up to the top level and down again."""
        return 2 * self.levels

    def radices(self, level: int) -> np.ndarray:
        """The range of every label digit of a node of ``level``."""
        return np.array([self.up[i] if i < level else self.down[i] for i in range(self.levels)],
                        dtype=np.int64)

    def labels(self, level: int, positions: np.ndarray) -> np.ndarray:
        """Label digits (shape (n, LEVELS)) of the nodes at ``positions`` of ``level``."""
        radix = self.radices(level)
        weight = np.concatenate([[1], np.cumprod(radix)[:-1]])
        return (np.asarray(positions, dtype=np.int64)[:, None] // weight) % radix

    def positions(self, level: int, labels: np.ndarray) -> np.ndarray:
        """Positions in ``level`` of the nodes with these label digits (digit 0 fastest)."""
        radix = self.radices(level)
        weight = np.concatenate([[1], np.cumprod(radix)[:-1]])
        return (labels * weight).sum(axis=1)

    def _node_paths(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s_digits, t_digits = self.labels(0, src), self.labels(0, dst)
        differs = s_digits != t_digits
        # the lowest level whose subtree holds both: one above the highest differing digit
        top = np.where(differs.any(axis=1),
                       self.levels - np.argmax(differs[:, ::-1], axis=1), 0).astype(np.int64)
        # d-mod-k: the parent digit chosen at every level, from the destination's position
        choice = np.empty_like(t_digits)
        for level in range(self.levels):
            choice[:, level] = (dst // math.prod(self.up[:level])) % self.up[level]
        paths = np.full((len(src), 2 * self.levels + 1), -1, dtype=np.int64)
        paths[:, 0] = src
        rows = np.arange(len(src))
        for level in range(1, self.levels + 1):
            going = rows[top >= level]
            if len(going) == 0:
                break
            # up at ``level``: chosen digits below it, the source's from it on; down at
            # ``level``: the same chosen digits below it, the destination's from it on
            for digits, column in ((s_digits, level), (t_digits, None)):
                label = digits[going].copy()
                label[:, :level] = choice[going, :level]
                node = self.level_first[level] + self.positions(level, label)
                col = level if column is not None else 2 * top[going] - level
                paths[going, col] = node
        ends = rows[top > 0]
        paths[ends, 2 * top[ends]] = dst[ends]
        return paths, 2 * top
