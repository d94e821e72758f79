"""Point-to-point transfer costs: message vs packet switching and the cluster models A and B.

Notation of seed 004 (lecture notes after Gergel): ``t_s`` start-up time, ``t_c`` time per
byte, ``t_h`` time per hop (router traversal), ``l`` path length in hops, ``m`` bytes.

* Message switching (store-and-forward): the whole message is received at every hop before it
  is forwarded: ``t_s + (m·t_c + t_h)·l``.
* Packet switching (cut-through): packets are pipelined across the hops, so the path length
  costs only its per-hop latency: ``t_s + m·t_c + t_h·l``. The two agree when ``l = 1``, which
  is why packet switching does not improve the neighbour-to-neighbour schemes of the seed.

Clusters are complete graphs behind a switch (path length 1):

* Model A: ``t_s + m·t_c``.
* Model B: the message travels as ``n = ⌈m / (V_max − V_0)⌉`` packets (at least one), each
  carrying ``V_0`` header bytes, so ``m + n·V_0`` bytes go on the wire. Start-up grows with the
  bytes prepared (``t_s0 + t_s1·bytes``), but only the first packet's preparation is exposed —
  later packets are prepared while earlier ones are on the wire — so the latency is
  ``t_s0 + t_s1·(min(m, V_max − V_0) + V_0)``, at most ``t_s0 + t_s1·V_max``.
"""

from __future__ import annotations

import math

from ..errors import ArgumentError

#: Ethernet's largest packet and the TCP/IP header bytes per packet on Fast Ethernet (seed 004)
ETHERNET_V_MAX = 1500
TCP_IP_V_0 = 78


def transfer_time(nbytes: float, hops: int, t_s: float, t_c: float, t_h: float = 0.0,
                  switching: str = "message") -> float:
    """Time of one message over ``hops`` links, message (store-and-forward) or packet switched."""
    if switching == "message":
        return t_s + (nbytes * t_c + t_h) * hops
    if switching == "packet":
        return t_s + (nbytes * t_c if hops else 0.0) + t_h * hops
    raise ArgumentError("transfer_time", "switching", switching, "'message' or 'packet'")


def packet_count(nbytes: int, v_max: int = ETHERNET_V_MAX, v_0: int = TCP_IP_V_0) -> int:
    """Packets of at most ``v_max`` bytes (``v_0`` of them header) a message needs (≥ 1)."""
    if not 0 <= v_0 < v_max:
        raise ArgumentError("packet_count", "v_0", v_0, f"must lie in 0..{v_max - 1}")
    return max(1, math.ceil(int(nbytes) / (v_max - v_0)))


def wire_bytes(nbytes: int, v_max: int = ETHERNET_V_MAX, v_0: int = TCP_IP_V_0) -> int:
    """Bytes on the wire: payload plus one header per packet, ``m + n·V_0``."""
    if v_0 == 0:
        return int(nbytes)
    return int(nbytes) + packet_count(nbytes, v_max, v_0) * v_0


def model_a(nbytes: float, t_s: float, t_c: float) -> float:
    """Cluster model A: ``t_s + m·t_c``."""
    return t_s + nbytes * t_c


def model_b(nbytes: int, t_s0: float, t_s1: float, t_c: float, v_max: int = ETHERNET_V_MAX,
            v_0: int = TCP_IP_V_0) -> float:
    """Cluster model B: first packet's preparation exposed, headers on the wire."""
    first_packet = min(int(nbytes), v_max - v_0) + v_0
    return t_s0 + t_s1 * first_packet + t_c * wire_bytes(nbytes, v_max, v_0)
