"""Scatter and scatterv: block r of the root's SEND area ends in rank r's RECV area.

Specs are normalised to v-form, so one builder serves both collectives: ``spec.counts[r]`` is
rank r's block and ``spec.displs[r]`` where it starts in the root's SEND area.

``binomial`` works in *virtual* ranks (rank − root mod p). The subtree under virtual rank c is
the contiguous run c … c+size−1, so a subtree's blocks travel as one message. The root sends
straight from SEND when that run's blocks lie back to back there; otherwise (the run wraps past
rank p−1, or the displacements are not in rank order) it packs them into TMP first. A rank
with children receives its subtree's blocks into TMP, keeps its own (the first) and forwards
the rest; a leaf receives straight into RECV. Messages of zero elements are skipped — both
ends compute the same counts, so they agree on which messages exist.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..schedule import RECV, SEND, Schedule, ScheduleBuilder
from .patterns import (
    absolute,
    binomial_children,
    binomial_parent,
    binomial_subtree,
    ceil_log2,
    relative,
)
from .registry import CostModel, register
from .spec import CallSpec, prefix


def total_bytes(spec: CallSpec) -> int:
    """Bytes of all the blocks together."""
    return spec.total * spec.itemsize


def rooted_linear_cost(spec: CallSpec, m: CostModel) -> float:
    """α-β cost of the root exchanging a block with each other rank in turn."""
    p = spec.size
    return (p - 1) * m.alpha + (p - 1) / p * total_bytes(spec) * m.beta


def rooted_binomial_cost(spec: CallSpec, m: CostModel) -> float:
    """α-β cost of a binomial tree moving every block once along its path."""
    p = spec.size
    return ceil_log2(p) * m.alpha + (p - 1) / p * total_bytes(spec) * m.beta


def contiguous_start(displs: Sequence[int], counts: Sequence[int]) -> int | None:
    """Where blocks lie back to back in the given order (None if they don't); empties skipped."""
    start: int | None = None
    position = 0
    for displ, count in zip(displs, counts, strict=True):
        if not count:
            continue
        if start is None:
            start = position = displ
        elif displ != position:
            return None
        position += count
    return 0 if start is None else start


class VirtualLayout:
    """Blocks renumbered by virtual rank (root = 0), packed in that order."""

    def __init__(self, spec: CallSpec) -> None:
        p, root = spec.size, spec.root
        self.size, self.root = p, root
        self.ranks = [absolute(u, root, p) for u in range(p)]
        self.counts = [spec.counts[r] for r in self.ranks]
        self.displs = [spec.displs[r] for r in self.ranks]
        self.offsets = prefix(tuple(self.counts)) + (sum(self.counts),)

    def span(self, vrank: int) -> tuple[int, int]:
        """(packed offset, element count) of the blocks in ``vrank``'s binomial subtree."""
        run = binomial_subtree(vrank, self.size)
        return self.offsets[run.start], self.offsets[run.stop] - self.offsets[run.start]

    def user_start(self, vrank: int) -> int | None:
        """Offset of the subtree's blocks in the user's buffer, if they lie back to back."""
        run = binomial_subtree(vrank, self.size)
        return contiguous_start(self.displs[run.start: run.stop], self.counts[run.start: run.stop])

    def busy_children(self, vrank: int) -> list[int]:
        """Children of ``vrank`` whose subtrees hold at least one element."""
        return [c for c in binomial_children(vrank, self.size) if self.span(c)[1]]


@register(
    ("scatter", "scatterv"), "linear", "The root sends every rank its block directly",
    cost=rooted_linear_cost,
)
def scatter_linear(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Root copies its own block and posts one send per other non-empty block."""
    b = ScheduleBuilder(rank, spec.size, *spec.buffer_counts(rank))
    own = spec.counts[rank]
    if rank == spec.root:
        for peer, (displ, count) in enumerate(zip(spec.displs, spec.counts, strict=True)):
            if peer == rank:
                if count:
                    b.copy(RECV(0, count), SEND(displ, count))
            elif count:
                b.send(peer, SEND(displ, count))
    elif own:
        b.recv(spec.root, RECV(0, own))
    return b.build()


@register(
    ("scatter", "scatterv"), "binomial",
    "Binomial tree: each subtree's blocks travel as one message, halving at every level",
    cost=rooted_binomial_cost,
)
def scatter_binomial(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Receive the subtree's blocks from the parent, keep the first, forward the rest."""
    p, root = spec.size, spec.root
    b = ScheduleBuilder(rank, p, *spec.buffer_counts(rank))
    layout = VirtualLayout(spec)
    v = relative(rank, root, p)
    own = layout.counts[v]
    if v == 0:
        if own:
            b.copy(RECV(0, own), SEND(layout.displs[0], own))
        for child in layout.busy_children(0):
            _send_subtree_from_root(b, layout, child)
        return b.build()
    offset, count = layout.span(v)
    children = layout.busy_children(v)
    parent = absolute(binomial_parent(v), root, p)
    if not count:
        return b.build()
    if not children:
        b.recv(parent, RECV(0, own))
        return b.build()
    area = b.tmp(count)
    got = b.recv(parent, area)
    if own:
        b.copy(RECV(0, own), area.sub(0, own), after=[got])
    for child in children:
        child_offset, child_count = layout.span(child)
        b.send(absolute(child, root, p), area.sub(child_offset - offset, child_count), [got])
    return b.build()


def _send_subtree_from_root(b: ScheduleBuilder, layout: VirtualLayout, child: int) -> None:
    """The root sends ``child``'s subtree blocks, from SEND if contiguous, else packed in TMP."""
    peer = absolute(child, layout.root, layout.size)
    offset, count = layout.span(child)
    start = layout.user_start(child)
    if start is not None:
        b.send(peer, SEND(start, count))
        return
    area = b.tmp(count)
    packed = []
    for u in binomial_subtree(child, layout.size):
        if layout.counts[u]:
            packed.append(b.copy(area.sub(layout.offsets[u] - offset, layout.counts[u]),
                                 SEND(layout.displs[u], layout.counts[u])))
    b.send(peer, area, packed)
