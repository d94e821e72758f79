"""mpi4py's ``MPI.Group`` over collops' `~collops.Group` (an ordered set of job ranks).

Every operation is local. Errors are collops' (`ArgumentError` naming the call), raised as
``MPI.Exception`` subclasses (``ERR_RANK`` for a rank outside the group).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import CollopsError
from ..runtime.groups import GROUP_EMPTY as COLLOPS_GROUP_EMPTY
from ..runtime.groups import Group as CollopsGroup
from .constants import PROC_NULL
from .exceptions import ERR_GROUP, mpi_error, mpi_exception
from .handles import Handle


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except CollopsError as exc:
        raise mpi_error(exc) from None


class Group(Handle):
    """An ordered set of processes: a handle of a collops `~collops.Group`."""

    __slots__ = ("group", "origin", "__weakref__")
    group: CollopsGroup
    origin: Any

    def __init__(self, group: Group | CollopsGroup | None = None, origin: Any = None) -> None:
        """A handle of ``group`` (a facade or collops group; GROUP_NULL's when None).
        ``origin`` is the collops communicator whose ranks it names (what
        ``Intracomm.Create_from_group`` makes its communicator over), kept by the groups made
        from it."""
        if isinstance(group, Group):
            origin = group.origin
            group = group.group
        self.group = _NULL if group is None else group
        self.origin = origin

    def __repr__(self) -> str:
        if not self:
            return "<collops.MPI.Group null>"
        return f"<collops.MPI.Group {list(self.group.ranks)}>"

    def __bool__(self) -> bool:
        return self.group is not _NULL

    def _handle(self) -> Any:
        """What identifies the group (None when null): equal groups, equal handles."""
        return self.group if self else None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Group):
            return NotImplemented
        if not self or not other:
            return not self and not other
        return other.group == self.group

    def __hash__(self) -> int:
        return hash(self.group) if self else 0

    def __reduce__(self) -> Any:
        """Pickled as mpi4py's: GROUP_NULL and GROUP_EMPTY are themselves, copies of them
        equal handles; any other group cannot be pickled (its ranks mean nothing elsewhere)."""
        for name in ("GROUP_NULL", "GROUP_EMPTY"):
            if self is globals().get(name):
                return name
        if not self:
            return Group, ()
        if self.group == COLLOPS_GROUP_EMPTY:
            return Group, (COLLOPS_GROUP_EMPTY,)
        raise ValueError(f"cannot pickle {self!r}: a group of processes belongs to its job")

    def Get_size(self) -> int:
        """Number of members."""
        return self.group.size

    def Get_rank(self) -> int:
        """This process's rank in the group (UNDEFINED if not a member)."""
        return self.group.rank

    @property
    def size(self) -> int:
        """`Get_size`."""
        return self.group.size

    @property
    def rank(self) -> int:
        """`Get_rank`."""
        return self.group.rank

    def Incl(self, ranks: Sequence[int]) -> Group:
        """The members at ``ranks``, in that order."""
        return Group(_call(self.group.incl, ranks), self.origin)

    def Excl(self, ranks: Sequence[int]) -> Group:
        """The members not at ``ranks``, in group order."""
        return Group(_call(self.group.excl, ranks), self.origin)

    def Range_incl(self, ranks: Sequence[tuple[int, int, int]]) -> Group:
        """`Incl` of ``(first, last, stride)`` triples."""
        return Group(_call(self.group.range_incl, ranks), self.origin)

    def Range_excl(self, ranks: Sequence[tuple[int, int, int]]) -> Group:
        """`Excl` of ``(first, last, stride)`` triples."""
        return Group(_call(self.group.range_excl, ranks), self.origin)

    @classmethod
    def Union(cls, group1: Group, group2: Group) -> Group:
        """Members of ``group1``, then those of ``group2`` not in it."""
        return Group(_call(group1.group.union, group2.group), group1.origin)

    @classmethod
    def Intersection(cls, group1: Group, group2: Group) -> Group:
        """Members of ``group1`` also in ``group2``, in ``group1``'s order."""
        return Group(_call(group1.group.intersection, group2.group), group1.origin)

    @classmethod
    def Difference(cls, group1: Group, group2: Group) -> Group:
        """Members of ``group1`` not in ``group2``, in ``group1``'s order."""
        return Group(_call(group1.group.difference, group2.group), group1.origin)

    def Translate_ranks(self, ranks: Sequence[int] | None = None,
                        group: Group | None = None) -> list[int]:
        """The ranks in ``group`` of this group's ``ranks`` (UNDEFINED where absent; PROC_NULL
        stays PROC_NULL; all of this group when ``ranks`` is None; job ranks when ``group``
        is None). Also callable as ``Group.Translate_ranks(group1, ranks1, group2)``."""
        group1, group2 = self, group
        ranks = list(range(group1.size)) if ranks is None else [int(r) for r in ranks]
        real = [r for r in ranks if r != PROC_NULL]
        if group2 is None:  # their job ranks (checked as a translation to group1 itself)
            _call(group1.group.translate_ranks, real, group1.group)
            found = [group1.group.ranks[r] for r in real]
        else:
            found = _call(group1.group.translate_ranks, real, group2.group)
        it = iter(found)
        return [PROC_NULL if r == PROC_NULL else next(it) for r in ranks]

    def Compare(self, group: Group) -> int:
        """IDENT (same members, same order), SIMILAR (same members) or UNEQUAL; also callable
        as ``Group.Compare(group1, group2)``."""
        return _call(self.group.compare, group.group)  # type: ignore[no-any-return]

    def Dup(self) -> Group:
        """A new handle of this group."""
        return Group(self)

    def Free(self) -> None:
        """Release this handle: it becomes null (GROUP_EMPTY and GROUP_NULL cannot be
        freed)."""
        if self is GROUP_EMPTY or not self:
            raise mpi_exception(ERR_GROUP, f"Group.Free: cannot free {self!r}")
        self.group = _NULL


class _NullGroup:
    """Stands in for the collops group of a null (or freed) handle."""

    def __eq__(self, other: object) -> bool:
        return other is self

    def __hash__(self) -> int:
        return 0

    def __getattr__(self, name: str) -> Any:
        raise mpi_exception(ERR_GROUP, f"Group: {name} of a null group")


_NULL: Any = _NullGroup()
GROUP_EMPTY = Group(COLLOPS_GROUP_EMPTY)
GROUP_NULL = Group()
