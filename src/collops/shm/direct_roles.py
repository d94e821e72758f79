"""Who does what in a ``shm_direct`` call (`collops.shm.direct`): for one call signature and
one rank, the members whose slots it reads, whose words it waits for, who reads its own slot,
whether it publishes, confirms or announces, and the bytes it writes — worked out from the
call's spec alone, the same on every rank.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..algorithms.spec import CallSpec
from . import direct_vector as vector


def contribution_bytes(spec: CallSpec) -> int:
    """Bytes one rank writes into its slot (the largest over the ranks)."""
    c, n = spec.collective, spec.count * spec.itemsize
    if c in vector.REGULAR:
        return vector.contribution_bytes(spec)
    if c == "barrier":
        return 0
    if c in ("scatter", "alltoall", "reduce_scatter_block"):
        return n * spec.size
    return n


def awaits(spec: CallSpec, rank: int) -> list[int]:
    """The members whose slot ``rank`` reads (itself included where it reads its own)."""
    c, p = vector.regular(spec.collective), spec.size
    if c in ("bcast", "scatter"):
        return [] if rank == spec.root else [spec.root]
    if c in ("gather", "reduce"):
        return list(range(p)) if rank == spec.root else []
    if c == "scan":
        return list(range(rank + 1))
    if c == "exscan":
        return list(range(rank))
    return list(range(p))


def waits_for(spec: CallSpec, rank: int) -> list[int]:
    """The other members whose word for the call ``rank`` waits for: those whose slots it
    reads, and a gather's or reduce's non-root its root (`names_its_root`)."""
    if names_its_root(spec, rank):
        return [spec.root]
    return [j for j in awaits(spec, rank) if j != rank]


def names_its_root(spec: CallSpec, rank: int) -> bool:
    """Whether ``rank`` is a gather's or reduce's non-root, which reads nothing yet waits for
    its root's word for the call (the fingerprint carries the root): without it, ranks that
    each name another as the root would all return None as if the call had succeeded. It
    costs a non-root the wait for its root to begin the call, not a round trip; a non-root
    whose root agrees with it may complete while a third rank that named another root raises,
    as an MPI non-root would (see `collops.shm.direct_area`)."""
    return (vector.regular(spec.collective) in ("gather", "reduce") and spec.size > 1
            and rank != spec.root)


def readers(spec: CallSpec, rank: int) -> tuple[int, ...]:
    """The other members that read or look at ``rank``'s slot (it stays theirs until they
    acknowledge)."""
    return tuple(m for m in range(spec.size) if m != rank and rank in waits_for(spec, m))


def publishes(spec: CallSpec, rank: int) -> bool:
    """Whether ``rank`` stores its contribution and word for the call."""
    return bool(readers(spec, rank)) or rank in awaits(spec, rank)


def is_root(spec: CallSpec, rank: int) -> bool:
    """Whether ``rank`` is the root of a bcast or scatter: the rank that writes the data (and
    `confirms` it, unless it is alone)."""
    return vector.regular(spec.collective) in ("bcast", "scatter") and rank == spec.root


def confirms(spec: CallSpec, rank: int) -> bool:
    """Whether ``rank`` is the root of a bcast or scatter, which completes only once every
    reader has found its call in its slot: ranks that disagree on the root then meet each
    other's word (the call number with another fingerprint) and raise `CollectiveMismatch`
    naming both roots, instead of returning different data. Readers publish nothing for it,
    so no slot is taken out of call order (a reader's call may start after its later calls);
    they say they found the call before they copy it (`announces`), so the root does not
    wait for their copies. Root 0 on the compiled route may wait at its next call instead
    (`collops.shm.direct.root_defers`)."""
    return is_root(spec, rank) and spec.size > 1


def announces(spec: CallSpec, rank: int) -> bool:
    """Whether ``rank`` reads the slot of a root that confirms (`confirms`): it marks its
    acknowledgement word `ARRIVED` once it finds the call, before it copies."""
    return vector.regular(spec.collective) in ("bcast", "scatter") and rank != spec.root


def slot_bytes(spec: CallSpec, rank: int) -> int:
    """The bytes ``rank`` copies into its slot for a call of ``spec``."""
    if not publishes(spec, rank):
        return 0
    if spec.collective in vector.REGULAR:
        return vector.own_bytes(spec, rank)
    return contribution_bytes(spec)


@dataclass(frozen=True)
class Role:
    """What a call signature asks of one rank in the direct areas."""

    fingerprint: int
    #: whether the rank writes its slot (someone reads it)
    publishes: bool
    #: the members whose slots it reads, itself included where it reads its own
    awaits: tuple[int, ...]
    #: those of them other than itself: the members it waits for
    others: tuple[int, ...]
    #: the other members that read its slot
    readers: tuple[int, ...]
    #: whether the call completes only once every reader found it (`confirms`)
    confirms: bool
    #: whether the rank says it found the call before it reads it (`announces`)
    announces: bool
    #: how errors name the call
    what: str
