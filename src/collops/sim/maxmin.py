"""Max-min fair rates by progressive filling, vectorised over (flow, link) pairs.

Every flow crosses a set of links of given capacities. Progressive filling raises the rates
of all unfrozen flows together; when a link's remaining capacity divided by its unfrozen
flows is the smallest of all links, that link is a bottleneck: its unfrozen flows freeze at
that share, their rate is taken off every link they cross, and filling goes on with the rest.
The result is the max-min fair allocation (no flow can gain without taking from a flow whose
rate is not larger). Each round of filling is a few numpy calls over the pairs still open, so
the cost is (number of distinct bottleneck levels) × (pairs). The compiled twin
``collops.sim._maxmin`` (built with the package when a C compiler is at hand) runs the same
rounds without numpy's per-call overhead, which dominates for the few hundred pairs of a
windowed run; `max_min_rates` uses it when it is there.
"""

from __future__ import annotations

import numpy as np

try:
    from . import _maxmin as _compiled
except ImportError:  # built without a C compiler: the numpy rounds below
    _compiled = None  # type: ignore[assignment]

#: two shares within this relative distance are the same bottleneck level
SAME_LEVEL = 1e-12


def max_min_rates(pair_flow: np.ndarray, pair_link: np.ndarray, nflows: int,
                  capacity: np.ndarray, compiled: bool = True) -> np.ndarray:
    """Max-min fair rate of each of ``nflows`` flows; flow ``pair_flow[i]`` crosses link
    ``pair_link[i]``, link ``l`` has ``capacity[l]``. A flow crossing no link gets ``inf``.
    ``compiled=False`` forces the numpy rounds."""
    if compiled and _compiled is not None:
        rate = np.empty(nflows, dtype=np.float64)
        _compiled.fill(np.ascontiguousarray(pair_flow, dtype=np.int64),
                       np.ascontiguousarray(pair_link, dtype=np.int64),
                       np.ascontiguousarray(capacity, dtype=np.float64), rate)
        return rate
    rate = np.full(nflows, np.inf)
    if len(pair_flow) == 0:
        return rate
    left = np.asarray(capacity, dtype=np.float64).copy()
    nlinks = len(left)
    flow_of_pair = np.asarray(pair_flow, dtype=np.int64)
    link_of_pair = np.asarray(pair_link, dtype=np.int64)
    frozen = np.zeros(nflows, dtype=bool)
    while len(flow_of_pair):
        crossing = np.bincount(link_of_pair, minlength=nlinks)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(crossing > 0, np.maximum(left, 0.0) / crossing, np.inf)
        level = share.min()
        bottleneck = share <= level * (1.0 + SAME_LEVEL)
        frozen[flow_of_pair[bottleneck[link_of_pair]]] = True
        closing = frozen[flow_of_pair]
        rate[flow_of_pair[closing]] = level
        left -= np.bincount(link_of_pair[closing], minlength=nlinks) * level
        keep = ~closing
        flow_of_pair, link_of_pair = flow_of_pair[keep], link_of_pair[keep]
    return rate


def max_min_rates_of_routes(messages: np.ndarray, route_offsets: np.ndarray,
                            route_links: np.ndarray, capacity: np.ndarray,
                            unbounded: float, compiled: bool = True) -> np.ndarray:
    """`max_min_rates` of flows carrying ``messages``, message m crossing
    ``route_links[route_offsets[m]:route_offsets[m+1]]``; a flow crossing no link gets
    ``unbounded``. Compiled: links taken from a heap in order of their share, about
    O(pairs log links); else (or with ``compiled=False``) the numpy rounds."""
    messages = np.ascontiguousarray(messages, dtype=np.int64)
    if compiled and _compiled is not None:
        rate = np.empty(len(messages), dtype=np.float64)
        _compiled.fill_routes(messages, np.ascontiguousarray(route_offsets, dtype=np.int64),
                              np.ascontiguousarray(route_links, dtype=np.int64),
                              np.ascontiguousarray(capacity, dtype=np.float64), rate,
                              float(unbounded))
        return rate
    starts, ends = route_offsets[messages], route_offsets[messages + 1]
    hops = ends - starts
    pairs = np.repeat(starts - np.cumsum(hops) + hops, hops) + np.arange(int(hops.sum()))
    rate = max_min_rates(np.repeat(np.arange(len(messages)), hops), route_links[pairs],
                         len(messages), capacity, compiled=False)
    return np.where(np.isinf(rate), unbounded, rate)
