"""allgather and allgatherv: every rank's block ends in every rank's RECV area.

The spec is normalised to the v-form: rank j's block has ``counts[j]`` elements and lands at
``displs[j]`` of every RECV area; a rank's SEND area holds its own block. One builder serves
both collectives. Zero-count blocks produce no message (every rank knows every count).

``alltoallv`` embodies seed 000's first mechanism, *allgather as alltoallv*: each rank calls
alltoallv with send displacements that all point at its single segment (its own block) and
every send count equal to that block's count; receiving ``counts[j]`` at ``displs[j]`` from
every rank j is then exactly allgather. The schedule is built by the alltoallv
``random_chunked`` builder, so it inherits the random destination order, the chunked
round-robin transmission and the pruning (see `collops.algorithms.alltoall`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..schedule import RECV, SEND, Schedule, ScheduleBuilder
from .alltoall import (
    DEFAULT_CHUNK,
    RANDOM_CHUNKED_PARAMS,
    alltoall_random_chunked,
    chunk_elements,
)
from .patterns import bruck_offsets, ceil_log2, recursive_doubling_partners
from .registry import POWER_OF_TWO, CostModel, register
from .spec import CallSpec, builder_for

BOTH = ("allgather", "allgatherv")



def _block_bytes(spec: CallSpec) -> int:
    return max(spec.counts, default=0) * spec.itemsize


def _own_copy(b: ScheduleBuilder, rank: int, spec: CallSpec) -> list[int]:
    """Copy the caller's block into its place in RECV (no step when it is empty)."""
    n = spec.counts[rank]
    return [b.copy(RECV(spec.displs[rank], n), SEND(0, n))] if n else []


def contiguous_runs(spec: CallSpec, ranks: range) -> list[tuple[int, int]]:
    """The blocks of ``ranks`` in RECV as maximal contiguous runs ``(offset, count)``.

    Blocks are merged in rank order when each starts where the previous ended; empty
    blocks are left out. Every rank computes the same runs for the same ranks, so a sender
    and its receiver agree on the messages.
    """
    runs: list[tuple[int, int]] = []
    for j in ranks:
        n = spec.counts[j]
        if not n:
            continue
        d = spec.displs[j]
        if runs and runs[-1][0] + runs[-1][1] == d:
            runs[-1] = (runs[-1][0], runs[-1][1] + n)
        else:
            runs.append((d, n))
    return runs


# -- ring -----------------------------------------------------------------------------------
@register(
    BOTH, "ring", "p−1 rounds around a ring: forward the block received in the round before",
    cost=lambda s, m: m.message(_block_bytes(s), s.size - 1),
)
def allgather_ring(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """In round k send block rank−k to the right, receive block rank−k−1 from the left."""
    p = spec.size
    left, right = (rank - 1) % p, (rank + 1) % p
    b = builder_for(rank, spec)
    _own_copy(b, rank, spec)
    arrived: list[int] = []  # the receive of the previous round (none for an empty block)
    for k in range(p - 1):
        out, into = (rank - k) % p, (rank - k - 1) % p
        if spec.counts[out]:
            src = SEND(0, spec.counts[out]) if k == 0 else RECV(spec.displs[out], spec.counts[out])
            b.send(right, src, arrived)
        arrived = []
        if spec.counts[into]:
            arrived = [b.recv(left, RECV(spec.displs[into], spec.counts[into]))]
    return b.build()


# -- bruck ----------------------------------------------------------------------------------
def _bruck_cost(spec: CallSpec, m: CostModel) -> float:
    """The rounds, plus the copies into TMP and the final rotation out of it (p blocks each)."""
    block = _block_bytes(spec)
    return (ceil_log2(spec.size) * m.alpha + (spec.size - 1) * block * m.beta
            + 2 * spec.size * block * m.beta)


@register(
    BOTH, "bruck",
    "Bruck: ⌈log2 p⌉ rounds at distances 1, 2, 4, … in TMP, then a local rotation (any p)",
    cost=_bruck_cost,
)
def allgather_bruck(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """TMP position j holds rank+j's block; round d sends positions [0, d) to rank−d."""
    p = spec.size
    sizes = [spec.counts[(rank + j) % p] for j in range(p)]
    starts = np.r_[0, np.cumsum(sizes, dtype=np.int64)].tolist()
    b = builder_for(rank, spec)
    work = b.tmp(starts[-1])
    own = sizes[0]
    filled: list[int] = [b.copy(work.sub(0, own), SEND(0, own))] if own else []
    written_by: list[list[int]] = [list(filled)] + [[] for _ in range(p - 1)]
    for d in bruck_offsets(p):
        moved = min(d, p - d)
        size = starts[moved]
        if size:  # positions [0, moved) go to rank − d; ours get [d, d + moved) from rank + d
            b.send((rank - d) % p, work.sub(0, size), filled)
        got = starts[d + moved] - starts[d]
        if got:
            step = b.recv((rank + d) % p, work.sub(starts[d], got))
            for j in range(d, d + moved):
                written_by[j] = [step]
            filled = filled + [step]
    for j in range(p):  # rotate: position j is rank + j's block
        owner = (rank + j) % p
        if sizes[j]:
            source = SEND(0, own) if j == 0 else work.sub(starts[j], sizes[j])
            b.copy(RECV(spec.displs[owner], sizes[j]), source, [] if j == 0 else written_by[j])
    return b.build()


# -- recursive doubling ---------------------------------------------------------------------
@register(
    BOTH, "recursive_doubling",
    "log2 p rounds exchanging doubling groups of blocks with rank XOR 2^k (2^n ranks)",
    restrictions=[POWER_OF_TWO],
    cost=lambda s, m: ceil_log2(s.size) * m.alpha + (s.size - 1) * _block_bytes(s) * m.beta,
)
def allgather_recursive_doubling(
    rank: int, spec: CallSpec, params: Mapping[str, Any]
) -> Schedule:
    """Round k: swap the blocks of my aligned group of 2^k ranks with the partner's group."""
    b = builder_for(rank, spec)
    held = _own_copy(b, rank, spec)
    for k, partner in enumerate(recursive_doubling_partners(rank, spec.size)):
        width = 1 << k
        mine = range(rank & ~(width - 1), (rank & ~(width - 1)) + width)
        theirs = range(partner & ~(width - 1), (partner & ~(width - 1)) + width)
        for offset, count in contiguous_runs(spec, mine):
            b.send(partner, RECV(offset, count), held)
        received = [b.recv(partner, RECV(offset, count))
                    for offset, count in contiguous_runs(spec, theirs)]
        held = held + received
    return b.build()


# -- allgather as alltoallv (seed 000) ------------------------------------------------------
def as_alltoallv(rank: int, spec: CallSpec) -> CallSpec:
    """The alltoallv call equivalent to ``spec`` on ``rank``: every send reads its one block."""
    p, own = spec.size, spec.counts[rank]
    return spec.with_(
        collective="alltoallv", count=0, counts=(), displs=(), sendcounts=(own,) * p,
        sdispls=(0,) * p, recvcounts=spec.counts, rdispls=spec.displs)


def _alltoallv_cost(spec: CallSpec, m: CostModel) -> float:
    per_chunk = chunk_elements(spec, DEFAULT_CHUNK)
    chunks = -(-max(spec.counts, default=0) // per_chunk)
    return (spec.size - 1) * (chunks * m.alpha + _block_bytes(spec) * m.beta)


@register(
    BOTH, "alltoallv",
    "Seed 000: an alltoallv whose send displacements all point at the caller's block",
    params=RANDOM_CHUNKED_PARAMS,
    cost=_alltoallv_cost,
)
def allgather_alltoallv(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """The alltoallv ``random_chunked`` schedule of `as_alltoallv` (own block: a local copy)."""
    return alltoall_random_chunked(rank, as_alltoallv(rank, spec), params)
