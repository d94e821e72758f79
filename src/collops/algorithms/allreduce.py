"""allreduce: ``x0 ∘ x1 ∘ … ∘ x(p−1)`` of every SEND area ends in every RECV area.

Recursive doubling and Rabenseifner fold the extra ranks of a non-power-of-two size onto
their odd neighbours (`collops.algorithms.reduce_scatter.Fold`) and exchange with partners
at growing distances, so every partial result is a contiguous run of ranks and the lower run
goes on the left: both give MPI's rank-order result for non-commutative operators. The ring
needs a commutative operator (a block's partial result wraps from rank p−1 to rank 0).
``reduce_bcast`` composes the binomial reduce to rank 0 with the binomial broadcast from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..schedule import RECV, SEND, Buffer, Region, Schedule, ScheduleBuilder
from .bcast import bcast_binomial
from .patterns import ceil_log2
from .reduce import reduce_binomial
from .reduce_scatter import (
    Fold,
    bit_reverse,
    compact,
    fold_in,
    halve,
    halving_range,
    ring_columns,
    split,
)
from .registry import COMMUTATIVE, CostModel, register
from .spec import CallSpec, builder_for, prefix


def _fold_cost(spec: CallSpec, m: CostModel) -> float:
    """Folding the extra ranks in and the result back out: two messages and one combine."""
    nbytes = spec.vector_bytes()
    return 2 * m.message(nbytes) + nbytes * m.gamma if Fold.of(spec.size).rem else 0.0


Exchanges = Callable[[ScheduleBuilder, Fold, int, int, Region, list[int]], list[int]]


def _folded(rank: int, spec: CallSpec, exchanges: Exchanges) -> Schedule:
    """The frame of an allreduce over the largest power of two: the extra ranks hand their
    vector to their odd neighbour and get the result back; the others fold them in, run
    ``exchanges(b, fold, vrank, n, acc, deps)`` (returning the steps that complete RECV) and
    send the result back out."""
    p, n = spec.size, spec.count
    b = builder_for(rank, spec)
    fold = Fold.of(p)
    if p == 1:  # the result is the own vector
        b.copy(RECV(0, n), SEND(0, n))
        return b.build()
    if fold.dropped(rank):
        b.send(rank + 1, SEND(0, n))
        b.recv(rank + 1, RECV(0, n))
        return b.build()
    vrank = fold.vrank(rank)
    acc, deps = fold_in(b, rank, fold, n)
    done = exchanges(b, fold, vrank, n, acc, deps)
    if fold.merges(rank):
        b.send(rank - 1, RECV(0, n), done)
    return b.build()


# -- recursive doubling ----------------------------------------------------------------------
@register(
    "allreduce", "recursive_doubling",
    "log2 p exchanges of the whole vector at distances 1, 2, 4, …; extra ranks fold first",
    cost=lambda s, m: Fold.of(s.size).steps * (m.message(s.vector_bytes())
                                               + s.vector_bytes() * m.gamma) + _fold_cost(s, m),
)
def allreduce_recursive_doubling(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Exchange and combine with partner v ^ 2^k; two scratch vectors alternate."""
    return _folded(rank, spec, _doubling)


def _doubling(b: ScheduleBuilder, fold: Fold, vrank: int, n: int, acc: Region,
              deps: list[int]) -> list[int]:
    """The exchanges of recursive doubling; the last one combines into RECV."""
    spare = [b.tmp(n), b.tmp(n)] if fold.steps > 1 else []
    previous: list[int] = []  # the last exchange's steps, which read the buffer reused next
    for k in range(fold.steps):
        partner_v = vrank ^ (1 << k)
        partner = fold.real(partner_v)
        sent = b.send(partner, acc, deps)
        into = RECV(0, n) if k == fold.steps - 1 else spare[k % 2]
        got = b.recv(partner, into, previous if k >= 2 else ())
        deps = [b.reduce(into, acc, [got, *deps], reverse=partner_v > vrank)]
        previous = [sent, *deps]
        acc = into
    return deps


# -- ring ------------------------------------------------------------------------------------
def _ring_cost(spec: CallSpec, m: CostModel) -> float:
    p, nbytes = spec.size, spec.vector_bytes()
    return 2 * (p - 1) * m.alpha + (p - 1) / p * nbytes * (2 * m.beta + m.gamma)


@register(
    "allreduce", "ring",
    "Ring reduce-scatter then ring allgather of p pieces (commutative operators)",
    restrictions=(COMMUTATIVE,),
    cost=_ring_cost,
)
def allreduce_ring(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """2(p−1) steps around the ring; pieces may be uneven or empty when count < p."""
    p, n = spec.size, spec.count
    if p == 1:
        return _folded(rank, spec, _doubling)  # the own vector, as every allreduce's
    send, recv = spec.buffer_counts(rank)
    counts = np.asarray(split(n, p), dtype=np.int64)
    displs = np.r_[0, np.cumsum(counts)[:-1]]
    columns, edges, tmp = ring_columns(rank, displs, counts, int(displs[rank]), allgather=True)
    return compact(rank, p, (send, recv, tmp), columns, edges)


# -- Rabenseifner ----------------------------------------------------------------------------
def _rabenseifner_cost(spec: CallSpec, m: CostModel) -> float:
    nbytes = spec.vector_bytes()
    fold = Fold.of(spec.size)
    share = (fold.pof2 - 1) / fold.pof2
    return 2 * fold.steps * m.alpha + share * nbytes * (2 * m.beta + m.gamma) + _fold_cost(spec, m)


def allgather_pieces(
    b: ScheduleBuilder,
    vrank: int,
    fold: Fold,
    offs: list[int],
    work: Region,
    deps: list[int],
) -> list[int]:
    """Recursive-doubling allgather undoing `halve`: distances 2^(k), k from high to low."""
    waits = list(deps)
    for k in reversed(range(fold.steps)):
        partner_v = vrank ^ (1 << k)
        partner = fold.real(partner_v)
        lo, hi = halving_range(vrank, k + 1, fold.pof2)
        if offs[hi] > offs[lo]:
            b.send(partner, work.sub(offs[lo], offs[hi] - offs[lo]), waits)
        lo, hi = halving_range(partner_v, k + 1, fold.pof2)
        if offs[hi] > offs[lo]:
            waits = [*waits, b.recv(partner, work.sub(offs[lo], offs[hi] - offs[lo]))]
    return waits


@register(
    "allreduce", "rabenseifner",
    "Reduce-scatter by recursive halving, then allgather by recursive doubling",
    cost=_rabenseifner_cost,
)
def allreduce_rabenseifner(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Fold extra ranks, halve into pieces of RECV, gather the pieces back, unfold."""
    return _folded(rank, spec, _halving_doubling)


def _halving_doubling(b: ScheduleBuilder, fold: Fold, vrank: int, n: int, acc: Region,
                      deps: list[int]) -> list[int]:
    """Halve into this rank's piece of RECV, then gather every piece back."""
    pieces = split(n, fold.pof2)
    offs = [*prefix(tuple(pieces)), n]
    mine = bit_reverse(vrank, fold.steps)
    _, deps = halve(b, vrank, fold, pieces, acc, deps, last=RECV(offs[mine], pieces[mine]))
    return allgather_pieces(b, vrank, fold, offs, RECV(0, n), deps)


# -- reduce then broadcast -------------------------------------------------------------------
@register(
    "allreduce", "reduce_bcast",
    "Binomial reduce to rank 0, then binomial broadcast from it (two composed schedules)",
    cost=lambda s, m: ceil_log2(s.size) * (2 * m.message(s.vector_bytes())
                                           + s.vector_bytes() * m.gamma),
)
def allreduce_reduce_bcast(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Append the reduce schedule, then the bcast schedule with its SEND area mapped on RECV."""
    b = builder_for(rank, spec)
    reduce_part = reduce_binomial(rank, spec.with_(collective="reduce", root=0), {})
    bcast_part = bcast_binomial(rank, spec.with_(collective="bcast", root=0, op=None), {})
    exits = b.extend(reduce_part)
    b.extend(bcast_part, after=exits, remap={Buffer.SEND: (int(Buffer.RECV), 0)})
    return b.build()
