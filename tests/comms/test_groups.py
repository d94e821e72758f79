"""Groups against a reference written with Python lists and sets (MPI's definitions: results
keep the first group's order; a union appends the second group's new ranks in its order)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import collops
from collops.errors import ArgumentError
from collops.runtime import groups
from collops.runtime.groups import Group

ranks = st.lists(st.integers(0, 40), unique=True, max_size=12)


def _group(rs, me=0):
    return Group(rs, me)


@given(ranks, ranks)
def test_set_operations_match_the_reference(a, b):
    ga, gb = _group(a), _group(b)
    assert list(ga.union(gb).ranks) == a + [r for r in b if r not in set(a)]
    assert list(ga.intersection(gb).ranks) == [r for r in a if r in set(b)]
    assert list(ga.difference(gb).ranks) == [r for r in a if r not in set(b)]
    expected = (groups.IDENT if a == b else groups.SIMILAR if set(a) == set(b) else groups.UNEQUAL)
    assert ga.compare(gb) == expected


@given(ranks, st.data())
def test_incl_excl_translate(a, data):
    g = _group(a)
    picked = data.draw(st.lists(st.integers(0, max(0, len(a) - 1)), unique=True,
                                max_size=len(a)))
    assert list(g.incl(picked).ranks) == [a[i] for i in picked]
    assert list(g.excl(picked).ranks) == [r for i, r in enumerate(a) if i not in set(picked)]
    other = _group(data.draw(ranks))
    want = [other.ranks.index(a[i]) if a[i] in other.ranks else groups.UNDEFINED for i in picked]
    assert g.translate_ranks(picked, other) == want


@given(st.integers(1, 30), st.data())
def test_range_incl_and_excl_follow_the_triples(n, data):
    g = _group(list(range(100, 100 + n)))
    first = data.draw(st.integers(0, n - 1))
    last = data.draw(st.integers(0, n - 1))
    stride = data.draw(st.integers(1, 4)) * (1 if last >= first else -1)
    picked = list(range(first, last + (1 if stride > 0 else -1), stride))
    assert list(g.range_incl([(first, last, stride)]).ranks) == [100 + i for i in picked]
    assert list(g.range_excl([(first, last, stride)]).ranks) == [
        100 + i for i in range(n) if i not in set(picked)]


def test_rank_size_empty_and_constants():
    g = Group([7, 3, 5], me=3)
    assert (g.size, g.rank, len(g)) == (3, 1, 3)
    assert Group([7], me=3).rank == groups.UNDEFINED
    assert groups.GROUP_EMPTY.size == 0 and groups.GROUP_EMPTY.rank == groups.UNDEFINED
    assert g.difference(g) == groups.GROUP_EMPTY
    assert (groups.IDENT, groups.CONGRUENT, groups.SIMILAR, groups.UNEQUAL) == (0, 1, 2, 3)
    assert collops.Group is Group and collops.IDENT == groups.IDENT
    assert collops.UNDEFINED == groups.UNDEFINED


@pytest.mark.parametrize("call, argument", [
    (lambda g: g.incl([0, 0]), "ranks"), (lambda g: g.incl([5]), "ranks"),
    (lambda g: g.excl("ab"), "ranks"), (lambda g: g.range_incl([(0, 2, 0)]), "ranges"),
    (lambda g: g.range_incl([(0, 2)]), "ranges"), (lambda g: g.range_excl(3), "ranges"),
    (lambda g: g.union([1]), "other"), (lambda g: g.translate_ranks([9], g), "ranks"),
    (lambda g: g.compare(None), "other")])
def test_bad_arguments_are_named(call, argument):
    with pytest.raises(ArgumentError, match=f"argument {argument}="):
        call(Group([4, 6, 8], me=4))


def test_a_communicators_group_and_its_subgroups():
    def main(comm):
        g = comm.group
        sub = comm.split(comm.rank % 2)
        got = (list(g.ranks), g.rank, list(sub.group.ranks), sub.group.rank,
               sub.group.translate_ranks(list(range(sub.size)), g))
        sub.free()
        return got

    for rank, (world, me, ranks_, sub_rank, translated) in enumerate(collops.spawn(main, 3)):
        assert world == [0, 1, 2] and me == rank
        assert ranks_ == [r for r in range(3) if r % 2 == rank % 2]
        assert sub_rank == ranks_.index(rank) and translated == ranks_
