"""Property tests of the peer arithmetic in `collops.algorithms.patterns`, sizes 1–64."""

from __future__ import annotations

import math

import pytest

from collops.algorithms.patterns import (
    absolute,
    binomial_children,
    binomial_parent,
    binomial_subtree,
    binomial_subtree_size,
    bruck_offsets,
    ceil_log2,
    dissemination_needed,
    even_split,
    is_power_of_two,
    kary_children,
    kary_parent,
    recursive_doubling_partners,
    relative,
    ring_neighbours,
)

SIZES = range(1, 65)


def descendants(vrank: int, size: int) -> set[int]:
    """Every virtual rank below ``vrank`` in the binomial tree, by walking children."""
    out, todo = set(), [vrank]
    while todo:
        v = todo.pop()
        out.add(v)
        todo.extend(binomial_children(v, size))
    return out


def test_ceil_log2_and_powers_of_two():
    for n in range(1, 300):
        k = ceil_log2(n)
        assert 2 ** k >= n and (k == 0 or 2 ** (k - 1) < n)
        assert is_power_of_two(n) == (2 ** int(math.log2(n)) == n)
    assert ceil_log2(0) == 0 and not is_power_of_two(0)


@pytest.mark.parametrize("size", SIZES)
def test_relative_and_absolute_are_inverse_for_every_root(size):
    for root in range(size):
        vranks = [relative(r, root, size) for r in range(size)]
        assert sorted(vranks) == list(range(size))
        assert vranks[root] == 0
        assert [absolute(v, root, size) for v in vranks] == list(range(size))


@pytest.mark.parametrize("size", SIZES)
def test_binomial_parent_and_children_agree(size):
    for v in range(size):
        children = binomial_children(v, size)
        assert all(binomial_parent(c) == v for c in children)
        distances = [c - v for c in children]
        assert all(is_power_of_two(d) for d in distances)
        assert distances == sorted(distances, reverse=True), "farthest child first"
        assert all(d < (v & -v if v else 2 * size) for d in distances)
        if v:
            parent = binomial_parent(v)
            assert 0 <= parent < v
            assert v in binomial_children(parent, size)
    assert binomial_parent(0) == -1


@pytest.mark.parametrize("size", SIZES)
def test_binomial_tree_spans_all_ranks_with_one_parent_each(size):
    for root in range(size):
        parents: dict[int, list[int]] = {r: [] for r in range(size)}
        for r in range(size):
            v = relative(r, root, size)
            for c in binomial_children(v, size):
                parents[absolute(c, root, size)].append(r)
        assert parents[root] == []
        assert all(len(parents[r]) == 1 for r in range(size) if r != root)
        reached = {absolute(v, root, size) for v in descendants(0, size)}
        assert reached == set(range(size))


@pytest.mark.parametrize("size", SIZES)
def test_binomial_subtrees_are_contiguous_runs(size):
    for v in range(size):
        run = binomial_subtree(v, size)
        assert run.start == v and len(run) == binomial_subtree_size(v, size) >= 1
        assert set(run) == descendants(v, size)
    assert binomial_subtree_size(0, size) == size


@pytest.mark.parametrize("size", SIZES)
def test_binomial_depth_is_logarithmic(size):
    def depth(v: int) -> int:
        return 0 if v == 0 else 1 + depth(binomial_parent(v))

    assert all(depth(v) == bin(v).count("1") for v in range(size))
    assert max(depth(v) for v in range(size)) <= ceil_log2(size)
    assert len(binomial_children(0, size)) == ceil_log2(size)


@pytest.mark.parametrize("arity", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("size", SIZES)
def test_kary_tree_is_a_spanning_tree(size, arity):
    seen = {0}
    for v in range(size):
        children = kary_children(v, size, arity)
        assert len(children) <= arity
        for c in children:
            assert kary_parent(c, arity) == v
            assert c not in seen
            seen.add(c)
    assert seen == set(range(size))
    assert kary_parent(0, arity) == -1


@pytest.mark.parametrize("size", SIZES)
def test_ring_neighbours_form_one_cycle(size):
    for r in range(size):
        left, right = ring_neighbours(r, size)
        assert ring_neighbours(right, size)[0] == r
        assert ring_neighbours(left, size)[1] == r
    visited, r = [], 0
    for _ in range(size):
        visited.append(r)
        r = ring_neighbours(r, size)[1]
    assert r == 0 and sorted(visited) == list(range(size))


@pytest.mark.parametrize("size", SIZES)
def test_bruck_offsets_are_powers_of_two_below_size(size):
    offsets = bruck_offsets(size)
    assert offsets == [2 ** k for k in range(ceil_log2(size))]
    assert all(d < size for d in offsets)
    assert sum(offsets) + 1 >= size, "windows doubling from 1 cover every rank"


@pytest.mark.parametrize("size", [1, 2, 4, 8, 16, 32, 64])
def test_recursive_doubling_partners_pair_up(size):
    for r in range(size):
        partners = recursive_doubling_partners(r, size)
        assert len(partners) == ceil_log2(size)
        for k, q in enumerate(partners):
            assert 0 <= q < size and recursive_doubling_partners(q, size)[k] == r


@pytest.mark.parametrize("size", SIZES)
def test_even_split(size):
    for total in (0, 1, size - 1, size, 3 * size + 2):
        pieces = even_split(total, size)
        assert len(pieces) == size and sum(pieces) == total
        assert max(pieces) - min(pieces) <= 1
        assert pieces == sorted(pieces, reverse=True)


@pytest.mark.parametrize("size", SIZES)
def test_dissemination_needed_feeds_rank_zero_everything(size):
    """Replaying only the needed receives still gives rank 0 every rank's data."""
    offsets = bruck_offsets(size)
    needed = dissemination_needed(size)
    assert len(needed) == len(offsets)
    holds = {v: {v} for v in range(size)}
    for k, d in enumerate(offsets):
        holds = {v: holds[v] | holds[(v + d) % size] if v in needed[k] else holds[v]
                 for v in range(size)}
        for v in needed[k]:
            assert len(holds[v]) == min(size, 2 ** (k + 1)), "a needed window is full"
    assert holds[0] == set(range(size))
    if needed:
        assert needed[-1] == {0}
        for earlier, later in zip(needed, needed[1:], strict=False):
            assert later <= earlier
    if is_power_of_two(size):  # pruned to a binomial tree: each rank sends at most once
        senders = [sum((x - d) % size in needed[k] for k, d in enumerate(offsets))
                   for x in range(size)]
        assert all(n <= 1 for n in senders)
