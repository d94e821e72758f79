"""Broadcast: the root's RECV-sized data ends in every rank's RECV area."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..schedule import RECV, SEND, Schedule, ScheduleBuilder
from .patterns import absolute, binomial_children, binomial_parent, ceil_log2, relative
from .registry import CostModel, register
from .spec import CallSpec


def _nbytes(spec: CallSpec) -> int:
    return spec.count * spec.itemsize


@register(
    "bcast", "linear", "The root sends the whole message to every other rank at once",
    cost=lambda s, m: m.message(_nbytes(s), s.size - 1),
)
def bcast_linear(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Root posts p−1 sends of the whole buffer; everyone else receives once."""
    n, root = spec.count, spec.root
    b = ScheduleBuilder(rank, spec.size, *spec.buffer_counts(rank))
    if rank == root:
        b.copy(RECV(0, n), SEND(0, n))
        for peer in range(spec.size):
            if peer != root:
                b.send(peer, SEND(0, n))
    else:
        b.recv(root, RECV(0, n))
    return b.build()


def _binomial_cost(spec: CallSpec, m: CostModel) -> float:
    return m.message(_nbytes(spec), ceil_log2(spec.size))


@register(
    "bcast", "binomial", "Binomial tree: each rank forwards to ⌈log2 p⌉ subtrees, largest first",
    cost=_binomial_cost,
)
def bcast_binomial(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Receive from the binomial parent, then forward to children, largest subtree first."""
    n, root, p = spec.count, spec.root, spec.size
    b = ScheduleBuilder(rank, p, *spec.buffer_counts(rank))
    v = relative(rank, root, p)
    if v == 0:
        b.copy(RECV(0, n), SEND(0, n))
        source, after = SEND(0, n), []
    else:
        got = b.recv(absolute(binomial_parent(v), root, p), RECV(0, n))
        source, after = RECV(0, n), [got]
    for child in binomial_children(v, p):
        b.send(absolute(child, root, p), source, after)
    return b.build()
