"""alltoall and alltoallv: every rank sends a personal segment to every rank.

Both collectives share their builders: a call spec is normalised to the v-form, so a rank
sees ``sendcounts``/``sdispls`` (its outgoing segments, in its SEND area) and
``recvcounts``/``rdispls`` (its incoming segments, in its RECV area). A rank's own segment
is always a local copy. Zero-count segments produce no message on either side (both sides
know the count), so they cost nothing.

``random_chunked`` embodies seed 000 (mechanisms 2–4):

* **Random order.** Sent in rank order, every rank first addresses rank 0, then rank 1, …:
  each phase has one hot spot receiving p − 1 messages at once, and on a tree network the
  links next to the root saturate. Each rank instead shuffles its destination list with a
  generator seeded from ``(seed, rank)``, so a phase's traffic is spread over the whole
  network, different on every rank, and reproducible for a given seed.
* **Chunked round-robin.** Every segment has a cursor (how far it has been sent). The sender
  cycles over its segments in the shuffled order and, per visit, sends one chunk of at most
  ``chunk`` bytes from the cursor. A long segment then never occupies a path for long, and
  all destinations progress together. Larger chunks waste less per-message overhead but
  congest more; the best size is found by measurement, hence the parameter.
* **Pruning.** A segment whose cursor reached its end leaves the cycle, so the later cycles
  only visit segments with data left (alltoallv segments differ in size).

A rank's messages leave in the order its schedule issues them, so the sends are chained,
each depending on the one before; the receives, whose chunking the receiver derives from
``recvcounts`` and the same chunk size, are all posted upfront. The builder is vectorised
(the visit sequence is computed as arrays) because the simulator builds it for thousands of
ranks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..schedule import RECV, SEND, Buffer, Region, Schedule, ScheduleBuilder, StepKind
from .patterns import bruck_offsets, ceil_log2, is_power_of_two
from .registry import CostModel, Param, Restriction, register
from .spec import CallSpec, builder_for

BOTH = ("alltoall", "alltoallv")
DEFAULT_CHUNK = 1024

EQUAL_BLOCKS = Restriction(
    "equal_counts", "every rank sends and receives the same count to and from every rank",
    lambda s: len(set(s.sendcounts) | set(s.recvcounts)) <= 1)


# -- shared pieces --------------------------------------------------------------------------

def _self_copy(b: ScheduleBuilder, rank: int, spec: CallSpec) -> None:
    n = spec.sendcounts[rank]
    if n:
        b.copy(RECV(spec.rdispls[rank], spec.recvcounts[rank]), SEND(spec.sdispls[rank], n))


def _outgoing(spec: CallSpec, peer: int) -> Region:
    return SEND(spec.sdispls[peer], spec.sendcounts[peer])


def _incoming(spec: CallSpec, peer: int) -> Region:
    return RECV(spec.rdispls[peer], spec.recvcounts[peer])


def _block_bytes(spec: CallSpec) -> int:
    return max(spec.sendcounts, default=0) * spec.itemsize


def _exchange_cost(spec: CallSpec, m: CostModel) -> float:
    return m.message(_block_bytes(spec), spec.size - 1)


# -- linear ---------------------------------------------------------------------------------
#: destination orders of ``linear``: shift r+1, r+2, …; plain 0, 1, 2, …; random per rank
LINEAR_ORDERS = ("shift", "plain", "random")


def linear_destinations(rank: int, size: int, order: str | bool = "shift",
                        seed: int = 0) -> list[int]:
    """The other ranks in ``linear``'s send order: ``shift`` rank+1, rank+2, … (mod size),
    ``plain`` 0, 1, 2, … (True means plain too), ``random`` a per-rank permutation from
    ``(seed, rank)``."""
    order = "plain" if order is True else "shift" if order is False else order
    if order == "plain":
        return [d for d in range(size) if d != rank]
    if order == "random":
        return [int(d) for d in destination_order(rank, size, seed)]
    if order == "shift":
        return [(rank + k) % size for k in range(1, size)]
    raise ArgumentError("alltoall.linear", "order", order, f"one of {', '.join(LINEAR_ORDERS)}",
                        rank)


def linear_order(params: Mapping[str, Any], rank: int | None = None) -> str:
    """The order ``linear``'s parameters ask for (``rank_order=1`` is ``order=plain``)."""
    order = str(params.get("order", "shift"))
    if order not in LINEAR_ORDERS:
        raise ArgumentError("alltoall.linear", "order", order,
                            f"one of {', '.join(LINEAR_ORDERS)}", rank)
    if int(params.get("rank_order", 0)):
        if order not in ("shift", "plain"):
            raise ArgumentError("alltoall.linear", "rank_order", params["rank_order"],
                                f"rank_order=1 is order=plain, not order={order}", rank)
        return "plain"
    return order


@register(
    BOTH, "linear", "Post every receive and send at once (optionally at most W sends in flight)",
    params=[Param("throttle", 0, "most sends in flight at once (0: unlimited); the simulators "
                  "take it as their window", minimum=0),
            Param("order", "shift", "send order: shift (rank+1, rank+2, …), plain (0, 1, 2, …, "
                  "seed 000's hot spot) or random (a per-rank permutation from seed)"),
            Param("seed", 0, "seed of order=random", minimum=0),
            Param("rank_order", 0, "1: the same as order=plain", minimum=0)],
    cost=_exchange_cost,
)
def alltoall_linear(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """All receives posted upfront; sends issued in the chosen order; with ``throttle`` W
    send i waits for send i−W."""
    p, throttle = spec.size, int(params["throttle"])
    order = linear_order(params, rank)
    b = builder_for(rank, spec)
    _self_copy(b, rank, spec)
    for k in range(1, p):
        src = (rank - k) % p
        if spec.recvcounts[src]:
            b.recv(src, _incoming(spec, src))
    sends: list[int] = []
    for dst in linear_destinations(rank, p, order, int(params.get("seed", 0))):
        if spec.sendcounts[dst]:
            after = [sends[-throttle]] if throttle and len(sends) >= throttle else []
            sends.append(b.send(dst, _outgoing(spec, dst), after))
    return b.build()


# -- pairwise -------------------------------------------------------------------------------
def pairwise_partners(rank: int, size: int, k: int) -> tuple[int, int]:
    """(send-to, receive-from) in round ``k`` (1 ≤ k < size) of the pairwise exchange."""
    if is_power_of_two(size):
        partner = rank ^ k
        return partner, partner
    return (rank + k) % size, (rank - k) % size


@register(
    BOTH, "pairwise", "p−1 rounds; in round k exchange with rank±k (rank XOR k for 2^n ranks)",
    cost=_exchange_cost,
)
def alltoall_pairwise(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """One exchange per round, each round waiting for the previous one."""
    p = spec.size
    b = builder_for(rank, spec)
    _self_copy(b, rank, spec)
    for k in range(1, p):
        dst, src = pairwise_partners(rank, p, k)
        with b.round():
            if spec.recvcounts[src]:
                b.recv(src, _incoming(spec, src))
            if spec.sendcounts[dst]:
                b.send(dst, _outgoing(spec, dst))
    return b.build()


# -- bruck ----------------------------------------------------------------------------------
def _bruck_cost(spec: CallSpec, m: CostModel) -> float:
    rounds = ceil_log2(spec.size)
    return m.message(_block_bytes(spec) * ((spec.size + 1) // 2), rounds)


def _bit_runs(size: int, distance: int) -> list[tuple[int, int]]:
    """Runs ``(first, length)`` of the block positions j < size with ``j & distance`` set."""
    runs = []
    for first in range(distance, size, 2 * distance):
        runs.append((first, min(distance, size - first)))
    return runs


@register(
    "alltoall", "bruck",
    "Bruck: ⌈log2 p⌉ rounds moving half the blocks, with local rotations through TMP",
    restrictions=[EQUAL_BLOCKS], cost=_bruck_cost,
)
def alltoall_bruck(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Rotate blocks by rank, exchange blocks whose index has bit k at distance 2^k, unrotate."""
    p = spec.size
    n = spec.sendcounts[0] if spec.sendcounts else 0
    b = builder_for(rank, spec)
    if n == 0:
        return b.build()
    work = b.tmp(p * n)  # position j holds a block, initially the one for rank + j
    with b.round():
        for j in range(p):
            b.copy(work.sub(j * n, n), _outgoing(spec, (rank + j) % p))
    most = max((sum(c for _, c in _bit_runs(p, d)) for d in bruck_offsets(p)), default=0)
    outbox, inbox = b.tmp(most * n), b.tmp(most * n)
    for d in bruck_offsets(p):
        runs = _bit_runs(p, d)
        moved = sum(c for _, c in runs) * n
        with b.round():  # pack the blocks whose position has bit d set
            at = 0
            for first, length in runs:
                b.copy(outbox.sub(at, length * n), work.sub(first * n, length * n))
                at += length * n
        with b.round():
            b.send((rank + d) % p, outbox.sub(0, moved))
            b.recv((rank - d) % p, inbox.sub(0, moved))
        with b.round():  # unpack into the same positions
            at = 0
            for first, length in runs:
                b.copy(work.sub(first * n, length * n), inbox.sub(at, length * n))
                at += length * n
    with b.round():  # position j now holds the block from rank − j
        for j in range(p):
            b.copy(_incoming(spec, (rank - j) % p), work.sub(j * n, n))
    return b.build()


# -- random_chunked (seed 000) --------------------------------------------------------------
def destination_order(rank: int, size: int, seed: int) -> np.ndarray:
    """The other ranks in the random order ``rank`` visits them, reproducible from ``seed``."""
    others = np.r_[np.arange(rank), np.arange(rank + 1, size)]
    return np.random.default_rng((int(seed), int(rank))).permutation(others)


def chunk_elements(spec: CallSpec, chunk_bytes: int) -> int:
    """Elements per chunk: as many whole elements as fit in ``chunk_bytes`` (at least one)."""
    return max(1, int(chunk_bytes) // spec.itemsize)


def segment_chunks(
    lengths: np.ndarray, per_chunk: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every chunk of every segment, segment by segment: (segment, cursor, count) arrays."""
    lengths = np.asarray(lengths, dtype=np.int64)
    chunks = -(-lengths // per_chunk)
    starts = np.cumsum(chunks) - chunks
    segment = np.repeat(np.arange(len(lengths)), chunks)
    cursor = (np.arange(int(chunks.sum())) - np.repeat(starts, chunks)) * per_chunk
    return segment, cursor, np.minimum(per_chunk, lengths[segment] - cursor)


def round_robin_visits(
    lengths: np.ndarray, per_chunk: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Visit sequence over segments of ``lengths`` elements, cycling with pruning.

    Returns, per visit, the segment index, the cursor (element offset within the segment)
    and the number of elements sent. Cycle t visits, in segment order, every segment that
    still has a t-th chunk; an exhausted segment is never visited again.
    """
    segment, cursor, count = segment_chunks(lengths, per_chunk)
    by_cycle = np.argsort(cursor, kind="stable")  # the cursor is the cycle times the chunk
    return segment[by_cycle], cursor[by_cycle], count[by_cycle]


def _random_chunked_cost(spec: CallSpec, m: CostModel) -> float:
    per_chunk = chunk_elements(spec, DEFAULT_CHUNK)
    counts = np.asarray(spec.sendcounts, dtype=np.int64)
    messages = int((-(-counts // per_chunk)).sum())
    return messages * m.alpha + int(counts.sum()) * spec.itemsize * m.beta


#: the parameters of ``random_chunked`` (and of the allgather built on it)
RANDOM_CHUNKED_PARAMS = (
    Param("seed", 0, "seed of the per-rank destination shuffle", minimum=0),
    Param("chunk", DEFAULT_CHUNK, "bytes sent per visit of a segment", minimum=1),
)


@register(
    BOTH, "random_chunked",
    "Seed 000: destinations in per-rank random order, sent round-robin in pruned chunks",
    params=RANDOM_CHUNKED_PARAMS,
    cost=_random_chunked_cost,
)
def alltoall_random_chunked(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Chained chunk sends in shuffled round-robin order; every chunk receive posted upfront."""
    p = spec.size
    per_chunk = chunk_elements(spec, int(params["chunk"]))
    sendcounts = np.asarray(spec.sendcounts, dtype=np.int64)
    sdispls = np.asarray(spec.sdispls, dtype=np.int64)
    recvcounts = np.asarray(spec.recvcounts, dtype=np.int64)
    rdispls = np.asarray(spec.rdispls, dtype=np.int64)

    own = int(sendcounts[rank]) if p else 0
    n_copy = 1 if own else 0

    order = destination_order(rank, p, int(params["seed"]))
    segment, cursor, s_count = round_robin_visits(sendcounts[order], per_chunk)
    s_peer = order[segment]
    s_off = sdispls[s_peer] + cursor

    sources = np.r_[np.arange(rank), np.arange(rank + 1, p)]
    r_seg, r_cursor, r_count = segment_chunks(recvcounts[sources], per_chunk)
    r_peer = sources[r_seg]
    r_off = rdispls[r_peer] + r_cursor

    n_send, n_recv = len(s_peer), len(r_peer)
    kind = np.r_[np.full(n_copy, StepKind.COPY), np.full(n_send, StepKind.SEND),
                 np.full(n_recv, StepKind.RECV)]
    columns = {
        "kind": kind,
        "peer": np.r_[np.full(n_copy, -1), s_peer, r_peer],
        "src_buf": np.r_[np.full(n_copy + n_send, Buffer.SEND), np.zeros(n_recv)],
        "src_off": np.r_[sdispls[rank:rank + 1][:n_copy], s_off, np.zeros(n_recv)],
        "dst_buf": np.r_[np.full(n_copy, Buffer.RECV), np.zeros(n_send),
                         np.full(n_recv, Buffer.RECV)],
        "dst_off": np.r_[rdispls[rank:rank + 1][:n_copy], np.zeros(n_send), r_off],
        "count": np.r_[sendcounts[rank:rank + 1][:n_copy], s_count, r_count],
    }
    chain_from = np.arange(n_copy, n_copy + n_send - 1)
    buffers = (_extent(sdispls, sendcounts), _extent(rdispls, recvcounts), 0)
    return Schedule.from_columns(rank, p, buffers, columns, (chain_from, chain_from + 1))


def _extent(displs: np.ndarray, counts: np.ndarray) -> int:
    """`spec.extent` for arrays (the spec's pure-Python one is slow at thousands of ranks)."""
    used = counts > 0
    return int((displs[used] + counts[used]).max()) if used.any() else 0
