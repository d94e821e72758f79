"""The seed-004 table: allgather and alltoall on a ring, a √p×√p torus and a hypercube.

``p`` processors, ``m`` bytes per processor (allgather) or per pair (alltoall), start-up
``t_s``, time per byte ``t_c``. Every scheme moves data between neighbours only, each of its
steps being one transfer per processor over one link:

=========  =====================  ============================  ============================
exchange   ring                   √p×√p torus (rows, columns)   hypercube (log₂p dimensions)
=========  =====================  ============================  ============================
allgather  (p−1)(t_s + m t_c)     2(√p−1) t_s + (p−1) m t_c     t_s log₂p + (p−1) m t_c
alltoall   (p−1)(t_s + ½ m p t_c) (√p−1)(2 t_s + m p t_c)       log₂p (t_s + ½ m p t_c)
=========  =====================  ============================  ============================

That is message switching. Packet (cut-through) switching does not improve them — each step
already crosses one link and concurrent packets would contend for the same links — but it adds
a per-hop latency ``t_h`` to every step; pass ``t_h`` to include it (the seed's formulas have
``t_h = 0``). On a hypercube the personalised exchange can instead be done as p−1 rounds of
pairwise exchanges with partner ``rank XOR k`` over disjoint dimension-order paths of
``popcount(k)`` hops: ``(p−1)(t_s + m t_c) + t_h · Σ_k popcount(k)``.
"""

from __future__ import annotations

import math

from ..errors import ArgumentError

SHAPES = ("ring", "torus", "hypercube")
EXCHANGES = ("allgather", "alltoall")


def _side(p: int) -> int:
    side = math.isqrt(p)
    if side * side != p:
        raise ArgumentError("seed004", "p", p, "the torus formulas need a square p")
    return side


def _log2(p: int) -> int:
    if p < 1 or p & (p - 1):
        raise ArgumentError("seed004", "p", p, "the hypercube formulas need a power of two")
    return p.bit_length() - 1


def ring_allgather(p: int, m: float, t_s: float, t_c: float, t_h: float = 0.0) -> float:
    """(p−1)(t_s + m t_c): p−1 steps passing one block to the next processor."""
    return (p - 1) * (t_s + t_h + m * t_c)


def torus_allgather(p: int, m: float, t_s: float, t_c: float, t_h: float = 0.0) -> float:
    """2(√p−1) t_s + (p−1) m t_c: a ring allgather along rows, then one of √p blocks along
    columns."""
    q = _side(p)
    return 2 * (q - 1) * (t_s + t_h) + (q - 1) * m * t_c + (q - 1) * q * m * t_c


def hypercube_allgather(p: int, m: float, t_s: float, t_c: float, t_h: float = 0.0) -> float:
    """t_s log₂p + (p−1) m t_c: exchange doubling blocks along each dimension in turn."""
    d = _log2(p)
    return d * (t_s + t_h) + sum(2**k for k in range(d)) * m * t_c


def ring_alltoall(p: int, m: float, t_s: float, t_c: float, t_h: float = 0.0) -> float:
    """(p−1)(t_s + ½ m p t_c): relay the personalised blocks round the ring (as the seed
    writes it: p−1 steps of ½·m·p bytes on average)."""
    return (p - 1) * (t_s + t_h + 0.5 * m * p * t_c)


def torus_alltoall(p: int, m: float, t_s: float, t_c: float, t_h: float = 0.0) -> float:
    """(√p−1)(2 t_s + m p t_c): ring alltoall along rows of √p-block messages, then columns."""
    q = _side(p)
    return (q - 1) * (2 * (t_s + t_h) + m * p * t_c)


def hypercube_alltoall(p: int, m: float, t_s: float, t_c: float, t_h: float = 0.0) -> float:
    """log₂p (t_s + ½ m p t_c): along each dimension send the half of the blocks bound across it."""
    d = _log2(p)
    return d * (t_s + t_h + 0.5 * m * p * t_c)


def hypercube_alltoall_pairwise(p: int, m: float, t_s: float, t_c: float,
                                t_h: float = 0.0) -> float:
    """(p−1)(t_s + m t_c) + t_h Σ popcount(k): packet-switched pairwise rounds, partner
    rank XOR k."""
    _log2(p)
    hops = sum(bin(k).count("1") for k in range(1, p))
    return (p - 1) * (t_s + m * t_c) + t_h * hops


_TABLE = {
    ("allgather", "ring"): ring_allgather,
    ("allgather", "torus"): torus_allgather,
    ("allgather", "hypercube"): hypercube_allgather,
    ("alltoall", "ring"): ring_alltoall,
    ("alltoall", "torus"): torus_alltoall,
    ("alltoall", "hypercube"): hypercube_alltoall,
}


def seed004(exchange: str, shape: str, p: int, m: float, t_s: float, t_c: float,
            t_h: float = 0.0, switching: str = "message") -> float:
    """One cell of the seed-004 table (``switching="packet"`` on a hypercube alltoall gives the
    pairwise-exchange variant; elsewhere packet switching gives the same time)."""
    if (exchange, shape) not in _TABLE:
        raise ArgumentError("seed004", "exchange/shape", (exchange, shape),
                            f"exchange in {EXCHANGES}, shape in {SHAPES}")
    if switching not in ("message", "packet"):
        raise ArgumentError("seed004", "switching", switching, "'message' or 'packet'")
    if switching == "packet" and (exchange, shape) == ("alltoall", "hypercube"):
        return hypercube_alltoall_pairwise(p, m, t_s, t_c, t_h)
    return _TABLE[exchange, shape](p, m, t_s, t_c, t_h)
