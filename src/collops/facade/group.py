"""mpi4py's ``MPI.Group``: an ordered set of processes, computed locally.

A group is the tuple of the transport ranks of its members (collops' own ``Comm`` keeps its
members the same way), so every operation here is local and needs no communication.
"""

from __future__ import annotations

from collections.abc import Sequence

from .constants import IDENT, PROC_NULL, SIMILAR, UNDEFINED, UNEQUAL
from .exceptions import ERR_ARG, ERR_GROUP, ERR_RANK, mpi_exception


class Group:
    """An ordered set of processes (transport ranks), with this process's place in it."""

    __slots__ = ("members", "me")
    members: tuple[int, ...]
    me: int

    def __init__(self, group: Group | None = None, *, members: Sequence[int] = (),
                 me: int = -1) -> None:
        """A new handle of ``group`` (GROUP_EMPTY's members when None)."""
        self.members: tuple[int, ...] = tuple(members) if group is None else group.members
        self.me = me if group is None else group.me

    def __repr__(self) -> str:
        return f"<collops.MPI.Group {list(self.members)}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Group) and other.members == self.members

    def __hash__(self) -> int:
        return hash(self.members)

    def _new(self, members: Sequence[int]) -> Group:
        return Group(members=members, me=self.me)

    def Get_size(self) -> int:
        """Number of members."""
        return len(self.members)

    def Get_rank(self) -> int:
        """This process's rank in the group (UNDEFINED if not a member)."""
        try:
            return self.members.index(self.me)
        except ValueError:
            return UNDEFINED

    @property
    def size(self) -> int:
        """`Get_size`."""
        return self.Get_size()

    @property
    def rank(self) -> int:
        """`Get_rank`."""
        return self.Get_rank()

    def _check(self, ranks: Sequence[int], call: str) -> list[int]:
        ranks = [int(r) for r in ranks]
        for r in ranks:
            if not 0 <= r < len(self.members):
                raise mpi_exception(ERR_RANK, f"Group.{call}: rank {r} is not in a group of "
                                    f"{len(self.members)}")
        if len(set(ranks)) != len(ranks):
            raise mpi_exception(ERR_RANK, f"Group.{call}: ranks {ranks} repeat a rank")
        return ranks

    def Incl(self, ranks: Sequence[int]) -> Group:
        """The members at ``ranks``, in that order."""
        return self._new([self.members[r] for r in self._check(ranks, "Incl")])

    def Excl(self, ranks: Sequence[int]) -> Group:
        """The members not at ``ranks``, in group order."""
        gone = set(self._check(ranks, "Excl"))
        return self._new([m for i, m in enumerate(self.members) if i not in gone])

    @staticmethod
    def _ranges(ranks: Sequence[tuple[int, int, int]], call: str) -> list[int]:
        out: list[int] = []
        for first, last, stride in ranks:
            if stride == 0:
                raise mpi_exception(ERR_ARG, f"Group.{call}: a stride of 0")
            out.extend(range(first, last + (1 if stride > 0 else -1), stride))
        return out

    def Range_incl(self, ranks: Sequence[tuple[int, int, int]]) -> Group:
        """`Incl` of ``(first, last, stride)`` triples."""
        return self.Incl(self._ranges(ranks, "Range_incl"))

    def Range_excl(self, ranks: Sequence[tuple[int, int, int]]) -> Group:
        """`Excl` of ``(first, last, stride)`` triples."""
        return self.Excl(self._ranges(ranks, "Range_excl"))

    @classmethod
    def Union(cls, group1: Group, group2: Group) -> Group:
        """Members of ``group1``, then those of ``group2`` not in it."""
        extra = [m for m in group2.members if m not in group1.members]
        return group1._new(group1.members + tuple(extra))

    @classmethod
    def Intersection(cls, group1: Group, group2: Group) -> Group:
        """Members of ``group1`` also in ``group2``, in ``group1``'s order."""
        return group1._new([m for m in group1.members if m in group2.members])

    @classmethod
    def Difference(cls, group1: Group, group2: Group) -> Group:
        """Members of ``group1`` not in ``group2``, in ``group1``'s order."""
        return group1._new([m for m in group1.members if m not in group2.members])

    @classmethod
    def Translate_ranks(cls, group1: Group, ranks1: Sequence[int] | None = None,
                        group2: Group | None = None) -> list[int]:
        """The ranks in ``group2`` of ``group1``'s ``ranks1`` (UNDEFINED where absent)."""
        if ranks1 is None:
            ranks1 = range(len(group1.members))
        out = []
        for r in ranks1:
            if r == PROC_NULL:
                out.append(PROC_NULL)
                continue
            if not 0 <= r < len(group1.members):
                raise mpi_exception(ERR_RANK, f"Group.Translate_ranks: rank {r} is not in a "
                                    f"group of {len(group1.members)}")
            member = group1.members[r]
            if group2 is None:
                out.append(member)
            else:
                out.append(group2.members.index(member) if member in group2.members
                           else UNDEFINED)
        return out

    @classmethod
    def Compare(cls, group1: Group, group2: Group) -> int:
        """IDENT (same members, same order), SIMILAR (same members) or UNEQUAL."""
        if group1.members == group2.members:
            return IDENT
        if set(group1.members) == set(group2.members):
            return SIMILAR
        return UNEQUAL

    def Dup(self) -> Group:
        """A new handle of this group."""
        return Group(self)

    def Free(self) -> None:
        """Release this handle."""
        if self is GROUP_EMPTY:
            raise mpi_exception(ERR_GROUP, "Group.Free: cannot free GROUP_EMPTY")


GROUP_EMPTY = Group()
GROUP_NULL = Group()
