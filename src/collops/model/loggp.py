"""LogGP (Alexandrov et al.): L latency, o CPU overhead, g gap between messages, G gap per byte,
P processors.

A message of ``m`` bytes costs its sender ``o``, occupies the sender's network interface for
``(m−1)·G`` after the first byte, crosses the network in ``L`` and costs the receiver ``o``:
``o + (m−1)G + L + o``. A processor can start a new message at most every
``max(g, o + (m−1)G)`` (the larger of the gap and the time the previous one occupied it). The
collective shapes below are the usual contention-free LogGP estimates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..topology.base import NetworkParams


@dataclass(frozen=True)
class LogGP:
    """The LogGP parameters (seconds; G per byte)."""

    L: float = 1e-6
    o: float = 1e-6
    g: float = 1e-6
    G: float = 5e-10
    P: int = 2

    @classmethod
    def from_network(cls, params: NetworkParams, processors: int, hops: float = 1.0) -> LogGP:
        """LogGP values of a modelled network: L = hops·hop_latency, o = g = overhead,
        G = 1/bandwidth."""
        return cls(L=hops * params.hop_latency, o=params.overhead, g=params.overhead,
                   G=params.byte_time, P=int(processors))

    def _serial(self, m: float) -> float:
        """Sender-side time of one m-byte message after its first byte."""
        return max(m - 1.0, 0.0) * self.G

    def interval(self, m: float) -> float:
        """Shortest time between the starts of two consecutive m-byte sends."""
        return max(self.g, self.o + self._serial(m))

    def message(self, m: float) -> float:
        """One m-byte message, from the sender's call to the receiver holding it."""
        return self.o + self._serial(m) + self.L + self.o

    def sends(self, k: int, m: float) -> float:
        """k back-to-back m-byte messages from one sender (the last one's arrival)."""
        return 0.0 if k <= 0 else (k - 1) * self.interval(m) + self.message(m)

    def linear(self, m: float) -> float:
        """Root sends (or receives) P−1 messages one after another (flat bcast/scatter/gather)."""
        return self.sends(self.P - 1, m)

    def binomial(self, m: float) -> float:
        """Binomial tree broadcast: ⌈log₂P⌉ levels of one message each."""
        return math.ceil(math.log2(self.P)) * self.message(m) if self.P > 1 else 0.0

    def ring_allgather(self, m: float) -> float:
        """Ring allgather: P−1 neighbour steps of m bytes."""
        return (self.P - 1) * self.message(m)

    def recursive_doubling_allgather(self, m: float) -> float:
        """Recursive doubling allgather (P a power of two): rounds of m, 2m, 4m, … bytes."""
        rounds = max(0, (self.P - 1).bit_length())
        return sum(self.message(m * 2**k) for k in range(rounds))

    def pairwise_alltoall(self, m: float) -> float:
        """Pairwise alltoall: P−1 exchange rounds of m bytes."""
        return (self.P - 1) * self.message(m)

    def linear_alltoall(self, m: float) -> float:
        """Every rank posts its P−1 sends at once: bounded by its injection rate."""
        return self.sends(self.P - 1, m)
