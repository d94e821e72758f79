"""Process groups: ordered sets of a job's ranks, MPI's ``MPI_Group`` as a value.

A `Group` holds job (transport) ranks in order; a rank *of the group* is a position in it.
`comm.group` is the communicator's group; `incl`, `excl`, `range_incl`, `range_excl` pick
ranks of a group, and `union`, `intersection`, `difference` combine two groups as MPI does:
the result keeps the first group's order, then (union) the second group's new ranks in its
order. Groups are immutable and cost nothing to make; a communicator over one comes from
`comm.create_group(group)` or `comm.create(group)`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import ArgumentError
from .arguments import checked_int, checked_ints

#: `Group.compare`/`Comm.compare`: same ranks in the same order, and the same object
#: (communicators) — MPICH's values of MPI_IDENT, MPI_CONGRUENT, MPI_SIMILAR, MPI_UNEQUAL
IDENT = 0
#: communicators over the same ranks in the same order, with different contexts
CONGRUENT = 1
#: the same ranks in another order
SIMILAR = 2
#: anything else
UNEQUAL = 3
#: a rank not in the group (MPI_UNDEFINED, MPICH's value)
UNDEFINED = -32766


class Group:
    """An ordered set of job ranks; ``me`` is the calling process's job rank."""

    __slots__ = ("ranks", "_me", "_index")

    def __init__(self, ranks: Iterable[int], me: int) -> None:
        self.ranks = tuple(int(r) for r in ranks)
        self._me = me
        self._index = {r: i for i, r in enumerate(self.ranks)}
        if len(self._index) != len(self.ranks):
            raise ArgumentError("Group", "ranks", self.ranks, "ranks repeat")

    def __repr__(self) -> str:
        return f"Group({list(self.ranks)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Group) and self.ranks == other.ranks

    def __hash__(self) -> int:
        return hash(self.ranks)

    def __len__(self) -> int:
        return len(self.ranks)

    @property
    def size(self) -> int:
        """The number of ranks in the group."""
        return len(self.ranks)

    @property
    def rank(self) -> int:
        """The calling process's rank in the group (`UNDEFINED` if it is not a member)."""
        return self._index.get(self._me, UNDEFINED)

    def _derived(self, ranks: Iterable[int]) -> Group:
        return Group(ranks, self._me)

    def _positions(self, call: str, name: str, ranks: Any) -> list[int]:
        """``ranks`` checked: distinct ranks of this group."""
        values = checked_ints(call, name, ranks, self._me)
        bad = [r for r in values if not 0 <= r < self.size]
        if bad:
            raise ArgumentError(call, name, values, f"{bad} not ranks of a group of "
                                f"{self.size}", self._me)
        if len(set(values)) != len(values):
            raise ArgumentError(call, name, values, "ranks repeat", self._me)
        return values

    def incl(self, ranks: Sequence[int]) -> Group:
        """The group of this group's ``ranks``, in that order."""
        return self._derived(self.ranks[r] for r in self._positions("Group.incl", "ranks", ranks))

    def excl(self, ranks: Sequence[int]) -> Group:
        """This group without its ``ranks`` (order kept)."""
        gone = set(self._positions("Group.excl", "ranks", ranks))
        return self._derived(r for i, r in enumerate(self.ranks) if i not in gone)

    def _ranges(self, call: str, ranges: Any) -> list[int]:
        """The ranks ``(first, last, stride)`` triples name, in order (checked)."""
        picked: list[int] = []
        try:
            triples = [tuple(t) for t in ranges]
        except TypeError:
            raise ArgumentError(call, "ranges", ranges, "must be (first, last, stride) "
                                "triples", self._me) from None
        for t in triples:
            if len(t) != 3:
                raise ArgumentError(call, "ranges", t, "must be a (first, last, stride) "
                                    "triple", self._me)
            first, last, stride = (checked_int(call, "ranges", v, self._me) for v in t)
            if stride == 0:
                raise ArgumentError(call, "ranges", t, "stride must not be 0", self._me)
            picked.extend(range(first, last + (1 if stride > 0 else -1), stride))
        return self._positions(call, "ranges", picked)

    def range_incl(self, ranges: Sequence[tuple[int, int, int]]) -> Group:
        """`incl` of the ranks ``(first, last, stride)`` triples name (last included)."""
        return self._derived(self.ranks[r] for r in self._ranges("Group.range_incl", ranges))

    def range_excl(self, ranges: Sequence[tuple[int, int, int]]) -> Group:
        """`excl` of the ranks ``(first, last, stride)`` triples name (last included)."""
        gone = set(self._ranges("Group.range_excl", ranges))
        return self._derived(r for i, r in enumerate(self.ranks) if i not in gone)

    def _other(self, call: str, other: Any) -> Group:
        if not isinstance(other, Group):
            raise ArgumentError(call, "other", type(other).__name__, "must be a Group", self._me)
        return other

    def union(self, other: Group) -> Group:
        """This group's ranks, then ``other``'s that are not in it (each in its order)."""
        other = self._other("Group.union", other)
        return self._derived([*self.ranks, *(r for r in other.ranks if r not in self._index)])

    def intersection(self, other: Group) -> Group:
        """This group's ranks that are also in ``other`` (this group's order)."""
        other = self._other("Group.intersection", other)
        return self._derived(r for r in self.ranks if r in other._index)

    def difference(self, other: Group) -> Group:
        """This group's ranks that are not in ``other`` (this group's order)."""
        other = self._other("Group.difference", other)
        return self._derived(r for r in self.ranks if r not in other._index)

    def translate_ranks(self, ranks: Sequence[int], other: Group) -> list[int]:
        """The rank in ``other`` of each of this group's ``ranks`` (`UNDEFINED`: not in it)."""
        other = self._other("Group.translate_ranks", other)
        values = checked_ints("Group.translate_ranks", "ranks", ranks, self._me)
        bad = [r for r in values if not 0 <= r < self.size]
        if bad:
            raise ArgumentError("Group.translate_ranks", "ranks", values, f"{bad} not ranks "
                                f"of a group of {self.size}", self._me)
        return [other._index.get(self.ranks[r], UNDEFINED) for r in values]

    def compare(self, other: Group) -> int:
        """`IDENT` (same ranks, same order), `SIMILAR` (same ranks) or `UNEQUAL`."""
        other = self._other("Group.compare", other)
        if self.ranks == other.ranks:
            return IDENT
        return SIMILAR if set(self.ranks) == set(other.ranks) else UNEQUAL


#: the group with no ranks (MPI_GROUP_EMPTY)
GROUP_EMPTY = Group((), UNDEFINED)
