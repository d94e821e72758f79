"""Peer arithmetic, apart from data movement: who talks to whom, and when.

Small pure functions (ring neighbours, binomial and k-ary trees, recursive doubling partners,
Bruck offsets) shared by the builders and property-tested on their own.
"""

from __future__ import annotations


def ceil_log2(n: int) -> int:
    """Smallest k with 2**k >= n (0 for n <= 1)."""
    return (n - 1).bit_length() if n > 1 else 0


def is_power_of_two(n: int) -> bool:
    """Whether n is a positive power of two."""
    return n > 0 and n & (n - 1) == 0


def ring_neighbours(rank: int, size: int) -> tuple[int, int]:
    """(left, right) neighbours on a ring of ``size`` ranks."""
    return (rank - 1) % size, (rank + 1) % size


def relative(rank: int, root: int, size: int) -> int:
    """Rank renumbered so that ``root`` is 0."""
    return (rank - root) % size


def absolute(vrank: int, root: int, size: int) -> int:
    """Inverse of `relative`."""
    return (vrank + root) % size


def binomial_parent(vrank: int) -> int:
    """Parent of a virtual rank in a binomial tree rooted at 0 (−1 for the root)."""
    if vrank == 0:
        return -1
    return vrank & (vrank - 1)


def binomial_children(vrank: int, size: int) -> list[int]:
    """Children of a virtual rank in a binomial tree rooted at 0, farthest (vrank + 2**k) first."""
    low = vrank & -vrank if vrank else 1 << ceil_log2(size)
    children = []
    mask = low >> 1
    while mask:
        child = vrank | mask
        if child < size:
            children.append(child)
        mask >>= 1
    return children


def binomial_subtree_size(vrank: int, size: int) -> int:
    """Number of virtual ranks in the subtree rooted at ``vrank`` (contiguous from vrank)."""
    low = vrank & -vrank if vrank else 1 << ceil_log2(size)
    return min(low, size - vrank)


def kary_parent(vrank: int, arity: int) -> int:
    """Parent in a k-ary tree (heap numbering) rooted at 0 (−1 for the root)."""
    return -1 if vrank == 0 else (vrank - 1) // arity


def kary_children(vrank: int, size: int, arity: int) -> list[int]:
    """Children in a k-ary tree (heap numbering) of ``size`` nodes."""
    first = vrank * arity + 1
    return [c for c in range(first, first + arity) if c < size]


def recursive_doubling_partners(rank: int, size: int) -> list[int]:
    """Partners of ``rank`` in each round of recursive doubling (size a power of two)."""
    return [rank ^ (1 << k) for k in range(ceil_log2(size))]


def bruck_offsets(size: int) -> list[int]:
    """Distances 1, 2, 4, … < size used by Bruck's algorithms."""
    out, d = [], 1
    while d < size:
        out.append(d)
        d <<= 1
    return out


def even_split(total: int, parts: int) -> list[int]:
    """``total`` items cut into ``parts`` pieces whose sizes differ by at most one, larger first."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def binomial_subtree(vrank: int, size: int) -> range:
    """The virtual ranks of the binomial subtree rooted at ``vrank`` (a contiguous run)."""
    return range(vrank, vrank + binomial_subtree_size(vrank, size))


def dissemination_needed(size: int) -> list[set[int]]:
    """Per dissemination round, the ranks whose state after that round rank 0 depends on.

    In round k every rank ``v`` receives from ``v + 2**k`` (mod ``size``) what that rank holds,
    so after the last round rank 0 holds everyone's data. Element k of the answer is the set of
    ranks whose state *after* round k is needed for rank 0's final state: rank ``v`` need only
    receive in round k if it is in set k, and rank ``x`` need only send in round k if
    ``x − 2**k`` is.
    """
    offsets = bruck_offsets(size)
    needed: list[set[int]] = [set() for _ in offsets]
    wanted = {0}
    for k in range(len(offsets) - 1, -1, -1):
        needed[k] = set(wanted)
        wanted = wanted | {(v + offsets[k]) % size for v in wanted}
    return needed
