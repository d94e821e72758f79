"""reduce_scatter and reduce_scatter_block: the reduction of every SEND area, scattered.

Rank j's SEND area holds ``p`` consecutive blocks (``counts[i]`` elements for rank i); rank i's
RECV area ends with block i of ``x0 ∘ x1 ∘ … ∘ x(p−1)``. One builder serves both collectives
(``reduce_scatter_block`` is normalised to equal counts).

**Rank order.** A non-commutative operator must combine contributions in rank order. Each
algorithm here either declares the commutative restriction (the ring, whose partial results
travel around the ring and wrap past rank p−1) or combines contiguous runs of ranks, putting
the run that holds lower ranks on the left (``reverse=True`` when the incoming data holds the
lower ranks).

**Recursive halving** is also the first half of Rabenseifner's reduce and allreduce, so its
machinery lives here and those modules import it:

* `Fold` maps p ranks onto the largest power of two p' ≤ p: for i < rem = p − p', even rank
  2i sends its vector to rank 2i+1, which combines ``x(2i) ∘ x(2i+1)`` and acts as virtual
  rank i; rank r ≥ 2·rem is virtual rank r − rem. Virtual ranks stay in rank order.
* `halve` runs log2 p' exchanges with partners at distance 1, 2, 4, …: at each step both
  partners hold the same run of *positions* (pieces of the vector), keep one half, send the
  other and combine the half they kept with the partner's. Growing distances keep every
  partial result a contiguous run of ranks, so the combination is in rank order. After step k
  a rank's positions are fixed by its low k+1 bits, and at the end virtual rank v holds
  position ``bit_reverse(v)``. Reduce-scatter lays the blocks out in bit-reversed order
  first, so that position holds block v; reduce and allreduce need no such permutation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..schedule import RECV, SEND, Region, Schedule, ScheduleBuilder
from .registry import COMMUTATIVE, CostModel, register
from .spec import CallSpec, prefix

BOTH = ("reduce_scatter", "reduce_scatter_block")


# -- folding onto a power of two -------------------------------------------------------------
@dataclass(frozen=True)
class Fold:
    """How ``size`` ranks fold onto ``pof2`` virtual ranks (``rem`` pairs merge)."""

    size: int
    pof2: int
    rem: int

    @classmethod
    def of(cls, size: int) -> Fold:
        """The fold of ``size`` ranks onto the largest power of two not above it."""
        pof2 = 1 << (size.bit_length() - 1) if size > 0 else 1
        return cls(size, pof2, size - pof2)

    @property
    def steps(self) -> int:
        """log2 of the number of virtual ranks."""
        return self.pof2.bit_length() - 1

    def dropped(self, rank: int) -> bool:
        """Whether ``rank`` hands its data to its odd neighbour and takes no part."""
        return rank < 2 * self.rem and rank % 2 == 0

    def merges(self, rank: int) -> bool:
        """Whether ``rank`` receives its even neighbour's data and stands for both."""
        return rank < 2 * self.rem and rank % 2 == 1

    def vrank(self, rank: int) -> int:
        """The virtual rank standing for ``rank`` (a dropped rank maps to its neighbour's)."""
        return rank // 2 if rank < 2 * self.rem else rank - self.rem

    def real(self, vrank: int) -> int:
        """The rank that acts as virtual rank ``vrank``."""
        return 2 * vrank + 1 if vrank < self.rem else vrank + self.rem

    def ranks_of(self, vrank: int) -> range:
        """The ranks whose data virtual rank ``vrank`` holds, in order."""
        return range(2 * vrank, 2 * vrank + 2) if vrank < self.rem else range(vrank + self.rem,
                                                                               vrank + self.rem + 1)


def bit_reverse(value: int, bits: int) -> int:
    """``value`` with its lowest ``bits`` bits in reverse order."""
    out = 0
    for _ in range(bits):
        out = (out << 1) | (value & 1)
        value >>= 1
    return out


def split(count: int, parts: int) -> list[int]:
    """``count`` elements in ``parts`` near-equal pieces, the larger ones first."""
    base, extra = divmod(count, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def fold_in(b: ScheduleBuilder, rank: int, fold: Fold, n: int) -> tuple[Region, list[int]]:
    """For a non-dropped rank: the region holding its (folded) vector and the steps to wait for.

    A merging rank receives its even neighbour's vector and puts it on the left.
    """
    if not fold.merges(rank):
        return SEND(0, n), []
    lower = b.tmp(n)
    got = b.recv(rank - 1, lower)
    return lower, [b.reduce(lower, SEND(0, n), [got])]


def halving_range(vrank: int, steps: int, pof2: int) -> tuple[int, int]:
    """The positions ``vrank`` holds after the first ``steps`` halving steps."""
    lo, hi = 0, pof2
    for k in range(steps):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if not vrank >> k & 1 else (mid, hi)
    return lo, hi


def halve(
    b: ScheduleBuilder,
    vrank: int,
    fold: Fold,
    pieces: Sequence[int],
    acc: Region,
    deps: list[int],
    last: Region | None = None,
) -> tuple[Region, list[int]]:
    """Reduce-scatter by recursive halving over ``pieces`` (element counts per position).

    ``acc`` holds all positions, laid out in order. Returns the region holding the reduced
    piece at position ``bit_reverse(vrank)`` and the step that completes it. The last
    step's result goes into ``last`` when given (it must have that piece's size). Empty
    halves produce no message: both partners know every piece's size.
    """
    offs = [*prefix(tuple(pieces)), sum(pieces)]
    lo, hi = 0, fold.pof2
    for k in range(fold.steps):
        partner_v = vrank ^ (1 << k)
        partner = fold.real(partner_v)
        mid = (lo + hi) // 2
        keep, give = ((lo, mid), (mid, hi)) if partner_v > vrank else ((mid, hi), (lo, mid))
        n_give = offs[give[1]] - offs[give[0]]
        n_keep = offs[keep[1]] - offs[keep[0]]
        if n_give:
            b.send(partner, acc.sub(offs[give[0]] - offs[lo], n_give), deps)
        final = k == fold.steps - 1
        into = last if final and last is not None else b.tmp(n_keep)
        if n_keep:
            got = b.recv(partner, into)
            mine = acc.sub(offs[keep[0]] - offs[lo], n_keep)
            deps = [b.reduce(into, mine, [got, *deps], reverse=partner_v > vrank)]
        else:
            deps = []
        acc = into
        lo, hi = keep
    return acc, deps


def _block_layout(spec: CallSpec, fold: Fold) -> tuple[list[int], list[tuple[int, int]]]:
    """Per position, the element count and the (offset, count) run of SEND it comes from."""
    counts = list(spec.counts)
    displs = prefix(tuple(counts))
    runs: list[tuple[int, int]] = []
    for q in range(fold.pof2):
        ranks = fold.ranks_of(bit_reverse(q, fold.steps))
        runs.append((displs[ranks[0]], sum(counts[j] for j in ranks)))
    return [n for _, n in runs], runs


def _deliver_pair(b: ScheduleBuilder, rank: int, spec: CallSpec, acc: Region,
                  deps: list[int]) -> None:
    """A merging rank's result holds its even neighbour's block, then its own."""
    lower, own = spec.counts[rank - 1], spec.counts[rank]
    if lower:
        b.send(rank - 1, acc.sub(0, lower), deps)
    if own:
        b.copy(RECV(0, own), acc.sub(lower, own), deps)


@register(
    BOTH, "recursive_halving",
    "Recursive halving over bit-reversed blocks (rank order kept); extra ranks fold first",
    cost=lambda s, m: _halving_cost(s, m),
)
def reduce_scatter_recursive_halving(rank: int, spec: CallSpec,
                                     params: Mapping[str, Any]) -> Schedule:
    """Permute blocks to bit-reversed positions, halve log2 p' times, unfold the extra ranks."""
    p, total, own = spec.size, sum(spec.counts), spec.counts[rank]
    b = ScheduleBuilder(rank, p, *spec.buffer_counts(rank))
    fold = Fold.of(p)
    if p == 1:
        if own:
            b.copy(RECV(0, own), SEND(0, own))
        return b.build()
    if fold.dropped(rank):
        b.send(rank + 1, SEND(0, total))
        if own:
            b.recv(rank + 1, RECV(0, own))
        return b.build()
    acc, deps = fold_in(b, rank, fold, total)
    pieces, runs = _block_layout(spec, fold)
    if fold.steps > 1:  # bit reversal permutes more than two positions: lay them out
        permuted = b.tmp(total)
        copies = []
        at = 0
        for offset, n in runs:
            if n:
                copies.append(b.copy(permuted.sub(at, n), acc.sub(offset, n), deps))
            at += n
        acc, deps = permuted, copies
    vrank = fold.vrank(rank)
    if fold.merges(rank):
        acc, deps = halve(b, vrank, fold, pieces, acc, deps)
        _deliver_pair(b, rank, spec, acc, deps)
    else:
        halve(b, vrank, fold, pieces, acc, deps, last=RECV(0, own))
    return b.build()


def _halving_cost(spec: CallSpec, m: CostModel) -> float:
    nbytes = sum(spec.counts) * spec.itemsize
    fold = Fold.of(spec.size)
    share = (fold.pof2 - 1) / fold.pof2
    extra = 2 * m.message(nbytes) + nbytes * m.gamma if fold.rem else 0.0
    return fold.steps * m.alpha + share * nbytes * (m.beta + m.gamma) + extra


# -- ring ------------------------------------------------------------------------------------
def ring_reduce_scatter(
    b: ScheduleBuilder,
    rank: int,
    blocks: Sequence[tuple[int, int]],
    src: Region,
    last: Region,
) -> list[int]:
    """Ring reduce-scatter of ``blocks`` ((offset, count) in ``src``); block ``rank`` → ``last``.

    In step s rank r sends its partial of block r−s−1 to the right and combines block r−s−2
    from the left into a fresh scratch region (commutative operators only: a block's partial
    result wraps from rank p−1 to rank 0). Returns the step completing ``last``.
    """
    p = len(blocks)
    left, right = (rank - 1) % p, (rank + 1) % p
    partial: dict[int, tuple[Region, list[int]]] = {}

    def held(block: int) -> tuple[Region, list[int]]:
        offset, n = blocks[block]
        return partial.get(block, (src.sub(offset, n), []))

    done: list[int] = []
    for s in range(p - 1):
        out, into = (rank - s - 1) % p, (rank - s - 2) % p
        region, deps = held(out)
        if region.count:
            b.send(right, region, deps)
        n = blocks[into][1]
        target = last if s == p - 2 else b.tmp(n)
        if n:
            got = b.recv(left, target)
            mine, mine_deps = held(into)
            done = [b.reduce(target, mine, [got, *mine_deps])]
        else:
            done = []
        partial[into] = (target, done)
    return done


@register(
    BOTH, "ring", "p−1 steps around a ring, each combining one block (commutative operators)",
    restrictions=(COMMUTATIVE,),
    cost=lambda s, m: _ring_cost(s, m),
)
def reduce_scatter_ring(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Each block's partial result travels once around the ring, ending at its owner."""
    p, own = spec.size, spec.counts[rank]
    b = ScheduleBuilder(rank, p, *spec.buffer_counts(rank))
    displs = prefix(spec.counts)
    if p == 1:
        if own:
            b.copy(RECV(0, own), SEND(0, own))
        return b.build()
    blocks = list(zip(displs, spec.counts, strict=True))
    ring_reduce_scatter(b, rank, blocks, SEND(0, sum(spec.counts)), RECV(0, own))
    return b.build()


def _ring_cost(spec: CallSpec, m: CostModel) -> float:
    p = spec.size
    nbytes = sum(spec.counts) * spec.itemsize
    return (p - 1) * m.alpha + (p - 1) / p * nbytes * (m.beta + m.gamma)


# -- pairwise --------------------------------------------------------------------------------
@register(
    BOTH, "pairwise",
    "p−1 exchange steps: in step s send rank r+s its block, receive from r−s; combine in order",
    cost=lambda s, m: _ring_cost(s, m),
)
def reduce_scatter_pairwise(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Exchange step by step; contributions are kept apart and combined in rank order."""
    p, own = spec.size, spec.counts[rank]
    b = ScheduleBuilder(rank, p, *spec.buffer_counts(rank))
    displs = prefix(spec.counts)
    mine = SEND(displs[rank], own)
    arrived: dict[int, tuple[Region, int]] = {}
    for s in range(1, p):
        to, frm = (rank + s) % p, (rank - s) % p
        with b.round():
            if spec.counts[to]:
                b.send(to, SEND(displs[to], spec.counts[to]))
            if own:
                into = RECV(0, own) if frm == 0 else b.tmp(own)
                arrived[frm] = (into, b.recv(frm, into))
    if not own:
        return b.build()
    done = [] if rank == 0 else [arrived[0][1]]
    if rank == 0:
        done = [b.copy(RECV(0, own), mine)]
    for j in range(1, p):
        region, after = (mine, []) if j == rank else (arrived[j][0], [arrived[j][1]])
        done = [b.reduce(RECV(0, own), region, [*done, *after])]
    return b.build()
