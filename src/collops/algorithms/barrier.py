"""Barrier: no rank leaves before every rank has entered; all messages carry zero elements."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..schedule import RECV, SEND, Schedule, ScheduleBuilder
from .patterns import binomial_children, binomial_parent, bruck_offsets, ceil_log2
from .registry import register
from .spec import CallSpec

NOTHING_SENT = SEND(0, 0)
NOTHING_RECEIVED = RECV(0, 0)


@register(
    "barrier", "dissemination",
    "⌈log2 p⌉ rounds; in round k each rank signals rank+2^k and waits for rank−2^k",
    cost=lambda s, m: ceil_log2(s.size) * m.alpha,
)
def barrier_dissemination(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Each round's signal waits for the previous round's signal to arrive."""
    p = spec.size
    b = ScheduleBuilder(rank, p)
    for distance in bruck_offsets(p):
        with b.round():
            b.send((rank + distance) % p, NOTHING_SENT)
            b.recv((rank - distance) % p, NOTHING_RECEIVED)
    return b.build()


@register(
    "barrier", "tree",
    "Binomial fan-in of zero-byte signals to rank 0, then fan-out back down the same tree",
    cost=lambda s, m: 2 * ceil_log2(s.size) * m.alpha,
)
def barrier_tree(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Wait for the children, tell the parent, wait for its release, release the children."""
    p = spec.size
    b = ScheduleBuilder(rank, p)
    children = binomial_children(rank, p)
    arrived = [b.recv(child, NOTHING_RECEIVED) for child in children]
    released = arrived
    if rank != 0:
        parent = binomial_parent(rank)
        told = b.send(parent, NOTHING_SENT, arrived)
        released = [b.recv(parent, NOTHING_RECEIVED, [told])]
    for child in children:
        b.send(child, NOTHING_SENT, released)
    return b.build()
