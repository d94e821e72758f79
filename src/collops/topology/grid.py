"""Grids: tori (any dimension, wrap-around), meshes, rings and hypercubes.

Node ids are row-major: for ``torus:AxBxC`` node ``(a, b, c)`` is ``(a*B + b)*C + c``, so the
first dimension of the spec varies slowest. Every node is a compute node.

Routing is dimension order: the first dimension is corrected first, then the second, and so on.
On a wrap-around dimension of length L the message takes the shorter way round; when both
ways are equally long (distance exactly L/2) it goes the + way, or with ``tie_break="simgrid"``
(a network parameter) as SimGrid's ``TorusZone`` does: + except from coordinate L/2, whence −.
A ring is a 1-D torus and a hypercube of dimension D is the torus 2x2x…x2 (node id bits, most
significant first, are its coordinates), whose + and − neighbours coincide, so it has one link
per direction per dimension.

Link loads are computed without materialising routes: in dimension j a message runs along one
ring (the *line* whose other coordinates are the destination's before j and the source's after
j) over a contiguous arc of positions. Adding +w at the arc's first position and −w one past its
last on an array of length 2L, then taking a cumulative sum and folding the second half onto the
first, gives every link's load on every ring with a handful of numpy operations per dimension.
With one more axis for a group of messages, the congestion model gets every round's loads the
same way (`Topology.grouped_link_loads`).
"""

from __future__ import annotations

import math

import numpy as np

from .base import NetworkParams, Routes, Topology, offsets_from_lengths

#: pairs processed at once by the vectorised grid kernels (bounds temporary memory)
PAIR_CHUNK = 1 << 20


class Grid(Topology):
    """A d-dimensional grid of compute nodes, with or without wrap-around links."""

    kind = "grid"
    dims: tuple[int, ...]
    wrap: bool
    strides: tuple[int, ...]

    def __init__(self, spec: str, dims: tuple[int, ...], wrap: bool,
                 params: NetworkParams | None = None) -> None:
        dims = tuple(int(d) for d in dims)
        strides = tuple(int(math.prod(dims[j + 1:])) for j in range(len(dims)))
        object.__setattr__(self, "dims", dims)
        object.__setattr__(self, "wrap", bool(wrap))
        object.__setattr__(self, "strides", strides)
        num_nodes = math.prod(dims)
        link_src, link_dst, table = _grid_links(dims, strides, wrap)
        object.__setattr__(self, "_grid_link", table)
        super().__init__(spec, params, num_nodes, np.arange(num_nodes), link_src, link_dst)

    _grid_link: np.ndarray  # [dim, 0 for + / 1 for −, node] -> link id or -1

    @property
    def max_route_length(self) -> int:
        """The diameter of the grid."""
        reach = (d // 2 if self.wrap else d - 1 for d in self.dims)
        return max(1, sum(reach))

    def coordinates(self, nodes: np.ndarray | int) -> np.ndarray:
        """Coordinates of nodes, shape (..., ndim)."""
        n = np.asarray(nodes, dtype=np.int64)[..., None]
        return (n // np.array(self.strides)) % np.array(self.dims)

    def node_of(self, coords: np.ndarray | tuple[int, ...]) -> np.ndarray:
        """Node ids of coordinates (last axis = dimension)."""
        c = np.asarray(coords, dtype=np.int64)
        return (c * np.array(self.strides)).sum(axis=-1)

    def node_label(self, node: int) -> str:
        """The node's coordinates, e.g. ``(1,0,3)``."""
        return "(" + ",".join(str(int(c)) for c in self.coordinates(node)) + ")"

    def link_dimension(self) -> np.ndarray:
        """The dimension each link runs along."""
        out = np.full(self.num_links, -1, dtype=np.int64)
        for j in range(len(self.dims)):
            ids = self._grid_link[j][self._grid_link[j] >= 0]
            out[ids] = j
        return out

    # ------------------------------------------------------------------ routing kernels
    def _steps(self, src: np.ndarray, dst: np.ndarray, j: int) -> np.ndarray:
        """Signed hop count along dimension j (shorter way; ties as ``tie_break`` says)."""
        length, stride = self.dims[j], self.strides[j]
        start = (src // stride) % length
        diff = (dst // stride) % length - start
        if not self.wrap:
            return diff
        d = diff % length
        minus = 2 * d > length
        if self.params.tie_break == "simgrid" and length % 2 == 0:
            minus |= (2 * d == length) & (2 * start == length)
        return np.where(minus, d - length, d)

    def _line_base(self, src: np.ndarray, dst: np.ndarray, j: int) -> np.ndarray:
        """Node with coordinate j = 0 on the dimension-j line a route runs along."""
        block = self.strides[j] * self.dims[j]
        return (dst // block) * block + src % self.strides[j]

    def _clean_hops(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        hops = np.zeros(len(src), dtype=np.int64)
        for j in range(len(self.dims)):
            hops += np.abs(self._steps(src, dst, j))
        return hops

    def _clean_routes(self, src: np.ndarray, dst: np.ndarray) -> Routes:
        n = len(src)
        steps = [self._steps(src, dst, j) for j in range(len(self.dims))]
        lengths = [np.abs(s) for s in steps]
        offsets = offsets_from_lengths(sum(lengths, np.zeros(n, dtype=np.int64)))
        links = np.empty(int(offsets[-1]), dtype=np.int32)
        done = offsets[:-1].copy()
        for j, (length, stride) in enumerate(zip(self.dims, self.strides, strict=True)):
            count = lengths[j]
            total = int(count.sum())
            if total:
                route = np.repeat(np.arange(n), count)
                k = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
                sign = np.sign(steps[j])[route]
                start = ((src // stride) % length)[route]
                position = (start + sign * k) % length
                node = self._line_base(src, dst, j)[route] + position * stride
                direction = (sign < 0).astype(np.int64)
                links[done[route] + k] = self._grid_link[j, direction, node]
            done += count
        return offsets, links

    def _clean_link_loads(self, src: np.ndarray, dst: np.ndarray,
                          weights: np.ndarray) -> np.ndarray:
        group = np.zeros(len(src), dtype=np.int64)
        return self._clean_grouped_loads(src, dst, weights, group, 1)[0]

    def _clean_grouped_loads(self, src: np.ndarray, dst: np.ndarray, weights: np.ndarray,
                             group: np.ndarray, ngroups: int) -> np.ndarray:
        """Loads per group: one difference array per dimension over (group, direction, line,
        unrolled position 0..2L-1), dimension by dimension to bound memory."""
        loads = np.zeros((ngroups, self.num_links), dtype=np.float64)
        for j in range(len(self.dims)):
            lines = self.num_nodes // self.dims[j]
            diff = np.zeros(ngroups * 2 * lines * 2 * self.dims[j])
            for lo in range(0, len(src), PAIR_CHUNK):
                hi = lo + PAIR_CHUNK
                self._accumulate_dimension(src[lo:hi], dst[lo:hi], weights[lo:hi], j, diff,
                                           group[lo:hi])
            self._fold_dimension(diff, j, loads)
        return loads

    def _accumulate_dimension(self, src: np.ndarray, dst: np.ndarray, w: np.ndarray,
                              j: int, diff: np.ndarray, group: np.ndarray) -> None:
        """Add the arcs of dimension j to its difference array (in place)."""
        length, stride = self.dims[j], self.strides[j]
        step = self._steps(src, dst, j)
        moving = step != 0
        if not moving.any():
            return
        src, dst, w, step = src[moving], dst[moving], w[moving], step[moving]
        group = group[moving]
        count = np.abs(step)
        position = (src // stride) % length
        negative = step < 0
        # a − arc from position a covering |d| links starts (unrolled) at a - |d| + 1
        first = np.where(negative, (position - count + 1) % length, position)
        line = (dst // (stride * length)) * stride + src % stride
        lines = self.num_nodes // length
        row = ((group * 2 + negative) * lines + line) * (2 * length)
        size = len(diff)
        diff += np.bincount(row + first, weights=w, minlength=size)
        diff -= np.bincount(row + first + count, weights=w, minlength=size)

    def _fold_dimension(self, diff: np.ndarray, j: int, loads: np.ndarray) -> None:
        """Add dimension j's difference array, turned into per-link loads, to ``loads``
        (shape (groups, num_links))."""
        length, stride = self.dims[j], self.strides[j]
        lines = self.num_nodes // length
        unrolled = np.cumsum(diff.reshape(len(loads), 2, lines, 2 * length), axis=3)
        per_position = unrolled[..., :length] + unrolled[..., length:]
        line = np.arange(lines)
        base = (line // stride) * (stride * length) + line % stride
        nodes = base[:, None] + np.arange(length)[None, :] * stride  # [line, position]
        for direction in (0, 1):
            ids = self._grid_link[j, direction][nodes]
            present = ids >= 0
            # one link per (line, position) in a direction: the ids are distinct
            loads[:, ids[present]] += per_position[:, direction][:, present]

    def _dirty_mask(self, src: np.ndarray, dst: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        bad_nodes = np.flatnonzero(~allowed)
        if len(bad_nodes) > 32:
            return super()._dirty_mask(src, dst, allowed)
        out = np.zeros(len(src), dtype=bool)
        for x in bad_nodes:
            out |= self._passes(src, dst, int(x))
        return out

    def _passes(self, src: np.ndarray, dst: np.ndarray, node: int) -> np.ndarray:
        """Whether each clean route visits ``node`` (endpoints included)."""
        x = self.coordinates(node)
        hit = np.zeros(len(src), dtype=bool)
        ndim = len(self.dims)
        for j in range(ndim):
            length, stride = self.dims[j], self.strides[j]
            on_line = np.ones(len(src), dtype=bool)
            for i in range(ndim):
                if i != j:
                    owner = dst if i < j else src
                    on_line &= (owner // self.strides[i]) % self.dims[i] == x[i]
            step = self._steps(src, dst, j)
            offset = (x[j] - (src // stride) % length) * np.where(step < 0, -1, 1)
            if self.wrap:
                offset %= length
            hit |= on_line & (offset >= 0) & (offset <= np.abs(step))
        return hit


def _grid_links(dims: tuple[int, ...], strides: tuple[int, ...],
                wrap: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Directed links of a grid, ordered by (source, dimension, direction), deduplicated,
    and the table [dim, direction, node] -> link id (-1 where there is no link)."""
    num_nodes = math.prod(dims)
    nodes = np.arange(num_nodes, dtype=np.int64)
    srcs, dsts, slots = [], [], []
    for j, (length, stride) in enumerate(zip(dims, strides, strict=True)):
        if length == 1:
            continue
        coord = (nodes // stride) % length
        for direction, delta in ((0, 1), (1, -1)):
            moved = coord + delta
            valid = np.ones(num_nodes, dtype=bool) if wrap else (moved >= 0) & (moved < length)
            neighbour = nodes + ((moved % length) - coord) * stride
            srcs.append(nodes[valid])
            dsts.append(neighbour[valid])
            slots.append((j * 2 + direction) * num_nodes + nodes[valid])
    table = np.full((len(dims), 2, num_nodes), -1, dtype=np.int64)
    if not srcs:
        return np.zeros(0, np.int32), np.zeros(0, np.int32), table
    src, dst, slot = np.concatenate(srcs), np.concatenate(dsts), np.concatenate(slots)
    order = np.lexsort((slot, src))  # by source, then dimension and direction
    src, dst, slot = src[order], dst[order], slot[order]
    keys = src * num_nodes + dst
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    kept = np.sort(first)
    link_of_key = np.searchsorted(kept, first)  # id of each unique (src, dst): its rank in kept
    table.reshape(-1)[slot] = link_of_key[np.ravel(inverse)]
    return src[kept].astype(np.int32), dst[kept].astype(np.int32), table


class Torus(Grid):
    """``torus:AxB[xC…]``: a grid with wrap-around links in every dimension."""

    kind = "torus"

    def __init__(self, dims: tuple[int, ...], params: NetworkParams | None = None) -> None:
        super().__init__("torus:" + "x".join(map(str, dims)), dims, True, params)


class Mesh(Grid):
    """``mesh:AxB[xC…]``: a grid without wrap-around links."""

    kind = "mesh"

    def __init__(self, dims: tuple[int, ...], params: NetworkParams | None = None) -> None:
        super().__init__("mesh:" + "x".join(map(str, dims)), dims, False, params)


class Ring(Grid):
    """``ring:N``: a 1-D torus (bidirectional ring)."""

    kind = "ring"

    def __init__(self, n: int, params: NetworkParams | None = None) -> None:
        super().__init__(f"ring:{int(n)}", (int(n),), True, params)


class Hypercube(Grid):
    """``hypercube:D``: 2^D nodes, node ids differing in one bit are linked."""

    kind = "hypercube"

    def __init__(self, dimension: int, params: NetworkParams | None = None) -> None:
        super().__init__(f"hypercube:{int(dimension)}", (2,) * int(dimension), True, params)
