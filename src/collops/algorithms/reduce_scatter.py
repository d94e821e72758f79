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
  For a commutative operator reduce-scatter skips the permutation and halves with
  shrinking distances instead, which leaves block v at position v directly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..schedule import RECV, SEND, Buffer, Region, Schedule, ScheduleBuilder, StepKind
from .registry import COMMUTATIVE, CostModel, register
from .spec import CallSpec, builder_for, prefix

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
    descending: bool = False,
) -> tuple[Region, list[int]]:
    """Reduce-scatter by recursive halving over ``pieces`` (element counts per position).

    ``acc`` holds all positions, laid out in order. Returns the region holding the reduced
    piece at position ``bit_reverse(vrank)`` and the step that completes it. The last
    step's result goes into ``last`` when given (it must have that piece's size). Empty
    halves produce no message: both partners know every piece's size.

    With ``descending`` the distances shrink instead (p'/2 first): the reduced piece is then
    at position ``vrank`` with no bit reversal, but partial results are no longer contiguous
    runs of ranks, so this order is for commutative operators only.
    """
    offs = [*prefix(tuple(pieces)), sum(pieces)]
    lo, hi = 0, fold.pof2
    order = range(fold.steps - 1, -1, -1) if descending else range(fold.steps)
    for step, k in enumerate(order):
        partner_v = vrank ^ (1 << k)
        partner = fold.real(partner_v)
        mid = (lo + hi) // 2
        keep, give = ((lo, mid), (mid, hi)) if partner_v > vrank else ((mid, hi), (lo, mid))
        n_give = offs[give[1]] - offs[give[0]]
        n_keep = offs[keep[1]] - offs[keep[0]]
        if n_give:
            b.send(partner, acc.sub(offs[give[0]] - offs[lo], n_give), deps)
        final = step == fold.steps - 1
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


def _block_layout(spec: CallSpec, fold: Fold, permuted: bool) -> tuple[list[int], list[int]]:
    """Per position, its element count and the SEND offset of the blocks it holds.

    Position q holds the blocks of virtual rank ``bit_reverse(q)`` when ``permuted``, else
    those of virtual rank q.
    """
    counts = np.asarray(spec.counts, dtype=np.int64)
    ends = np.cumsum(counts)
    v = np.arange(fold.pof2)
    if permuted:
        v = np.array([bit_reverse(q, fold.steps) for q in range(fold.pof2)], dtype=np.int64)
    first = np.where(v < fold.rem, 2 * v, v + fold.rem)  # first rank of each virtual rank
    last = np.where(v < fold.rem, 2 * v + 1, v + fold.rem)
    sizes = ends[last] - ends[first] + counts[first]
    return sizes.tolist(), (ends[first] - counts[first]).tolist()


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
    "Recursive halving (blocks bit-reversed for non-commutative operators); extra ranks fold",
    cost=lambda s, m: _halving_cost(s, m),
)
def reduce_scatter_recursive_halving(rank: int, spec: CallSpec,
                                     params: Mapping[str, Any]) -> Schedule:
    """Fold extra ranks, halve log2 p' times, hand the folded ranks their blocks.

    A commutative operator halves with shrinking distances over the blocks in place; a
    non-commutative one first copies the blocks to bit-reversed positions and halves with
    growing distances, which keeps rank order.
    """
    p, total, own = spec.size, sum(spec.counts), spec.counts[rank]
    b = builder_for(rank, spec)
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
    # bit reversal permutes more than two positions: lay them out (rank order needs it)
    permute = fold.steps > 1 and not spec.commutative
    pieces, sources = _block_layout(spec, fold, permute)
    if permute:
        permuted = b.tmp(total)
        copies = []
        at = 0
        for offset, n in zip(sources, pieces, strict=True):
            if n:
                copies.append(b.copy(permuted.sub(at, n), acc.sub(offset, n), deps))
            at += n
        acc, deps = permuted, copies
    vrank = fold.vrank(rank)
    descending = spec.commutative
    if fold.merges(rank):
        acc, deps = halve(b, vrank, fold, pieces, acc, deps, descending=descending)
        _deliver_pair(b, rank, spec, acc, deps)
    else:
        halve(b, vrank, fold, pieces, acc, deps, last=RECV(0, own), descending=descending)
    return b.build()


def _halving_cost(spec: CallSpec, m: CostModel) -> float:
    nbytes = sum(spec.counts) * spec.itemsize
    fold = Fold.of(spec.size)
    share = (fold.pof2 - 1) / fold.pof2
    extra = 2 * m.message(nbytes) + nbytes * m.gamma if fold.rem else 0.0
    return fold.steps * m.alpha + share * nbytes * (m.beta + m.gamma) + extra


# -- ring ------------------------------------------------------------------------------------
# The ring and pairwise builders fill whole columns with numpy (they have O(p) steps per rank
# and the simulator builds them for thousands of ranks). Steps of empty blocks are built too
# and then dropped by `compact`; every dependency links two steps of the same block, so no
# dependency between kept steps is lost.
def compact(
    rank: int,
    size: int,
    buffers: tuple[int, int, int],
    columns: dict[str, np.ndarray],
    deps: tuple[np.ndarray, np.ndarray],
) -> Schedule:
    """A schedule from whole columns, leaving out steps of zero elements and their edges."""
    keep = columns["count"] > 0
    new_id = np.cumsum(keep) - 1
    dep_from, dep_to = deps
    live = keep[dep_from] & keep[dep_to]
    kept = {name: col[keep] for name, col in columns.items()}
    return Schedule.from_columns(rank, size, buffers, kept,
                                 (new_id[dep_from[live]], new_id[dep_to[live]]))


def ring_columns(
    rank: int,
    displs: np.ndarray,
    counts: np.ndarray,
    last_offset: int,
    allgather: bool,
) -> tuple[dict[str, np.ndarray], tuple[np.ndarray, np.ndarray], int]:
    """Columns of the ring reduce-scatter (and optionally the ring allgather after it).

    Blocks are ``(displs[j], counts[j])`` of SEND (and of RECV for the allgather). In step s
    rank r sends its partial of block r−s−1 to the right and combines block r−s−2 from the
    left into fresh scratch — into RECV at ``last_offset`` for the last step, which completes
    block r (commutative operators only: a partial result wraps from rank p−1 to rank 0).
    The allgather then forwards block r−s in step s. Returns columns, edges and scratch size.
    """
    p = len(counts)
    steps = p - 1
    s = np.arange(steps)
    out, into = (rank - s - 1) % p, (rank - s - 2) % p
    left, right = (rank - 1) % p, (rank + 1) % p
    into_counts = counts[into]
    tmp_offsets = np.r_[0, np.cumsum(into_counts[:-1])]
    tmp_size = int(into_counts[:-1].sum())
    partial_buf = np.full(steps, int(Buffer.TMP))
    partial_buf[-1] = int(Buffer.RECV)
    partial_off = tmp_offsets.copy()
    partial_off[-1] = last_offset
    # three rows per step: send, recv, reduce
    kind = np.tile([StepKind.SEND, StepKind.RECV, StepKind.REDUCE], steps)
    peer = np.tile([right, left, -1], steps)
    send_buf = np.r_[int(Buffer.SEND), partial_buf[:-1]]
    send_off = np.r_[displs[out[0]], partial_off[:-1]]
    src_buf = np.stack([send_buf, np.zeros(steps), np.full(steps, int(Buffer.SEND))], 1)
    src_off = np.stack([send_off, np.zeros(steps), displs[into]], 1)
    dst_buf = np.stack([np.zeros(steps), partial_buf, partial_buf], 1)
    dst_off = np.stack([np.zeros(steps), partial_off, partial_off], 1)
    count = np.stack([counts[out], into_counts, into_counts], 1)
    dep_from = [3 * s + 1, 3 * s[:-1] + 2]  # recv → reduce; reduce(s) → send(s+1)
    dep_to = [3 * s + 2, 3 * s[1:]]
    columns = {"kind": kind, "peer": peer, "src_buf": src_buf.reshape(-1),
               "src_off": src_off.reshape(-1), "dst_buf": dst_buf.reshape(-1),
               "dst_off": dst_off.reshape(-1), "count": count.reshape(-1)}
    if allgather:
        base = 3 * steps
        out, into = (rank - s) % p, (rank - s - 1) % p
        extra = {
            "kind": np.tile([StepKind.SEND, StepKind.RECV], steps),
            "peer": np.tile([right, left], steps),
            "src_buf": np.tile([int(Buffer.RECV), 0], steps),
            "src_off": np.stack([displs[out], np.zeros(steps)], 1).reshape(-1),
            "dst_buf": np.tile([0, int(Buffer.RECV)], steps),
            "dst_off": np.stack([np.zeros(steps), displs[into]], 1).reshape(-1),
            "count": np.stack([counts[out], counts[into]], 1).reshape(-1),
        }
        columns = {name: np.r_[columns[name], extra[name]] for name in columns}
        # last reduce → first send; recv(s) → send(s+1)
        dep_from += [np.array([3 * steps - 1]), base + 2 * s[:-1] + 1]
        dep_to += [np.array([base]), base + 2 * s[1:]]
    edges = (np.concatenate(dep_from).astype(np.int64), np.concatenate(dep_to).astype(np.int64))
    return columns, edges, tmp_size


@register(
    BOTH, "ring", "p−1 steps around a ring, each combining one block (commutative operators)",
    restrictions=(COMMUTATIVE,),
    cost=lambda s, m: _ring_cost(s, m),
)
def reduce_scatter_ring(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Each block's partial result travels once around the ring, ending at its owner."""
    p, own = spec.size, spec.counts[rank]
    send, recv = spec.buffer_counts(rank)
    if p == 1:
        b = ScheduleBuilder(rank, p, send, recv)
        if own:
            b.copy(RECV(0, own), SEND(0, own))
        return b.build()
    counts = np.asarray(spec.counts, dtype=np.int64)
    displs = np.r_[0, np.cumsum(counts)[:-1]]
    columns, edges, tmp = ring_columns(rank, displs, counts, 0, allgather=False)
    return compact(rank, p, (send, recv, tmp), columns, edges)


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
    """Exchange step by step; contributions are kept apart and combined in rank order.

    Step s (a round: it waits for the previous non-empty step) sends block r+s to rank r+s
    and receives rank r−s's contribution to block r — into RECV when it comes from rank 0,
    else into its own scratch block. The contributions are then combined
    into RECV in rank order, each as soon as it and the lower ones are there.
    """
    p, own = spec.size, spec.counts[rank]
    send, recv = spec.buffer_counts(rank)
    counts = np.asarray(spec.counts, dtype=np.int64)
    displs = np.r_[0, np.cumsum(counts)[:-1]]
    s = np.arange(1, p)
    to, frm = (rank + s) % p, (rank - s) % p
    # scratch slot of each sender's contribution, in step order (rank 0's goes to RECV)
    slot = np.cumsum(frm != 0) - 1
    into_buf = np.where(frm == 0, int(Buffer.RECV), int(Buffer.TMP))
    into_off = np.where(frm == 0, 0, slot * own)
    tmp = int((frm != 0).sum()) * own
    exchange = {
        "kind": np.tile([StepKind.SEND, StepKind.RECV], p - 1),
        "peer": np.stack([to, frm], 1).reshape(-1),
        "src_buf": np.tile([int(Buffer.SEND), 0], p - 1),
        "src_off": np.stack([displs[to], np.zeros(p - 1)], 1).reshape(-1),
        "dst_buf": np.stack([np.zeros(p - 1), into_buf], 1).reshape(-1),
        "dst_off": np.stack([np.zeros(p - 1), into_off], 1).reshape(-1),
        "count": np.stack([counts[to], np.full(p - 1, own)], 1).reshape(-1),
    }
    # reduce rows, in rank order j = 1 … p−1: RECV = RECV ∘ x_j (x_0 first copied on rank 0)
    j = np.arange(1, p)
    step_of = (rank - j) % p  # the step whose receive brought x_j (0: the own block)
    recv_row = 2 * (step_of - 1) + 1
    local = {
        "kind": np.r_[StepKind.COPY, np.full(p - 1, StepKind.REDUCE)],
        "peer": np.full(p, -1),
        "src_buf": np.r_[int(Buffer.SEND), np.where(j == rank, int(Buffer.SEND),
                                                    into_buf[step_of - 1])],
        "src_off": np.r_[displs[rank], np.where(j == rank, displs[rank], into_off[step_of - 1])],
        "dst_buf": np.full(p, int(Buffer.RECV)),
        "dst_off": np.zeros(p),
        "count": np.full(p, own if rank == 0 else 0),
    }
    local["count"][1:] = own
    columns = {name: np.r_[exchange[name], local[name]] for name in exchange}
    base = 2 * (p - 1)
    first = base if rank == 0 else 2 * (rank - 1) + 1  # the step that put x_0 into RECV
    chain_from = np.r_[first, base + j[:-1]][: p - 1]  # reduce j waits for the previous combine …
    received = j != rank
    arrival_from, arrival_to = recv_row[received], (base + j)[received]  # … and its receive
    round_from, round_to = _round_edges(columns["count"][:base].reshape(p - 1, 2) > 0)
    edges = (np.r_[chain_from, arrival_from, round_from].astype(np.int64),
             np.r_[base + j, arrival_to, round_to].astype(np.int64))
    return compact(rank, p, (send, recv, tmp), columns, edges)


def _round_edges(nonempty: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edges from every kept step of each round to every kept step of the next kept round.

    ``nonempty[s, i]`` says whether row ``2s + i`` (send, recv) of round s is kept.
    """
    rounds = np.nonzero(nonempty.any(axis=1))[0]
    before, after = rounds[:-1], rounds[1:]
    froms, tos = [], []
    for i in (0, 1):
        for k in (0, 1):
            both = nonempty[before, i] & nonempty[after, k]
            froms.append(2 * before[both] + i)
            tos.append(2 * after[both] + k)
    return np.concatenate(froms).astype(np.int64), np.concatenate(tos).astype(np.int64)
