"""reduce: ``x0 ∘ x1 ∘ … ∘ x(p−1)`` of every SEND area ends in the root's RECV area.

**Rank order.** The tree algorithms use trees whose subtrees are contiguous runs of ranks (a
binomial tree, and a k-ary tree numbered in preorder), so a node combines its own vector,
then its children's results from the lowest ranks up, always with the lower ranks on the left.
Renumbering ranks relative to the root breaks the runs at rank p−1, so for a non-commutative
operator the tree is rooted at rank 0, which then sends the result to the root (one message
more); a commutative operator uses the tree rooted at the root directly.

Rabenseifner's algorithm reduce-scatters by recursive halving (see
`collops.algorithms.reduce_scatter`) and gathers the pieces to the root along a binomial
tree over the same partners, in reverse order of distance.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..schedule import RECV, SEND, Region, Schedule, ScheduleBuilder
from .patterns import absolute, binomial_children, binomial_parent, ceil_log2, relative
from .reduce_scatter import Fold, bit_reverse, fold_in, halve, halving_range, split
from .registry import CostModel, Param, register
from .spec import CallSpec, builder_for, prefix

TreeShape = Callable[[int, int], tuple[int, list[int]]]



def combine_subtree(
    b: ScheduleBuilder,
    n: int,
    children: Sequence[int],
    result: Region | None = None,
) -> tuple[Region, list[int]]:
    """Combine the own vector with the children's results (given in rank order).

    The first child's result is received into the accumulator and the own vector put on its
    left; later children each get their own scratch, so all receives can be posted at once.
    ``result`` is where the accumulator lives (scratch when None; a leaf without ``result``
    just names its SEND area). Returns the accumulator and the steps completing it.
    """
    own = SEND(0, n)
    if not children:
        return (result, [b.copy(result, own)]) if result is not None else (own, [])
    acc = result if result is not None else b.tmp(n)
    first = b.recv(children[0], acc)
    done = [b.reduce(acc, own, [first], reverse=True)]
    for child in children[1:]:
        scratch = b.tmp(n)
        got = b.recv(child, scratch)
        done = [b.reduce(acc, scratch, [got, *done])]
    return acc, done


def tree_reduce(rank: int, spec: CallSpec, shape: TreeShape) -> Schedule:
    """Reduce along a tree given by ``shape(vrank, size) -> (parent, children)``.

    The tree's virtual ranks are relative to its top; every subtree must be a contiguous run
    of virtual ranks and children must come in increasing order.
    """
    p, n, root = spec.size, spec.count, spec.root
    b = builder_for(rank, spec)
    top = root if spec.commutative else 0
    vparent, vchildren = shape(relative(rank, top, p), p)
    children = [absolute(c, top, p) for c in vchildren]
    acc, done = combine_subtree(b, n, children, RECV(0, n) if rank == root == top else None)
    if vparent >= 0:
        b.send(absolute(vparent, top, p), acc, done)
    elif rank != root:
        b.send(root, acc, done)
    if rank == root != top:
        b.recv(top, RECV(0, n))
    return b.build()


def binomial_shape(vrank: int, size: int) -> tuple[int, list[int]]:
    """Binomial tree: parent and children (smallest subtree, i.e. lowest ranks, first)."""
    return binomial_parent(vrank), binomial_children(vrank, size)[::-1]


def contiguous_kary_shape(arity: int) -> TreeShape:
    """A k-ary tree numbered in preorder, so every subtree is a contiguous run of ranks."""

    def shape(vrank: int, size: int) -> tuple[int, list[int]]:
        node, span, parent = 0, size, -1
        while True:
            children = _split_span(node, span, arity)
            if node == vrank:
                return parent, [c for c, _ in children]
            parent = node
            node, span = next((c, s) for c, s in reversed(children) if c <= vrank)

    return shape


def _split_span(node: int, span: int, arity: int) -> list[tuple[int, int]]:
    """Children (start, span) of ``node`` whose subtree covers ``[node, node + span)``."""
    rest = span - 1
    if rest <= 0:
        return []
    sizes = split(rest, min(arity, rest))
    starts = [node + 1 + off for off in prefix(tuple(sizes))]
    return list(zip(starts, sizes, strict=True))


def tree_depth(size: int, arity: int) -> int:
    """Levels below the root of the preorder k-ary tree of ``size`` nodes."""
    depth, span = 0, size
    while span > 1:
        span = split(span - 1, min(arity, span - 1))[0]
        depth += 1
    return depth


def _ordered_extra(spec: CallSpec, m: CostModel) -> float:
    """The extra message to the root when a non-commutative tree is rooted at rank 0."""
    return 0.0 if spec.commutative or spec.root == 0 else m.message(spec.vector_bytes())


@register(
    "reduce", "binomial",
    "Binomial tree, ⌈log2 p⌉ levels; non-commutative operators go via rank 0 in rank order",
    cost=lambda s, m: ceil_log2(s.size) * (m.message(s.vector_bytes()) + s.vector_bytes() * m.gamma)
    + _ordered_extra(s, m),
)
def reduce_binomial(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Each rank combines its binomial subtree and sends the result to its parent."""
    return tree_reduce(rank, spec, binomial_shape)


def _nary_cost(spec: CallSpec, m: CostModel, arity: int) -> float:
    step = m.message(spec.vector_bytes()) + spec.vector_bytes() * m.gamma
    return tree_depth(spec.size, arity) * min(arity, max(spec.size - 1, 1)) * step + \
        _ordered_extra(spec, m)


@register(
    "reduce", "nary_tree",
    "k-ary tree in preorder (contiguous subtrees, rank order kept); arity 1 is a chain",
    params=(Param("arity", 4, "children per node", minimum=1),),
    cost=lambda s, m: _nary_cost(s, m, 4),
)
def reduce_nary_tree(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Each rank combines its up to ``arity`` children's results, then sends to its parent."""
    return tree_reduce(rank, spec, contiguous_kary_shape(int(params["arity"])))


# -- Rabenseifner ----------------------------------------------------------------------------
def gather_pieces(
    b: ScheduleBuilder,
    vrank: int,
    target: int,
    fold: Fold,
    offs: Sequence[int],
    work: Region,
    deps: list[int],
) -> list[int]:
    """Binomial gather, over the halving partners, of every position into ``target``'s ``work``.

    Before the step at distance 2^k a rank holds the positions of `halving_range` after
    k+1 steps, at their element offsets ``offs`` in ``work``. Returns the steps after which
    ``target`` holds everything (empty on other ranks, which send and stop).
    """
    waits = list(deps)
    for k in reversed(range(fold.steps)):
        if (vrank ^ target) >> (k + 1):
            break
        partner_v = vrank ^ (1 << k)
        partner = fold.real(partner_v)
        if (vrank ^ target) >> k & 1:
            lo, hi = halving_range(vrank, k + 1, fold.pof2)
            if offs[hi] > offs[lo]:
                b.send(partner, work.sub(offs[lo], offs[hi] - offs[lo]), waits)
            return []
        lo, hi = halving_range(partner_v, k + 1, fold.pof2)
        if offs[hi] > offs[lo]:
            waits.append(b.recv(partner, work.sub(offs[lo], offs[hi] - offs[lo])))
    return waits


def _rabenseifner_cost(spec: CallSpec, m: CostModel) -> float:
    nbytes = spec.vector_bytes()
    fold = Fold.of(spec.size)
    share = (fold.pof2 - 1) / fold.pof2
    extra = m.message(nbytes) + nbytes * m.gamma if fold.rem else 0.0
    return 2 * fold.steps * m.alpha + share * nbytes * (2 * m.beta + m.gamma) + extra


@register(
    "reduce", "rabenseifner",
    "Reduce-scatter by recursive halving, then binomial gather of the pieces to the root",
    cost=_rabenseifner_cost,
)
def reduce_rabenseifner(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Fold extra ranks, halve, gather the reduced pieces to the root's representative."""
    p, n, root = spec.size, spec.count, spec.root
    b = builder_for(rank, spec)
    fold = Fold.of(p)
    if p == 1:
        b.copy(RECV(0, n), SEND(0, n))
        return b.build()
    if fold.dropped(rank):
        b.send(rank + 1, SEND(0, n))
        if rank == root:
            b.recv(rank + 1, RECV(0, n))
        return b.build()
    vrank, target = fold.vrank(rank), fold.vrank(root)
    pieces = split(n, fold.pof2)
    offs = [*prefix(tuple(pieces)), n]
    work = RECV(0, n) if rank == root else b.tmp(n)
    mine = bit_reverse(vrank, fold.steps)
    acc, deps = fold_in(b, rank, fold, n)
    _, deps = halve(b, vrank, fold, pieces, acc, deps, last=work.sub(offs[mine], pieces[mine]))
    done = gather_pieces(b, vrank, target, fold, offs, work, deps)
    if vrank == target and rank != root:
        b.send(root, work, done)
    return b.build()
