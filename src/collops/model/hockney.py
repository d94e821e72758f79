"""Hockney's α-β (plus γ) for registered algorithms, with parameters read off a topology.

Every registered algorithm may carry a cost function of a `CallSpec` and a `CostModel`
(`collops.algorithms.registry`); this module builds the spec for ``nbytes`` per rank and the
cost model for a network: α = per-message overhead + hop latency × mean route length between
the ranks, β = 1/bandwidth scaled by the header overhead of an ``nbytes`` message. It knows
nothing about contention: it is the estimate of an idle network.
"""

from __future__ import annotations

import math

import numpy as np

from ..algorithms.registry import CostModel, get_algorithm
from ..algorithms.spec import REDUCING, CallSpec, make_spec
from ..ops import SUM
from ..topology.base import NetworkParams, Topology
from ..topology.placement import place
from .cluster import wire_bytes

#: rank pairs sampled to estimate the mean route length on large networks
MEAN_HOPS_SAMPLE = 1 << 16


def mean_hops(topology: Topology, nranks: int) -> float:
    """Mean route length between distinct ranks placed row-major (sampled when large)."""
    if nranks < 2:
        return 0.0
    nodes = place(topology, nranks)
    if nranks * (nranks - 1) <= MEAN_HOPS_SAMPLE:
        src, dst = np.repeat(nodes, nranks), np.tile(nodes, nranks)
        keep = src != dst
        src, dst = src[keep], dst[keep]
    else:
        rng = np.random.default_rng(0)
        a = rng.integers(0, nranks, MEAN_HOPS_SAMPLE)
        b = (a + rng.integers(1, nranks, MEAN_HOPS_SAMPLE)) % nranks
        src, dst = nodes[a], nodes[b]
    return float(topology.hops(src, dst).mean())


def network_wire_bytes(params: NetworkParams, nbytes: float) -> float:
    """Bytes on the wire for an ``nbytes`` message (headers of every packet included)."""
    if params.header_bytes == 0:
        return float(nbytes)
    return float(wire_bytes(int(math.ceil(nbytes)), params.packet_size, params.header_bytes))


def cost_model(topology: Topology, nranks: int, nbytes: float = 0.0,
               gamma: float = CostModel.gamma) -> CostModel:
    """The α-β-γ values of ``topology`` for ``nranks`` ranks and messages of ``nbytes``."""
    params = topology.params
    alpha = params.overhead + params.hop_latency * mean_hops(topology, nranks)
    header_factor = network_wire_bytes(params, nbytes) / nbytes if nbytes > 0 else 1.0
    return CostModel(alpha=alpha, beta=params.byte_time * header_factor, gamma=gamma)


def call_spec(collective: str, nranks: int, nbytes: int) -> CallSpec:
    """The call spec of ``nbytes`` per rank (bytes as uint8; the v-forms with equal counts)."""
    op = SUM if collective in REDUCING else None
    if collective in ("scatterv", "gatherv", "allgatherv", "reduce_scatter"):
        return make_spec(collective, nranks, np.uint8, counts=[nbytes] * nranks, op=op)
    if collective == "alltoallv":
        return make_spec(collective, nranks, np.uint8, sendcounts=[nbytes] * nranks,
                         recvcounts=[nbytes] * nranks)
    if collective == "barrier":
        return make_spec(collective, nranks, np.uint8)
    return make_spec(collective, nranks, np.uint8, count=nbytes, op=op)


def alpha_beta(collective: str, algorithm: str, topology: Topology, nranks: int,
               nbytes: int) -> float | None:
    """The registry's α-β-γ estimate of one call on an idle ``topology`` (None: no formula)."""
    alg = get_algorithm(collective, algorithm)
    if alg.cost is None:
        return None
    spec = call_spec(collective, nranks, nbytes)
    if not alg.eligible(spec):
        return None
    value = alg.estimate(spec, cost_model(topology, nranks, nbytes))
    return value if math.isfinite(value) else None
