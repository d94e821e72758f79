"""scan and exscan: prefix reductions in rank order.

``scan`` leaves ``x0 ∘ … ∘ x(r)`` in rank r's RECV area, ``exscan`` leaves ``x0 ∘ … ∘ x(r−1)``
(rank 0's RECV area is left untouched: MPI leaves it undefined). Both algorithms combine
contiguous runs of ranks with the lower run on the left, so non-commutative operators work.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..schedule import RECV, SEND, Region, Schedule
from .patterns import ceil_log2
from .registry import CostModel, register
from .spec import CallSpec, builder_for

BOTH = ("scan", "exscan")


def _step_cost(spec: CallSpec, m: CostModel) -> float:
    nbytes = spec.count * spec.itemsize
    return m.message(nbytes) + nbytes * m.gamma


@register(
    BOTH, "linear",
    "A chain: rank r receives the prefix from r−1, combines its own vector, forwards to r+1",
    cost=lambda s, m: max(s.size - 1, 0) * _step_cost(s, m),
)
def scan_linear(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Prefix in from the left neighbour, own vector on its right, prefix out to the right."""
    p, n = spec.size, spec.count
    exclusive = spec.collective == "exscan"
    b = builder_for(rank, spec)
    own = SEND(0, n)
    if rank == 0:
        forward: Region = own
        done = [] if exclusive else [b.copy(RECV(0, n), own)]
    else:
        got = b.recv(rank - 1, RECV(0, n))
        if exclusive:
            forward = RECV(0, n)
            if rank < p - 1:
                forward = b.tmp(n)
                copied = b.copy(forward, own)
                done = [b.reduce(forward, RECV(0, n), [got, copied], reverse=True)]
            else:
                done = [got]
        else:
            forward, done = RECV(0, n), [b.reduce(RECV(0, n), own, [got])]
    if rank < p - 1:
        b.send(rank + 1, forward, done)
    return b.build()


@register(
    BOTH, "recursive_doubling",
    "Hillis–Steele: in step k send the partial prefix to r+2^k, combine the one from r−2^k",
    cost=lambda s, m: ceil_log2(s.size) * _step_cost(s, m),
)
def scan_recursive_doubling(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Partial prefixes over runs of 2^k ranks double each step; exscan also keeps x0…x(r−1)."""
    p, n = spec.size, spec.count
    exclusive = spec.collective == "exscan"
    b = builder_for(rank, spec)
    partial, partial_done = SEND(0, n), list[int]()
    # the last step that receives (largest 2^k <= rank) leaves the inclusive prefix
    last_in = rank.bit_length() - 1
    if rank == 0 and not exclusive:
        partial_done = [b.copy(RECV(0, n), partial)]
    prefix_done: list[int] = []  # exscan: steps completing RECV = x0 … x(r−1) so far
    distance, k = 1, 0
    while distance < p:
        if rank + distance < p:
            b.send(rank + distance, partial, partial_done)
        if rank - distance >= 0:
            into = RECV(0, n) if (k == last_in and not exclusive) else b.tmp(n)
            got = b.recv(rank - distance, into)
            readers = [got]
            if exclusive:
                if prefix_done:
                    prefix_done = [b.reduce(RECV(0, n), into, [got, *prefix_done],
                                            reverse=True)]
                else:
                    prefix_done = [b.copy(RECV(0, n), into, [got])]
                readers = prefix_done
            if not exclusive or rank + 2 * distance < p:
                partial_done = [b.reduce(into, partial, [*readers, *partial_done])]
                partial = into
        distance, k = distance * 2, k + 1
    return b.build()
