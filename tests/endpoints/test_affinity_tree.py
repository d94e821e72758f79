"""Seed 003: affinity domains, their trees, and ``affinity_tree`` against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import collops
from collops import ops
from collops.algorithms import get_algorithm
from collops.algorithms.affinity import build_tree, threads_of_ranks, tree_for
from collops.check.cases import LAST_NONZERO, assert_matches, make_case
from collops.errors import AlgorithmIneligible, ArgumentError
from collops.schedule import run_reference, validate

COLLECTIVES = ("reduce", "allreduce", "bcast", "barrier")


def test_domains_of_a_2x4x2_machine_filled_in_rank_order():
    tree = tree_for(16, {"machine": "2x4x2", "mapping": "fill", "arity": 2})
    thread_level, cores, modules, node = tree.domains
    assert thread_level == ()  # one rank per hardware thread
    assert cores == tuple((2 * c, 2 * c + 1) for c in range(8))
    assert modules == ((0, 2, 4, 6), (8, 10, 12, 14))
    assert node == ((0, 8),)
    assert tree.top == 0


def test_tree_shape_of_a_2x4x2_machine():
    tree = tree_for(16, {"machine": "machine:2x4x2", "arity": 2})
    # inside core 1: thread 3 hangs under 2; across module 0's cores: a binary preorder tree
    assert tree.parent[3] == 2 and tree.joins_at[3] == 1
    assert tree.parent[2] == 0 and tree.parent[4] == 2 and tree.parent[6] == 0
    assert tree.parent[8] == 0 and tree.joins_at[8] == 3
    # rank 0's children: its core mate, then module-level, then node-level children
    assert tree.children[0] == (1, 2, 6, 8)
    assert tree.children[2] == (3, 4)
    assert tree.keeps_rank_order()


def test_arity_shapes_every_domain_tree():
    chain = tree_for(8, {"machine": "1x8x1", "arity": 1})
    assert chain.parent == (-1, 0, 1, 2, 3, 4, 5, 6)
    flat = tree_for(8, {"machine": "1x8x1", "arity": 7})
    assert flat.children[0] == tuple(range(1, 8))


def test_spread_mapping_puts_consecutive_ranks_on_different_modules():
    threads = threads_of_ranks((2, 4, 2), "spread", 16)
    assert threads[:4] == (0, 8, 2, 10)
    tree = tree_for(16, {"machine": "2x4x2", "mapping": "spread"})
    assert tree.domains[1][0] == (0, 8)        # rank 0 shares its core with rank 8
    assert tree.domains[3] == ((0, 1),)         # the modules' leaders are ranks 0 and 1
    assert not tree.keeps_rank_order()


def test_oversubscribed_ranks_share_a_hardware_thread():
    tree = tree_for(6, {"machine": "1x1x2"})
    assert tree.domains[0] == ((0, 1, 2), (3, 4, 5))
    assert tree.domains[1] == ((0, 3),)


def test_explicit_mapping_and_its_errors():
    tree = tree_for(4, {"machine": "2x1x2", "mapping": "0,2,1,3"})
    assert tree.domains[1] == ((0, 2), (1, 3))
    with pytest.raises(ArgumentError, match="lists 3 threads for 4 ranks"):
        tree_for(4, {"machine": "2x1x2", "mapping": "0,1,2"})
    with pytest.raises(ArgumentError, match="thread ids must lie"):
        tree_for(2, {"machine": "1x1x2", "mapping": "0,5"})
    with pytest.raises(ArgumentError, match="factors"):
        tree_for(2, {"machine": "2xfour"})


def test_broadcast_tree_is_led_by_the_root():
    tree = build_tree((2, 4, 2), tuple(range(16)), 2, 13)
    assert tree.top == 13 and tree.parent[13] == -1
    assert tree.parent[12] == 13          # 13 leads its core
    assert 13 in tree.domains[2][1]      # and its module


MACHINES = [
    ({"machine": "2x4x2"}, 16), ({"machine": "2x4x2", "mapping": "spread"}, 16),
    ({"machine": "3x2x2", "arity": 3}, 11), ({"machine": "1x2x2"}, 7),
    ({"machine": "2x2x2x2", "mapping": "spread", "arity": 1}, 13), ({}, 5), ({}, 17),
]


@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize(("params", "p"), MACHINES,
                         ids=[f"{m.get('machine', 'default')}-{m.get('mapping', 'fill')}-p{p}"
                              for m, p in MACHINES])
def test_affinity_tree_against_numpy(collective, params, p):
    algorithm = get_algorithm(collective, "affinity_tree")
    for root, (dtype, op) in enumerate([(np.float64, ops.SUM), (np.int32, ops.MAX)]):
        case = make_case(collective, p, 9, dtype=dtype, op=op, root=root * 4 + 1, seed=root)
        schedules = [algorithm.build(r, case.specs[r], params) for r in range(p)]
        validate(schedules)
        assert_matches(case, run_reference(schedules, case.inputs, case.dtype, case.op))


@pytest.mark.parametrize("collective", ["reduce", "allreduce"])
def test_non_commutative_operator_keeps_rank_order_or_is_refused(collective):
    algorithm = get_algorithm(collective, "affinity_tree")
    case = make_case(collective, 16, 5, dtype=np.int64, op=LAST_NONZERO, root=5, seed=3)
    params = {"machine": "2x4x2", "mapping": "fill"}
    schedules = [algorithm.build(r, case.specs[r], params) for r in range(16)]
    assert_matches(case, run_reference(schedules, case.inputs, case.dtype, case.op))
    with pytest.raises(AlgorithmIneligible, match="non-commutative"):
        algorithm.build(0, case.specs[0], {**params, "mapping": "spread"})


def test_affinity_tree_through_the_runtime_on_a_virtual_machine():
    def program(comm):
        params = {"machine": "2x2x2", "mapping": "spread"}
        x = np.arange(4.0) * (comm.rank + 1)
        total = comm.allreduce(x, algorithm="affinity_tree", **params)
        top = comm.reduce(x, root=3, algorithm="affinity_tree", **params)
        got = comm.bcast(np.arange(3) if comm.rank == 2 else None, root=2,
                         algorithm="affinity_tree", **params)
        comm.barrier(algorithm="affinity_tree", **params)
        return total, top, got

    results = collops.spawn(program, 8, timeout=60)
    want = np.arange(4.0) * 36
    for rank, (total, top, got) in enumerate(results):
        np.testing.assert_array_equal(total, want)
        np.testing.assert_array_equal(got, np.arange(3))
        assert (top is not None) == (rank == 3)
    np.testing.assert_array_equal(results[3][1], want)
