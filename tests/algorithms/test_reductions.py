"""Reduction algorithms beyond the registry matrix: parameters, rank order, shapes and volumes.

The matrix in test_every_algorithm.py runs a few cases per size; here the cases that decide
the rank-order logic (a non-commutative operator with every root, counts below and around p)
and each algorithm's promised message pattern are checked directly.
"""

from __future__ import annotations

import numpy as np
import pytest

from collops.algorithms import algorithms, get_algorithm
from collops.algorithms.reduce import contiguous_kary_shape, tree_depth
from collops.algorithms.reduce_scatter import Fold, bit_reverse
from collops.check.cases import LAST_NONZERO, assert_matches, make_case
from collops.schedule import StepKind, run_reference, validate

REDUCING = ("reduce", "allreduce", "reduce_scatter", "reduce_scatter_block", "scan", "exscan")
ORDER_SIZES = [2, 3, 5, 6, 7, 9, 12, 13]


def run(algorithm, case, params=None):
    schedules = [algorithm.build(r, case.specs[r], params) for r in range(len(case.specs))]
    validate(schedules)
    assert_matches(case, run_reference(schedules, case.inputs, case.dtype, case.op))
    return schedules


def sparse_case(collective, p, count, root=0, seed=0):
    """LAST_NONZERO on mostly-zero data: the answer depends on the order of the ranks."""
    case = make_case(collective, p, count, dtype=np.int64, op=LAST_NONZERO, root=root,
                     uneven=True, seed=seed)
    rng = np.random.default_rng(seed)
    for data in case.inputs:
        if data is not None:
            data[rng.random(len(data)) < 0.7] = 0
    return make_like(case)


def make_like(case):
    """Recompute a case's expected outputs after its inputs were edited."""
    from functools import reduce as fold

    op, p, inputs = case.op, len(case.specs), case.inputs
    spec = case.specs[0]
    if case.collective in ("reduce_scatter", "reduce_scatter_block"):
        total = fold(op, inputs)
        offs = np.cumsum([0, *spec.counts])
        case.expected = [total[offs[r]: offs[r + 1]] for r in range(p)]
    elif case.collective == "reduce":
        total = fold(op, inputs)
        case.expected = [total if r == spec.root else total[:0] for r in range(p)]
    elif case.collective == "allreduce":
        case.expected = [fold(op, inputs)] * p
    elif case.collective == "scan":
        case.expected = [fold(op, inputs[: r + 1]) for r in range(p)]
    else:
        case.expected = [None] + [fold(op, inputs[:r]) for r in range(1, p)]
    return case


ORDERED = [a for c in REDUCING for a in algorithms(c)
           if a.name in {"binomial", "nary_tree", "rabenseifner", "recursive_doubling",
                         "reduce_bcast", "recursive_halving", "pairwise", "linear"}]


@pytest.mark.parametrize("algorithm", ORDERED, ids=lambda a: f"{a.collective}.{a.name}")
@pytest.mark.parametrize("p", ORDER_SIZES)
def test_non_commutative_rank_order(algorithm, p):
    roots = range(p) if algorithm.collective == "reduce" else [0]
    for root in roots:
        for count in (1, p - 1, 2 * p + 3):
            case = sparse_case(algorithm.collective, p, count, root, seed=root * 7 + count)
            assert algorithm.eligible(case.specs[0])
            run(algorithm, case)


@pytest.mark.parametrize("arity", [1, 2, 3, 5, 16])
@pytest.mark.parametrize("p", [1, 2, 6, 11, 17])
def test_nary_tree_every_arity(arity, p):
    algorithm = get_algorithm("reduce", "nary_tree")
    for root in {0, p // 2, p - 1}:
        run(algorithm, sparse_case("reduce", p, 5, root, seed=arity + root), {"arity": arity})


@pytest.mark.parametrize("arity", [1, 2, 3, 4])
@pytest.mark.parametrize("p", range(1, 30))
def test_contiguous_kary_tree_is_a_tree_of_contiguous_runs(arity, p):
    shape = contiguous_kary_shape(arity)
    parents, kids = zip(*(shape(v, p) for v in range(p)), strict=True)
    assert parents[0] == -1
    for v in range(p):
        assert len(kids[v]) <= arity
        assert kids[v] == sorted(kids[v])
        for c in kids[v]:
            assert parents[c] == v
    # subtree of v = [v, v + span) and the children's subtrees tile it in order
    spans = [0] * p
    for v in reversed(range(p)):
        spans[v] = 1 + sum(spans[c] for c in kids[v])
        edge = v + 1
        for c in kids[v]:
            assert c == edge
            edge += spans[c]
        assert edge == v + spans[v]
    depth = max(_depth(parents, v) for v in range(p))
    assert depth == tree_depth(p, arity)


def _depth(parents, v):
    d = 0
    while parents[v] >= 0:
        v, d = parents[v], d + 1
    return d


def test_nary_tree_rejects_arity_zero():
    with pytest.raises(ValueError, match="arity"):
        get_algorithm("reduce", "nary_tree").build(0, make_case("reduce", 2, 1).specs[0],
                                                   {"arity": 0})


def test_ring_declares_commutativity():
    for c in ("allreduce", "reduce_scatter"):
        case = make_case(c, 4, 4, dtype=np.int64, op=LAST_NONZERO)
        assert not get_algorithm(c, "ring").eligible(case.specs[0])


def test_fold_maps_ranks_in_order():
    for p in range(1, 40):
        fold = Fold.of(p)
        assert fold.pof2 <= p < 2 * fold.pof2
        covered = [r for v in range(fold.pof2) for r in fold.ranks_of(v)]
        assert covered == list(range(p))
        for v in range(fold.pof2):
            assert fold.vrank(fold.real(v)) == v and not fold.dropped(fold.real(v))


def test_bit_reverse():
    assert [bit_reverse(v, 3) for v in range(8)] == [0, 4, 2, 6, 1, 5, 3, 7]


def _sent_elements(schedules):
    return [int(s.count[s.kind == StepKind.SEND].sum()) for s in schedules]


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_bandwidth_optimal_volumes(p):
    n = 64 * p
    share = n * (p - 1) // p
    for name, factor in (("rabenseifner", 2), ("ring", 2)):
        case = make_case("allreduce", p, n)
        schedules = run(get_algorithm("allreduce", name), case)
        assert _sent_elements(schedules) == [factor * share] * p
    for name in ("recursive_halving", "ring", "pairwise"):
        case = make_case("reduce_scatter_block", p, 64)
        schedules = run(get_algorithm("reduce_scatter_block", name), case)
        assert _sent_elements(schedules) == [share] * p


@pytest.mark.parametrize("p", [2, 5, 8, 13])
def test_tree_message_counts(p):
    case = make_case("reduce", p, 3, root=p - 1)
    schedules = run(get_algorithm("reduce", "binomial"), case)
    sends = [int((s.kind == StepKind.SEND).sum()) for s in schedules]
    assert sends[p - 1] == 0 and sum(sends) == p - 1  # commutative: one message per non-root
    chain = run(get_algorithm("reduce", "nary_tree"), case, {"arity": 1})
    assert max(int((s.kind == StepKind.RECV).sum()) for s in chain) == 1


@pytest.mark.parametrize("p", [3, 6, 16])
def test_reduce_bcast_drops_the_root_copy(p):
    case = make_case("allreduce", p, 4)
    schedules = run(get_algorithm("allreduce", "reduce_bcast"), case)
    root = schedules[0]
    assert int((root.kind == StepKind.COPY).sum()) == 0  # bcast's SEND→RECV copy vanished
    assert int((root.kind == StepKind.SEND).sum()) == len(
        [r for r in range(1, p) if r & (r - 1) == 0])
