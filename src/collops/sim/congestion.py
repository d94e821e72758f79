"""The congestion model: phases of concurrent messages, each as slow as its busiest link.

The model is flow-level and vectorised. Messages (from `collops.sim.program`) are grouped
into *rounds*:

1. **Phase** — a message's depth in the cross-rank dependency graph. Messages of one phase
   do not wait for one another.
2. **Injection slot** — within a phase, a rank's messages leave its node in the order its
   schedule issues them, ``injection_links`` at a time: the i-th message of a rank in a
   phase goes in slot ``i // injection_links`` (``ordering="issue"``, the default). This is
   the "flow sharing" for schedules that are not round-based (a rank posting all its sends
   at once) and it is what makes destination order matter: in rank order every rank
   addresses rank 0 in slot 0, rank 1 in slot 1, …, so each slot has one hot destination.
   With ``ordering="phase"`` a whole phase is one round and a rank's messages only add up
   on its injection links.

A round's messages share the links: every link's load is the sum of the wire bytes (payload
plus one header per packet) of the messages routed over it. The round takes

    max_link(load) / bandwidth  ⊔  max_rank(bytes injected) / (injection_links · bandwidth)
    + max_rank(messages in the round) · overhead + max_route(hops) · hop_latency

(⊔ = the larger of the two). On a topology whose links differ (``uniform_links`` false: a
machine hierarchy, whose links carry their level's bandwidth and latency, and whose ranks
inject through links of their own) every link is timed at its own bandwidth and every route
pays the sum of its links' latencies:

    max_link(load / link_bandwidth) + max_rank(messages in the round) · overhead
    + max_route(Σ link_latency along the route)

Rounds run one after another; local copy and reduce steps add
``bytes · gamma`` for the busiest rank of their level. Without contention this is the α-β
cost of the schedule, which is why ring allgather on ``ring:P`` gives (p−1)(α + mβ).

``window`` W replaces ``injection_links`` as the slot width (a rank's i-th message of a phase
goes in slot i // W); window 0 puts a whole phase in one round.

**What it is exact for, and what not.** Rounds run in lockstep: every rank's slot k starts
when the slowest message of slot k−1 anywhere has finished. That is exact for schedules made
of send-receive rounds (ring, recursive doubling, pairwise: nobody can start round k+1 before
its partner finished round k) and for everything posted at once (window 0: one round, as
long as its busiest link needs). It is *not* a model of free-running windowed sends, where a
rank issues its next send as soon as its own previous one has arrived and bandwidth is
re-shared as flows start and end: there it makes every slot pay the worst link of the slot,
which penalises orders that scatter traffic (random order) — use the flow model
(`collops.sim.flow`).

Rounds are evaluated in batches: one ``routes`` call per batch of about a million messages,
then one ``bincount`` over (round, link) gives every round's link loads at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from .program import Program

#: messages routed per batch (bounds memory: about 100 MB of temporaries on a 3-D torus)
BATCH_MESSAGES = 1 << 20
#: most (round × link) bins per batch
BATCH_BINS = 1 << 25


@dataclass(frozen=True, eq=False)
class RoundStats:
    """Per round (phase, injection slot): its hottest link, that link's load and its time.
    The flow and packet models' rows are time windows (`collops.sim.timeline`), which also
    give every link's mean load in the window (``mean_load_bytes``)."""

    phase: np.ndarray
    slot: np.ndarray
    messages: np.ndarray
    hot_link: np.ndarray
    hot_load_bytes: np.ndarray
    time_s: np.ndarray
    mean_load_bytes: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.phase)

    def per_phase(self) -> RoundStats:
        """One row per phase: the hottest link over its slots, summed time and messages."""
        if len(self.phase) == 0:
            return self
        starts = np.r_[0, np.flatnonzero(np.diff(self.phase)) + 1]
        hottest = np.array([s + int(np.argmax(self.hot_load_bytes[s:e]))
                            for s, e in zip(starts, np.r_[starts[1:], len(self.phase)],
                                            strict=True)], dtype=np.int64)
        return RoundStats(
            phase=self.phase[starts], slot=np.zeros(len(starts), dtype=np.int64),
            messages=np.add.reduceat(self.messages, starts),
            hot_link=self.hot_link[hottest], hot_load_bytes=self.hot_load_bytes[hottest],
            time_s=np.add.reduceat(self.time_s, starts))

    def top(self, n: int = 5) -> list[dict[str, float | int]]:
        """The ``n`` rounds with the most loaded hot links, as dicts."""
        order = np.argsort(-self.hot_load_bytes, kind="stable")[:n]
        return [{"phase": int(self.phase[i]), "slot": int(self.slot[i]),
                 "messages": int(self.messages[i]), "link": int(self.hot_link[i]),
                 "load_bytes": float(self.hot_load_bytes[i]), "time_s": float(self.time_s[i])}
                for i in order]


@dataclass(frozen=True, eq=False)
class CongestionOutcome:
    """What the congestion model predicts for one program."""

    time_s: float
    link_loads: np.ndarray
    rounds: RoundStats


def wire_bytes(nbytes: np.ndarray, packet_size: int, header_bytes: int) -> np.ndarray:
    """Bytes on the wire: payload plus one header per packet (at least one packet)."""
    nbytes = np.asarray(nbytes, dtype=np.int64)
    if header_bytes == 0:
        return nbytes.astype(np.float64)
    payload = packet_size - header_bytes
    packets = np.maximum(1, -(-nbytes // payload))
    return (nbytes + packets * header_bytes).astype(np.float64)


def assign_rounds(program: Program, injection_links: int,
                  ordering: str = "issue") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Messages in round order: (permutation, round id per sorted message, slot per round)."""
    n = program.num_messages
    phase, order, src = program.msg_phase, program.msg_order, program.msg_src
    if n == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    width = int(order.max()) + 1
    if (int(phase.max()) + 1) * width < (1 << 62):
        key = phase * width + order
        perm = (np.arange(n, dtype=np.int64) if bool(np.all(key[1:] >= key[:-1]))
                else np.argsort(key, kind="stable"))
    else:
        perm = np.lexsort((order, phase))
    ph, s = phase[perm], src[perm]
    if ordering == "phase":
        slot = np.zeros(n, dtype=np.int64)
    elif ordering == "issue":
        new_group = np.r_[True, (ph[1:] != ph[:-1]) | (s[1:] != s[:-1])]
        starts = np.flatnonzero(new_group)
        position = np.arange(n, dtype=np.int64) - np.repeat(starts, np.diff(np.r_[starts, n]))
        slot = position // max(1, int(injection_links))
    else:
        raise ValueError(f"ordering must be 'issue' or 'phase', not {ordering!r}")
    slot_width = int(slot.max()) + 1
    round_key = ph * slot_width + slot
    if not bool(np.all(round_key[1:] >= round_key[:-1])):
        regroup = np.argsort(round_key, kind="stable")
        perm, round_key = perm[regroup], round_key[regroup]
    boundaries = np.r_[True, round_key[1:] != round_key[:-1]]
    round_id = np.cumsum(boundaries) - 1
    round_slot = (round_key[boundaries] % slot_width).astype(np.int64)
    return perm, round_id, round_slot


def congestion_model(
    program: Program,
    topology: object,
    placement: np.ndarray,
    *,
    excluded: Iterable[int] = frozenset(),
    gamma: float = 0.0,
    ordering: str = "issue",
    window: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> CongestionOutcome:
    """Predict time, link loads and per-round hot spots of ``program`` on ``topology``.

    ``window`` sets how many of a rank's messages share an injection slot (None: the node's
    ``injection_links``; 0: a whole phase is one round, like ``ordering="phase"``).
    """
    params = topology.params  # type: ignore[attr-defined]
    inj = max(1, int(topology.injection_links))  # type: ignore[attr-defined]
    num_links = int(topology.num_links)  # type: ignore[attr-defined]
    excluded = frozenset(int(x) for x in excluded)
    if window == 0:
        ordering = "phase"
    perm, round_id, round_slot = assign_rounds(program, window or inj, ordering)
    n = len(perm)
    nrounds = int(round_id[-1]) + 1 if n else 0
    placement = np.asarray(placement, dtype=np.int64)
    src = program.msg_src[perm]
    dst = program.msg_dst[perm]
    wire = wire_bytes(program.msg_bytes[perm], params.packet_size, params.header_bytes)
    phase_of_round = np.zeros(nrounds, dtype=np.int64)
    if n:
        phase_of_round[round_id] = program.msg_phase[perm]

    # a topology whose links differ (a machine hierarchy, links by level) gives every link
    # its own bandwidth and latency; on the others every link has `params`' values
    per_link = not getattr(topology, "uniform_links", True)
    link_byte_time = np.zeros(0)
    latency_of_link = np.zeros(0)
    if per_link:
        link_byte_time = 1.0 / np.asarray(topology.link_bandwidth,  # type: ignore[attr-defined]
                                          dtype=np.float64)
        latency_of_link = np.asarray(topology.link_latency,  # type: ignore[attr-defined]
                                     dtype=np.float64)
    hot_time = np.zeros(nrounds, dtype=np.float64)
    max_latency = np.zeros(nrounds, dtype=np.float64)
    loads = np.zeros(num_links, dtype=np.float64)
    hot_link = np.zeros(nrounds, dtype=np.int64)
    hot_load = np.zeros(nrounds, dtype=np.float64)
    max_hops = np.zeros(nrounds, dtype=np.int64)
    round_start = np.r_[0, np.flatnonzero(np.diff(round_id)) + 1] if n else np.zeros(0, np.int64)
    round_len = np.diff(np.r_[round_start, n])
    per_rank_msgs, per_rank_bytes = _per_rank_peaks(round_id, src, wire, nrounds)

    first = 0
    while first < nrounds:
        last = _batch_end(round_start, round_len, first, num_links)
        lo, hi = int(round_start[first]), int(round_start[last - 1] + round_len[last - 1])
        rows = np.arange(last - first)
        starts = round_start[first:last] - lo
        pair = placement[src[lo:hi]], placement[dst[lo:hi]]
        if per_link:
            offsets, links = topology.routes(*pair, excluded)  # type: ignore[attr-defined]
            hops = np.diff(offsets)
            bins = np.repeat(round_id[lo:hi] - first, hops) * num_links + links
            batch = np.bincount(bins, weights=np.repeat(wire[lo:hi], hops),
                                minlength=(last - first) * num_links
                                ).reshape(last - first, num_links)
        else:  # loads without materialising routes where the topology can (grids)
            batch, hops = topology.grouped_link_loads(  # type: ignore[attr-defined]
                *pair, wire[lo:hi], round_id[lo:hi] - first, last - first, excluded)
        loads += batch.sum(axis=0)
        if per_link:
            times = batch * link_byte_time
            hot_link[first:last] = np.argmax(times, axis=1)
            hot_time[first:last] = times[rows, hot_link[first:last]]
            along = np.r_[0.0, np.cumsum(latency_of_link[links])]
            route_latency = along[offsets[1:]] - along[offsets[:-1]]
            max_latency[first:last] = (np.maximum.reduceat(route_latency, starts)
                                       if len(route_latency) else 0.0)
        else:
            hot_link[first:last] = np.argmax(batch, axis=1)
        hot_load[first:last] = batch[rows, hot_link[first:last]]
        max_hops[first:last] = np.maximum.reduceat(hops, starts) if len(hops) else 0
        if progress is not None:
            progress(hi, n)
        first = last

    beta = params.byte_time
    if per_link:  # a rank's own links are links of the topology, each at its own bandwidth
        round_time = hot_time + per_rank_msgs * params.overhead + max_latency
    else:
        transfer = np.maximum(hot_load * beta, per_rank_bytes * beta / inj)
        round_time = transfer + per_rank_msgs * params.overhead + max_hops * params.hop_latency
    compute = _local_time(program, gamma)
    rounds = RoundStats(phase=phase_of_round, slot=round_slot, messages=round_len,
                        hot_link=hot_link, hot_load_bytes=hot_load, time_s=round_time)
    return CongestionOutcome(float(round_time.sum() + compute), loads, rounds)


def _batch_end(round_start: np.ndarray, round_len: np.ndarray, first: int,
               num_links: int) -> int:
    """One past the last round of the batch starting at round ``first``."""
    nrounds = len(round_start)
    by_bins = max(1, BATCH_BINS // max(1, num_links))
    end_msgs = np.searchsorted(round_start, round_start[first] + BATCH_MESSAGES, side="left")
    return int(min(nrounds, first + by_bins, max(first + 1, end_msgs)))


def _per_rank_peaks(round_id: np.ndarray, src: np.ndarray, wire: np.ndarray,
                    nrounds: int) -> tuple[np.ndarray, np.ndarray]:
    """Per round: most messages and most wire bytes any single rank injects in it."""
    if len(src) == 0:
        return np.zeros(nrounds), np.zeros(nrounds)
    # within a round, messages are sorted by source rank (rounds are stable sub-sorts)
    run_start = np.r_[True, (round_id[1:] != round_id[:-1]) | (src[1:] != src[:-1])]
    starts = np.flatnonzero(run_start)
    counts = np.diff(np.r_[starts, len(src)]).astype(np.float64)
    sums = np.add.reduceat(wire, starts)
    run_round = round_id[starts]
    most_msgs = np.zeros(nrounds)
    most_bytes = np.zeros(nrounds)
    np.maximum.at(most_msgs, run_round, counts)
    np.maximum.at(most_bytes, run_round, sums)
    return most_msgs, most_bytes


def _local_time(program: Program, gamma: float) -> float:
    """Copy/reduce time: per level, the busiest rank's bytes × gamma, summed over levels."""
    if gamma <= 0 or len(program.local_rank) == 0:
        return 0.0
    key = program.local_level * program.nranks + program.local_rank
    uniq, inverse = np.unique(key, return_inverse=True)
    per = np.bincount(inverse, weights=program.local_bytes.astype(np.float64))
    levels = uniq // program.nranks
    level_ids, level_inv = np.unique(levels, return_inverse=True)
    busiest = np.zeros(len(level_ids))
    np.maximum.at(busiest, level_inv, per)
    return float(busiest.sum() * gamma)
