"""Networks as values: nodes, directed links, deterministic routes and link loads.

A `Topology` is an immutable value built from a short spec string (``torus:8x8x8``) and a
`NetworkParams` record. It is comparable, hashable and prints back as its spec, so a
simulation is reproducible from its inputs. Everything about it is held in numpy arrays:

- nodes are ``0 .. num_nodes-1``; the ones that can host ranks are ``compute_nodes`` (in
  canonical, row-major order), the others are switches;
- links are directed: link ``i`` goes from ``link_src[i]`` to ``link_dst[i]``; every physical
  cable gives two links, one per direction. Links are numbered in order of their source node,
  so "the lowest link id" is a deterministic tie-break that prefers earlier dimensions;
- a set of routes is returned in CSR form, ``(offsets, links)``: route ``i`` is the chain
  ``links[offsets[i]:offsets[i+1]]``, from its source node to its destination node;
- every link has a bandwidth and a latency, ``link_bandwidth[i]`` and ``link_latency[i]``. On
  most networks they are the uniform ``params.bandwidth`` and ``params.hop_latency``
  (``uniform_links`` is true); a network whose links differ (the machine hierarchy, whose
  links belong to levels) passes its own arrays, and the simulator's models read them. Such a
  network derives them from its own value (``MachineNetwork`` from its ``Machine``) and
  compares, hashes and pickles by that value.

Routing is minimal and deterministic. Each kind of network gives its *clean* route (dimension
order on grids, up/down on trees, destination-chosen up-ports on fat-trees). When nodes are
*excluded* — members of the network that are not in the communicating group (seed 000,
mechanism 5) — a route whose clean path would cross one of them is replaced by a detour: the
shortest path in the network without the excluded nodes, found by a breadth-first search from
the destination and taking, at every node, the lowest-numbered link that gets one hop closer.
Clean routes are computed vectorised; detours only for the few routes that need them.

`link_loads` adds up the bytes every link carries for a set of messages without necessarily
materialising every route (grids use a cumulative sum along each ring), which is what makes an
all-pairs exchange on 4096 nodes cheap enough to simulate.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

import numpy as np

from ..errors import ArgumentError, CollopsError

Routes = tuple[np.ndarray, np.ndarray]

#: links per chunk when routes are materialised piecewise (bounds memory, ~32 MiB of int32)
CHUNK_LINKS = 1 << 23


#: how a torus route breaks the tie at distance L/2 (see `NetworkParams`)
TIE_BREAKS = ("plus", "simgrid")


class DisconnectedError(CollopsError):
    """Excluding nodes left some source unable to reach its destination."""


@dataclass(frozen=True)
class NetworkParams:
    """Link and timing parameters of a network (one value per topology).

    ``packet_size`` is a whole packet (V_max), ``header_bytes`` (V_0) of it header, so a packet
    carries ``packet_size - header_bytes`` payload bytes. ``tie_break`` is the way a torus
    route goes at distance exactly L/2 on a ring of even length L: ``plus`` always +,
    ``simgrid`` as SimGrid's ``TorusZone`` (+, except from coordinate L/2, whence −).
    ``buffer_packets`` is the packets a router buffers per incoming link in the packet model
    (0: unbounded).
    """

    bandwidth: float = 2e9
    hop_latency: float = 1e-7
    packet_size: int = 256
    header_bytes: int = 0
    overhead: float = 1e-6
    tie_break: str = "plus"
    buffer_packets: int = 0

    def __post_init__(self) -> None:
        if not self.bandwidth > 0:
            raise ArgumentError("NetworkParams", "bandwidth", self.bandwidth, "must be > 0")
        for name in ("hop_latency", "overhead"):
            if getattr(self, name) < 0:
                raise ArgumentError("NetworkParams", name, getattr(self, name), "must be >= 0")
        if int(self.packet_size) < 1:
            raise ArgumentError("NetworkParams", "packet_size", self.packet_size, "must be >= 1")
        if not 0 <= int(self.header_bytes) < int(self.packet_size):
            raise ArgumentError("NetworkParams", "header_bytes", self.header_bytes,
                                "must be >= 0 and smaller than packet_size")
        if int(self.buffer_packets) < 0:
            raise ArgumentError("NetworkParams", "buffer_packets", self.buffer_packets,
                                "must be >= 0 (0: unbounded)")
        object.__setattr__(self, "buffer_packets", int(self.buffer_packets))
        if self.tie_break not in TIE_BREAKS:
            raise ArgumentError("NetworkParams", "tie_break", self.tie_break,
                                f"one of {', '.join(TIE_BREAKS)}")
        object.__setattr__(self, "bandwidth", float(self.bandwidth))
        object.__setattr__(self, "hop_latency", float(self.hop_latency))
        object.__setattr__(self, "overhead", float(self.overhead))
        object.__setattr__(self, "packet_size", int(self.packet_size))
        object.__setattr__(self, "header_bytes", int(self.header_bytes))

    @property
    def byte_time(self) -> float:
        """Seconds per byte on one link (1 / bandwidth)."""
        return 1.0 / self.bandwidth

    def to_dict(self) -> dict[str, Any]:
        """The parameters as a plain dict."""
        return asdict(self)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The parameter names."""
        return tuple(f.name for f in fields(cls))


def csr_gather(ptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Indices ``ptr[r]..ptr[r+1]-1`` of every row ``r`` in ``rows``, concatenated."""
    starts = ptr[rows]
    counts = ptr[rows + 1] - starts
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    row_first = np.cumsum(counts) - counts
    return np.repeat(starts - row_first, counts) + np.arange(total)


def offsets_from_lengths(lengths: np.ndarray) -> np.ndarray:
    """CSR offsets (length n+1, int64) from per-row lengths."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def permute_routes(routes: Routes, order: np.ndarray) -> Routes:
    """Reorder CSR routes: row ``i`` of ``routes`` becomes row ``order[i]`` of the result."""
    offsets, links = routes
    lengths = np.diff(offsets)
    new_lengths = np.empty_like(lengths)
    new_lengths[order] = lengths
    new_offsets = offsets_from_lengths(new_lengths)
    shift = new_offsets[order] - offsets[:-1]
    positions = np.repeat(shift, lengths) + np.arange(len(links))
    out = np.empty_like(links)
    out[positions] = links
    return new_offsets, out


def concat_routes(parts: list[Routes]) -> Routes:
    """Concatenate CSR route sets row-wise."""
    if not parts:
        return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32)
    lengths = np.concatenate([np.diff(o) for o, _ in parts])
    links = np.concatenate([lk for _, lk in parts]).astype(np.int32, copy=False)
    return offsets_from_lengths(lengths), links


class Topology:
    """A network: nodes, directed links, compute nodes, deterministic routing (a value)."""

    kind: ClassVar[str] = ""
    in_network_reduction: ClassVar[bool] = False

    spec: str
    params: NetworkParams
    num_nodes: int
    compute_nodes: np.ndarray
    link_src: np.ndarray
    link_dst: np.ndarray
    injection_links: int
    _cache: dict[str, Any]
    _link_bandwidth: np.ndarray | None
    _link_latency: np.ndarray | None

    def __init__(self, spec: str, params: NetworkParams | None, num_nodes: int,
                 compute_nodes: np.ndarray, link_src: np.ndarray, link_dst: np.ndarray, *,
                 link_bandwidth: np.ndarray | None = None,
                 link_latency: np.ndarray | None = None) -> None:
        set_ = object.__setattr__
        set_(self, "spec", spec)
        set_(self, "params", params if params is not None else NetworkParams())
        set_(self, "num_nodes", int(num_nodes))
        set_(self, "compute_nodes", _frozen(np.asarray(compute_nodes, dtype=np.int64)))
        set_(self, "link_src", _frozen(np.asarray(link_src, dtype=np.int32)))
        set_(self, "link_dst", _frozen(np.asarray(link_dst, dtype=np.int32)))
        if len(self.link_src) and np.any(np.diff(self.link_src) < 0):
            raise ValueError("links must be numbered in order of their source node")
        set_(self, "_cache", {})
        set_(self, "_link_bandwidth", self._per_link("link_bandwidth", link_bandwidth, 0.0))
        set_(self, "_link_latency", self._per_link("link_latency", link_latency, None))
        out_degree = np.bincount(self.link_src, minlength=self.num_nodes)
        set_(self, "injection_links",
             int(out_degree[self.compute_nodes].max()) if len(self.compute_nodes) else 0)

    # ----------------------------------------------------------------- value behaviour
    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Topology):
            return NotImplemented
        return (type(self) is type(other) and self.spec == other.spec
                and self.params == other.params)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.spec, self.params))

    def __str__(self) -> str:
        return self.spec

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r}, {self.params!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        from .parse import parse_topology
        return (parse_topology, (self.spec, self.params))

    def to_dict(self) -> dict[str, Any]:
        """The topology as a plain dict: ``{"spec": ..., <parameter>: value, ...}``."""
        return {"spec": self.spec, **self.params.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Topology:
        """Rebuild a topology from `to_dict` output (parameters flat or under ``params``)."""
        from .parse import topology_from_dict
        return topology_from_dict(d)

    # ----------------------------------------------------------------- structure
    @property
    def num_links(self) -> int:
        """Number of directed links."""
        return len(self.link_src)

    @property
    def uniform_links(self) -> bool:
        """Whether every link has the network's ``params`` bandwidth and hop latency."""
        return self._link_bandwidth is None and self._link_latency is None

    @property
    def link_bandwidth(self) -> np.ndarray:
        """Bandwidth of every link in bytes/s (float64, length num_links, read-only)."""
        if self._link_bandwidth is not None:
            return self._link_bandwidth
        return self._uniform_per_link("link_bandwidth", self.params.bandwidth)

    @property
    def link_latency(self) -> np.ndarray:
        """Latency of every link in seconds (float64, length num_links, read-only)."""
        if self._link_latency is not None:
            return self._link_latency
        return self._uniform_per_link("link_latency", self.params.hop_latency)

    def _uniform_per_link(self, name: str, value: float) -> np.ndarray:
        cached = self._cache.get(name)
        if cached is None:
            cached = _frozen(np.full(self.num_links, value, dtype=np.float64))
            self._cache[name] = cached
        return cached  # type: ignore[no-any-return]

    def _per_link(self, name: str, values: np.ndarray | None,
                  above: float | None) -> np.ndarray | None:
        """Checked per-link values (one per link, finite, > ``above`` or else >= 0)."""
        if values is None:
            return None
        array = np.asarray(values, dtype=np.float64)
        if array.shape != (self.num_links,):
            raise ArgumentError(self.spec, name, array.shape,
                                f"need one value per link ({self.num_links})")
        ok = np.isfinite(array) & ((array > above) if above is not None else (array >= 0))
        if not ok.all():
            bad = int(np.flatnonzero(~ok)[0])
            raise ArgumentError(self.spec, name, float(array[bad]),
                                f"link {bad}: must be finite and "
                                + (f"> {above:g}" if above is not None else ">= 0"))
        return _frozen(array)

    @property
    def num_compute_nodes(self) -> int:
        """Number of nodes that can host ranks."""
        return len(self.compute_nodes)

    @property
    def max_route_length(self) -> int:
        """An upper bound on the hops of a clean route (the diameter)."""
        return max(1, self.num_nodes - 1)

    def is_switch(self, nodes: np.ndarray | int) -> np.ndarray:
        """Whether each node is a switch (cannot host ranks)."""
        mask = np.ones(self.num_nodes, dtype=bool)
        mask[self.compute_nodes] = False
        return mask[np.asarray(nodes)]

    def node_label(self, node: int) -> str:
        """A human-readable name for a node (coordinates on grids)."""
        return str(int(node))

    def link_id(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Ids of the links ``src[i] -> dst[i]`` (vectorised); raises if one does not exist."""
        keys, ids = self._link_keys()
        want = np.asarray(src, dtype=np.int64) * self.num_nodes + np.asarray(dst, dtype=np.int64)
        if want.size == 0:
            return np.zeros(want.shape, dtype=np.int32)
        pos = np.searchsorted(keys, want)
        pos = np.minimum(pos, len(keys) - 1) if len(keys) else pos
        if len(keys) == 0 or not np.all(keys[pos] == want):
            bad = np.flatnonzero(keys[pos] != want)[0] if len(keys) else 0
            raise ArgumentError(self.spec, "link", (int(np.ravel(src)[bad]),
                                                    int(np.ravel(dst)[bad])), "no such link")
        return ids[pos].astype(np.int32)

    def _link_keys(self) -> tuple[np.ndarray, np.ndarray]:
        cached = self._cache.get("link_keys")
        if cached is None:
            keys = self.link_src.astype(np.int64) * self.num_nodes + self.link_dst
            order = np.argsort(keys, kind="stable")
            cached = (keys[order], order)
            self._cache["link_keys"] = cached
        return cached  # type: ignore[no-any-return]

    def _in_links(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR of incoming links per node: (ptr, link ids sorted by destination)."""
        cached = self._cache.get("in_links")
        if cached is None:
            order = np.argsort(self.link_dst, kind="stable")
            counts = np.bincount(self.link_dst, minlength=self.num_nodes)
            cached = (offsets_from_lengths(counts), order)
            self._cache["in_links"] = cached
        return cached  # type: ignore[no-any-return]

    # ----------------------------------------------------------------- routing API
    def routes(self, src_nodes: np.ndarray, dst_nodes: np.ndarray,
               excluded: Iterable[int] = frozenset()) -> Routes:
        """CSR routes: route i uses ``links[offsets[i]:offsets[i+1]]`` in order (deterministic).

        Routes avoid every ``excluded`` node as an intermediate hop (detouring when needed).
        """
        src, dst = self._check_pairs(src_nodes, dst_nodes)
        allowed = self._allowed(excluded, src, dst)
        if allowed is None:
            return self._clean_routes(src, dst)
        dirty = self._dirty(src, dst, allowed)
        if not dirty.any():
            return self._clean_routes(src, dst)
        clean_idx, dirty_idx = np.flatnonzero(~dirty), np.flatnonzero(dirty)
        parts = [self._clean_routes(src[clean_idx], dst[clean_idx]),
                 self._detour_routes(src[dirty_idx], dst[dirty_idx], allowed)]
        return permute_routes(concat_routes(parts), np.concatenate([clean_idx, dirty_idx]))

    def route_chunks(self, src_nodes: np.ndarray, dst_nodes: np.ndarray,
                     excluded: Iterable[int] = frozenset(), max_links: int = CHUNK_LINKS
                     ) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
        """Routes piecewise: yields ``(start, stop, offsets, links)`` for pairs start..stop-1."""
        src, dst = self._check_pairs(src_nodes, dst_nodes)
        excluded = frozenset(int(x) for x in excluded)
        step = self._pair_chunk(max_links)
        for start in range(0, len(src), step):
            stop = min(len(src), start + step)
            offsets, links = self.routes(src[start:stop], dst[start:stop], excluded)
            yield start, stop, offsets, links

    def hops(self, src_nodes: np.ndarray, dst_nodes: np.ndarray,
             excluded: Iterable[int] = frozenset()) -> np.ndarray:
        """Number of links on each route (int64)."""
        src, dst = self._check_pairs(src_nodes, dst_nodes)
        allowed = self._allowed(excluded, src, dst)
        out = self._clean_hops(src, dst)
        if allowed is None:
            return out
        dirty = self._dirty(src, dst, allowed)
        if dirty.any():
            offsets, _ = self._detour_routes(src[dirty], dst[dirty], allowed)
            out[dirty] = np.diff(offsets)
        return out

    def link_loads(self, src_nodes: np.ndarray, dst_nodes: np.ndarray,
                   nbytes: float | np.ndarray = 1.0,
                   excluded: Iterable[int] = frozenset()) -> np.ndarray:
        """Bytes carried by every link (float64, length num_links) when src[i] sends nbytes[i]
        to dst[i] along its route (routes are not materialised where avoidable)."""
        src, dst = self._check_pairs(src_nodes, dst_nodes)
        weights = np.broadcast_to(np.asarray(nbytes, dtype=np.float64), src.shape)
        allowed = self._allowed(excluded, src, dst)
        if allowed is None:
            return self._clean_link_loads(src, dst, weights)
        dirty = self._dirty(src, dst, allowed)
        clean = ~dirty
        loads = self._clean_link_loads(src[clean], dst[clean], weights[clean])
        if dirty.any():
            offsets, links = self._detour_routes(src[dirty], dst[dirty], allowed)
            per_link = np.repeat(weights[dirty], np.diff(offsets))
            loads += np.bincount(links, weights=per_link, minlength=self.num_links)
        return loads

    def grouped_link_loads(self, src_nodes: np.ndarray, dst_nodes: np.ndarray,
                           nbytes: np.ndarray, group: np.ndarray, ngroups: int,
                           excluded: Iterable[int] = frozenset()
                           ) -> tuple[np.ndarray, np.ndarray]:
        """`link_loads` per group of messages, (ngroups, num_links), message i in
        ``group[i]`` (the congestion model's rounds), and every message's hops."""
        src, dst = self._check_pairs(src_nodes, dst_nodes)
        excluded = frozenset(int(x) for x in excluded)
        if not excluded:
            fast = self._clean_grouped_loads(src, dst, np.asarray(nbytes, np.float64),
                                             np.asarray(group, np.int64), int(ngroups))
            if fast is not None:
                return fast, self._clean_hops(src, dst)
        offsets, links = self.routes(src, dst, excluded)
        hops = np.diff(offsets)
        bins = np.repeat(np.asarray(group, np.int64), hops) * self.num_links + links
        loads = np.bincount(bins, weights=np.repeat(np.asarray(nbytes, np.float64), hops),
                            minlength=int(ngroups) * self.num_links)
        return loads.reshape(int(ngroups), self.num_links), hops

    def _clean_grouped_loads(self, src: np.ndarray, dst: np.ndarray, weights: np.ndarray,
                             group: np.ndarray, ngroups: int) -> np.ndarray | None:
        """Kinds that can add up grouped loads without routes do it here (None: they can't)."""
        return None

    def _pair_chunk(self, max_links: int = CHUNK_LINKS) -> int:
        """How many routes to materialise at once."""
        return max(1, max_links // self.max_route_length)

    def _dirty(self, src: np.ndarray, dst: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        """`_dirty_mask` in chunks."""
        step = self._pair_chunk()
        out = np.zeros(len(src), dtype=bool)
        for lo in range(0, len(src), step):
            out[lo:lo + step] = self._dirty_mask(src[lo:lo + step], dst[lo:lo + step], allowed)
        return out

    # ----------------------------------------------------------------- hooks for kinds
    def _node_paths(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Clean routes as node sequences: (paths[n, max_hops+1] padded with -1, hops[n])."""
        raise NotImplementedError

    def _clean_routes(self, src: np.ndarray, dst: np.ndarray) -> Routes:
        """Clean (exclusion-free) routes in CSR form; default: from `_node_paths`."""
        paths, hops = self._node_paths(src, dst)
        offsets = offsets_from_lengths(hops)
        links = np.empty(int(offsets[-1]), dtype=np.int32)
        for k in range(paths.shape[1] - 1):
            active = np.flatnonzero(hops > k)
            if len(active) == 0:
                break
            links[offsets[active] + k] = self.link_id(paths[active, k], paths[active, k + 1])
        return offsets, links

    def _clean_hops(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Hops of clean routes; default: from `_node_paths`."""
        return self._node_paths(src, dst)[1].astype(np.int64)

    def _clean_link_loads(self, src: np.ndarray, dst: np.ndarray,
                          weights: np.ndarray) -> np.ndarray:
        """Loads of clean routes; default: hop by hop from `_node_paths`, in chunks."""
        loads = np.zeros(self.num_links, dtype=np.float64)
        step = self._pair_chunk()
        for start in range(0, len(src), step):
            s, d = src[start:start + step], dst[start:start + step]
            w = weights[start:start + step]
            paths, hops = self._node_paths(s, d)
            for k in range(paths.shape[1] - 1):
                active = np.flatnonzero(hops > k)
                if len(active) == 0:
                    break
                ids = self.link_id(paths[active, k], paths[active, k + 1])
                loads += np.bincount(ids, weights=w[active], minlength=self.num_links)
        return loads

    def _dirty_mask(self, src: np.ndarray, dst: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        """Which clean routes pass through a node that is not allowed (intermediate hops)."""
        offsets, links = self._clean_routes(src, dst)
        lengths = np.diff(offsets)
        # the intermediate nodes are the destinations of every link but the route's last
        bad_hop = ~allowed[self.link_dst[links]]
        last = offsets[1:][lengths > 0] - 1
        bad_hop[last] = False
        route_of = np.repeat(np.arange(len(src)), lengths)
        return np.bincount(route_of[bad_hop], minlength=len(src)) > 0

    # ----------------------------------------------------------------- detours
    def _allowed(self, excluded: Iterable[int], src: np.ndarray,
                 dst: np.ndarray) -> np.ndarray | None:
        """Mask of nodes traffic may cross, or None when nothing is excluded."""
        nodes = np.array(sorted({int(x) for x in excluded}), dtype=np.int64)
        if len(nodes) == 0:
            return None
        if nodes.min() < 0 or nodes.max() >= self.num_nodes:
            raise ArgumentError(self.spec, "excluded", nodes.tolist(),
                                f"node ids must lie in 0..{self.num_nodes - 1}")
        allowed = np.ones(self.num_nodes, dtype=bool)
        allowed[nodes] = False
        if len(src) and not (allowed[src].all() and allowed[dst].all()):
            bad = np.concatenate([src[~allowed[src]], dst[~allowed[dst]]])[0]
            raise ArgumentError(self.spec, "excluded", nodes.tolist(),
                                f"node {int(bad)} is excluded but is a route's endpoint")
        return allowed

    def _toward(self, target: int, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """BFS toward ``target`` over allowed nodes: (distance per node or -1, next link)."""
        in_ptr, in_links = self._in_links()
        dist = np.full(self.num_nodes, -1, dtype=np.int64)
        dist[target] = 0
        frontier = np.array([target], dtype=np.int64)
        level = 0
        while len(frontier):
            prev = self.link_src[in_links[csr_gather(in_ptr, frontier)]]
            prev = prev[(dist[prev] < 0) & allowed[prev]]
            level += 1
            dist[prev] = level
            frontier = np.flatnonzero(dist == level)
        src_dist = dist[self.link_src]
        closer = (src_dist > 0) & (dist[self.link_dst] == src_dist - 1)
        candidates = np.flatnonzero(closer)  # ascending ids, hence ascending sources
        owners = self.link_src[candidates]
        first = np.flatnonzero(np.diff(owners, prepend=-1) != 0)
        next_link = np.full(self.num_nodes, -1, dtype=np.int64)
        next_link[owners[first]] = candidates[first]
        return dist, next_link

    def _toward_cached(self, target: int, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`_toward`, remembered for the latest set of excluded nodes (bounded memory)."""
        key = np.flatnonzero(~allowed).tobytes()
        cache = self._cache.get("toward")
        if cache is None or cache[0] != key:
            cache = (key, {})
            self._cache["toward"] = cache
        table: dict[int, tuple[np.ndarray, np.ndarray]] = cache[1]
        hit = table.get(target)
        if hit is None:
            dist, next_link = self._toward(target, allowed)
            hit = (dist.astype(np.int32), next_link.astype(np.int32))
            if len(table) * self.num_nodes < (1 << 24):
                table[target] = hit
        return hit

    def _detour_routes(self, src: np.ndarray, dst: np.ndarray, allowed: np.ndarray) -> Routes:
        """Shortest routes over allowed nodes (BFS per destination, lowest link id first)."""
        order = np.argsort(dst, kind="stable")
        sorted_dst = dst[order]
        targets, starts = np.unique(sorted_dst, return_index=True)
        bounds = np.append(starts, len(order))
        parts: list[Routes] = []
        for target, lo, hi in zip(targets, bounds[:-1], bounds[1:], strict=True):
            sources = src[order[lo:hi]]
            dist, next_link = self._toward_cached(int(target), allowed)
            lengths = dist[sources]
            if (lengths < 0).any():
                cut = int(sources[lengths < 0][0])
                raise DisconnectedError(
                    f"{self.spec}: excluding nodes {np.flatnonzero(~allowed).tolist()} leaves "
                    f"node {cut} with no path to node {int(target)}")
            offsets = offsets_from_lengths(lengths)
            links = np.empty(int(offsets[-1]), dtype=np.int32)
            current = sources.astype(np.int64)
            lengths = lengths.astype(np.int64)
            for k in range(int(lengths.max(initial=0))):
                active = np.flatnonzero(lengths > k)
                step = next_link[current[active]]
                links[offsets[active] + k] = step
                current[active] = self.link_dst[step]
            parts.append((offsets, links))
        return permute_routes(concat_routes(parts), order)

    # ----------------------------------------------------------------- checks
    def _check_pairs(self, src_nodes: Any, dst_nodes: Any) -> tuple[np.ndarray, np.ndarray]:
        src = np.asarray(src_nodes, dtype=np.int64).ravel()
        dst = np.asarray(dst_nodes, dtype=np.int64).ravel()
        if src.shape != dst.shape:
            src, dst = (a.ravel() for a in np.broadcast_arrays(src, dst))
        if len(src) and (min(src.min(), dst.min()) < 0
                         or max(src.max(), dst.max()) >= self.num_nodes):
            raise ArgumentError(self.spec, "nodes", "out of range",
                                f"node ids must lie in 0..{self.num_nodes - 1}")
        if len(src) and self.num_compute_nodes < self.num_nodes:
            switch = self._switch_mask()
            if switch[src].any() or switch[dst].any():
                raise ArgumentError(self.spec, "nodes", "a switch",
                                    "routes start and end at compute nodes")
        return src, dst

    def _switch_mask(self) -> np.ndarray:
        cached = self._cache.get("switch_mask")
        if cached is None:
            cached = self.is_switch(np.arange(self.num_nodes))
            self._cache["switch_mask"] = cached
        return cached  # type: ignore[no-any-return]


def _frozen(array: np.ndarray) -> np.ndarray:
    array = np.ascontiguousarray(array)
    array.setflags(write=False)
    return array
