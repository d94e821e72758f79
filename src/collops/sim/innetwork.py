"""In-network reduction: reductions combined by the switches of a combining tree.

On a topology with ``in_network_reduction`` (``combining-tree:K:N``, the seeds' collective
network) a reduction *may* be combined by the switches instead of running as point-to-point
messages: for an algorithm whose metadata asks for it (``gather.or_combine``), or a reduce or
allreduce simulated with ``in_network=True`` (``collops sim --in-network``); a named host
algorithm otherwise runs its own schedule (`collops.sim.api`). Every rank's node injects
its contribution at once; each switch combines the packets arriving from its children in its
ALU and forwards one packet upward, so **every link carries the data once**:

* the *up-sweep* uses the union of the routes from the ranks' nodes to the root rank's node:
  contributions are combined wherever routes merge (at the latest at the lowest switch above
  all ranks) and the result descends the last part of the root's route;
* ``allreduce`` adds the *down-sweep*: the union of the routes from the root's node back to
  every rank's node, switches replicating the result as they forward it;
* gather by bitwise OR (seed 002, an algorithm declaring ``resources={"in_network_reduction"}``)
  is a reduce of the whole result buffer — p contributions of m bytes, i.e. p·m bytes, zero
  everywhere but at the contributing rank's position.

Packets are pipelined through the sweeps, so the time is one per-message overhead, the wire
bytes at link speed once, plus a pipeline fill of one packet and
one hop latency per level (H = the longest route to the root's node; the down-sweep
pipelines behind the up-sweep):

    α + wire(B)/bandwidth + H·hop_latency + (H − 1)·packet/bandwidth.

Both the congestion and the packet model use this formula (there is no contention: each link
carries one stream).
"""

from __future__ import annotations

import numpy as np

from .congestion import CongestionOutcome, RoundStats, wire_bytes

IN_NETWORK_RESOURCE = "in_network_reduction"
SWEEPING = frozenset({"reduce", "allreduce"})


def _union(topology: object, src: np.ndarray, dst: np.ndarray,
           excluded: frozenset[int]) -> tuple[np.ndarray, int]:
    keep = src != dst
    if not keep.any():
        return np.zeros(0, dtype=np.int64), 0
    offsets, links = topology.routes(src[keep], dst[keep], excluded)  # type: ignore[attr-defined]
    return np.unique(links).astype(np.int64), int(np.diff(offsets).max())


def in_network_reduction(
    topology: object,
    placement: np.ndarray,
    collective: str,
    nbytes: int,
    root_rank: int = 0,
    excluded: frozenset[int] = frozenset(),
) -> CongestionOutcome:
    """Time and link loads of an up-sweep (+ down-sweep) reduction of ``nbytes``."""
    params = topology.params  # type: ignore[attr-defined]
    nodes = np.asarray(placement, dtype=np.int64)
    root_node = int(nodes[root_rank]) if len(nodes) else 0
    toward = np.full(len(nodes), root_node)
    up, levels = _union(topology, nodes, toward, excluded)
    down, _ = (_union(topology, toward, nodes, excluded) if collective == "allreduce"
               else (np.zeros(0, dtype=np.int64), 0))
    used = np.union1d(up, down)
    wire = float(wire_bytes(np.array([nbytes]), params.packet_size, params.header_bytes)[0])
    packet = min(wire, float(params.packet_size))
    time = (params.overhead + wire * params.byte_time + levels * params.hop_latency
            + max(0, levels - 1) * packet * params.byte_time)
    loads = np.zeros(int(topology.num_links), dtype=np.float64)  # type: ignore[attr-defined]
    loads[used] = wire
    rounds = RoundStats(
        phase=np.array([0]), slot=np.zeros(1, dtype=np.int64), messages=np.array([len(nodes)]),
        hot_link=np.array([int(used[0]) if len(used) else -1]),
        hot_load_bytes=np.array([wire if len(used) else 0.0]), time_s=np.array([time]))
    return CongestionOutcome(float(time), loads, rounds)
