"""`closed_form`: the closed-form time of one call on a modelled network, where one applies.

These cases are *exact* for an idle network — the algorithm's messages in each round go between
neighbours (or over disjoint paths), so nothing contends and the seed-004 formula is the time:

* ring allgather on a ring of p nodes: p−1 rounds of one m-byte neighbour transfer;
* recursive-doubling allgather on a hypercube of p = 2^D nodes: D rounds of 2^k·m bytes;
* pairwise alltoall on a hypercube: p−1 rounds with partner rank XOR k, over disjoint
  dimension-order paths of popcount(k) hops;
* the lecture's own schemes on their own networks (`collops.algorithms.lecture`): the ring
  relay on a ring, the dimension exchange on a hypercube, and the torus schemes on a √p×√p
  torus.

A transfer of ``m`` bytes over ``l`` hops costs ``overhead + l·hop_latency + wire(m)/bandwidth``
(cut-through; ``wire`` adds ``header_bytes`` per packet), so ``t_s = overhead + hop_latency`` and
``t_c = 1/bandwidth`` in the seed's notation; local copies (γ) are not counted. Otherwise
the registry's α-β estimate for an idle network is returned (`collops.model.hockney`), or
None when the algorithm has no formula.
"""

from __future__ import annotations

from ..errors import ArgumentError
from ..topology.base import NetworkParams, Topology
from ..topology.grid import Grid
from ..topology.parse import parse_topology
from .hockney import alpha_beta, network_wire_bytes


def seed_shape(topology: Topology, nranks: int) -> str | None:
    """``"ring"``, ``"torus"`` (√p×√p) or ``"hypercube"`` when ``nranks`` fill such a network."""
    if not isinstance(topology, Grid) or not topology.wrap or nranks != topology.num_nodes:
        return None
    dims = [d for d in topology.dims if d > 1]
    if len(dims) == 1:
        return "hypercube" if dims == [2] else "ring"
    if dims and all(d == 2 for d in dims):
        return "hypercube"
    if len(dims) == 2 and dims[0] == dims[1]:
        return "torus"
    return None


SWITCHING = ("cut-through", "packet", "message")


def _step(params: NetworkParams, nbytes: float, hops: int = 1,
          switching: str = "cut-through") -> float:
    wire = network_wire_bytes(params, nbytes)
    if switching == "message":  # the whole message is stored at every node it crosses
        return params.overhead + hops * (params.hop_latency + wire * params.byte_time)
    time = params.overhead + hops * params.hop_latency + wire * params.byte_time
    if switching == "packet" and hops > 1:  # each packet is stored once more per extra hop
        time += (hops - 1) * min(wire, params.packet_size) * params.byte_time
    return time


def _lecture_time(family: str, algorithm: str, shape: str, params: NetworkParams, p: int,
                  nbytes: int) -> float | None:
    """The lecture's own schemes (`collops.algorithms.lecture`) on their own network: every
    step a neighbour transfer, its size as the scheme moves it."""
    if family == "alltoall" and algorithm == "ring_relay" and shape == "ring":
        return sum(_step(params, (p - s) * nbytes) for s in range(1, p))
    if family == "alltoall" and algorithm == "hypercube_exchange" and shape == "hypercube":
        return (p.bit_length() - 1) * _step(params, p // 2 * nbytes)
    if shape == "torus" and algorithm == "torus_dimensions":
        q = int(round(p ** 0.5))
        if family == "alltoall":
            return 2 * sum(_step(params, (q - s) * q * nbytes) for s in range(1, q))
        if family == "allgather":
            return (q - 1) * (_step(params, nbytes) + _step(params, q * nbytes))
    return None


def exact_time(collective: str, algorithm: str, topology: Topology, nranks: int,
               nbytes: int, switching: str = "cut-through") -> float | None:
    """The contention-free closed form of the three exact cases (None elsewhere)."""
    shape = seed_shape(topology, nranks)
    family = collective.removesuffix("v")
    params, p = topology.params, int(nranks)
    if p < 2 or shape is None:
        return None
    ring_like = shape == "ring" or (shape == "hypercube" and p == 2)
    if ring_like and family == "allgather" and algorithm == "ring":
        return (p - 1) * _step(params, nbytes)
    if shape == "hypercube" and family == "allgather" and algorithm == "recursive_doubling":
        return sum(_step(params, nbytes * 2**k) for k in range(p.bit_length() - 1))
    if shape == "hypercube" and family == "alltoall" and algorithm == "pairwise":
        return sum(_step(params, nbytes, bin(k).count("1"), switching) for k in range(1, p))
    return _lecture_time(family, algorithm, shape, params, p, nbytes)


def closed_form(collective: str, algorithm: str, topology: Topology | str, nranks: int,
                nbytes: int, switching: str = "cut-through") -> float | None:
    """Seed-004 time where it is exact, else the α-β estimate, else None (seconds).

    ``switching="packet"`` adds, per transfer over l hops, the store-and-forward of one packet
    at each of the l−1 intermediate nodes (the packet-level simulator's model);
    ``"message"`` stores the whole message at each of them.
    """
    if switching not in SWITCHING:
        raise ArgumentError("closed_form", "switching", switching, " or ".join(SWITCHING))
    topo = parse_topology(topology) if isinstance(topology, str) else topology
    exact = exact_time(collective, algorithm, topo, nranks, nbytes, switching)
    if exact is not None:
        return exact
    return alpha_beta(collective, algorithm, topo, nranks, nbytes)
