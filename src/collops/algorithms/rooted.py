"""Rooted block movement, in either direction: scatter's blocks flow down from the root,
gather's up to it, along the same patterns.

Specs are normalised to v-form: ``spec.counts[r]`` is rank r's block and ``spec.displs[r]``
where it lies in the root's user area (SEND for a scatter, RECV for a gather). ``linear``
exchanges every block between the root and its rank directly; ``binomial`` works in
*virtual* ranks (rank − root mod p), where the subtree under virtual rank c is the contiguous
run c … c+size−1, so a subtree's blocks travel as one message. The root moves a run straight
from or into its user area when the run's blocks lie back to back there; otherwise (the run
wraps past rank p−1, or the displacements are not in rank order) it packs or unpacks them in
TMP. A rank with children holds its subtree's blocks in TMP, its own first; a leaf moves its
block straight between its own area and its parent. Messages of zero elements are skipped —
both ends compute the same counts, so they agree on which messages exist.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..schedule import RECV, SEND, Region, Schedule, ScheduleBuilder
from .patterns import (
    absolute,
    binomial_children,
    binomial_parent,
    binomial_subtree,
    ceil_log2,
    relative,
)
from .registry import CostModel, register
from .spec import CallSpec, builder_for, prefix


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


def _root_block(up: bool, displ: int, count: int) -> Region:
    """A block in the root's user area: RECV for a gather (``up``), SEND for a scatter."""
    return RECV(displ, count) if up else SEND(displ, count)


def _own_block(up: bool, count: int) -> Region:
    """A rank's own block: what it sends up (SEND) or what it receives (RECV)."""
    return SEND(0, count) if up else RECV(0, count)


def _with_parent(b: ScheduleBuilder, up: bool, parent: int, region: Region,
                 after: Sequence[int] = ()) -> int:
    """Move ``region`` one hop toward the root (``up``: send it) or away from it (receive)."""
    return b.send(parent, region, after) if up else b.recv(parent, region)


def _with_child(b: ScheduleBuilder, up: bool, child: int, region: Region,
                after: Sequence[int] = ()) -> int:
    """Move ``region`` between a rank and a child (to a linear root, every rank is one):
    receive it (``up``) or send it."""
    return b.recv(child, region) if up else b.send(child, region, after)


def _place(b: ScheduleBuilder, up: bool, user: Region, held: Region,
           after: Sequence[int] = ()) -> int:
    """Copy a block between the root's user area and where it is held: into the user area
    for a gather, out of it for a scatter."""
    return b.copy(user, held, after) if up else b.copy(held, user, after)


def rooted_linear(rank: int, spec: CallSpec, up: bool) -> Schedule:
    """The root exchanges every other non-empty block with its rank directly."""
    b = builder_for(rank, spec)
    own = spec.counts[rank]
    if rank == spec.root:
        for peer, (displ, count) in enumerate(zip(spec.displs, spec.counts, strict=True)):
            if not count:
                continue
            if peer == rank:
                _place(b, up, _root_block(up, displ, count), _own_block(up, count))
            else:
                _with_child(b, up, peer, _root_block(up, displ, count))
    elif own:
        _with_parent(b, up, spec.root, _own_block(up, own))
    return b.build()


def rooted_binomial(rank: int, spec: CallSpec, up: bool) -> Schedule:
    """Binomial tree in virtual ranks: a subtree's blocks travel as one message."""
    p, root = spec.size, spec.root
    b = builder_for(rank, spec)
    layout = VirtualLayout(spec)
    v = relative(rank, root, p)
    own = layout.counts[v]
    if v == 0:
        if own:
            _place(b, up, _root_block(up, layout.displs[0], own), _own_block(up, own))
        for child in layout.busy_children(0):
            _subtree_at_root(b, layout, child, up)
        return b.build()
    offset, count = layout.span(v)
    children = layout.busy_children(v)
    parent = absolute(binomial_parent(v), root, p)
    if not count:
        return b.build()
    if not children:
        _with_parent(b, up, parent, _own_block(up, own))
        return b.build()
    # the subtree's blocks in TMP, own first: filled by the own copy and the children before
    # going up, or received from the parent before the own copy and the children's go down
    area = b.tmp(count)
    held = [] if up else [b.recv(parent, area)]
    steps = list(held)
    if own:
        steps.append(b.copy(area.sub(0, own), SEND(0, own)) if up
                     else b.copy(RECV(0, own), area.sub(0, own), after=held))
    for child in children:
        child_offset, child_count = layout.span(child)
        steps.append(_with_child(b, up, absolute(child, root, p),
                                 area.sub(child_offset - offset, child_count), held))
    if up:
        b.send(parent, area, steps)
    return b.build()


def _subtree_at_root(b: ScheduleBuilder, layout: VirtualLayout, child: int, up: bool) -> None:
    """The root moves ``child``'s subtree blocks: straight from or into its user area if they
    lie back to back there, else through TMP (unpacked after receiving, packed before
    sending)."""
    peer = absolute(child, layout.root, layout.size)
    offset, count = layout.span(child)
    start = layout.user_start(child)
    if start is not None:
        _with_child(b, up, peer, _root_block(up, start, count))
        return
    area = b.tmp(count)
    received = [b.recv(peer, area)] if up else []
    packed = []
    for u in binomial_subtree(child, layout.size):
        if layout.counts[u]:
            packed.append(_place(b, up, _root_block(up, layout.displs[u], layout.counts[u]),
                                 area.sub(layout.offsets[u] - offset, layout.counts[u]),
                                 received))
    if not up:
        b.send(peer, area, packed)


def register_rooted(collectives: tuple[str, str], up: bool, linear: str, binomial: str) -> None:
    """Register ``linear`` and ``binomial`` (given their one-line descriptions) for a rooted
    collective and its v-form, with blocks flowing up to the root or down from it."""

    def build_linear(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
        return rooted_linear(rank, spec, up)

    def build_binomial(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
        return rooted_binomial(rank, spec, up)

    register(collectives, "linear", linear, cost=rooted_linear_cost)(build_linear)
    register(collectives, "binomial", binomial, cost=rooted_binomial_cost)(build_binomial)
