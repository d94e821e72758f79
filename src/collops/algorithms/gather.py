"""Gather and gatherv: every rank's SEND block ends at its displacement in the root's RECV.

``linear`` and ``binomial`` are the rooted patterns of `collops.algorithms.rooted` with the
blocks flowing up to the root (the scatters' are the same patterns flowing down): in the
binomial tree each rank with children assembles its subtree's blocks in TMP (its own first,
then each child's run, in virtual-rank order) and sends them up as one message.

``or_combine`` is seed 002's gather through a combining network, as the patent describes
it: every rank lays out the whole result — p positions, one per rank, in rank order — as
zeros, places its own block at its position, and one bitwise-OR reduction of these
zero-padded contributions assembles the result at the root: exact for any dtype, because
OR with zero leaves every bit as it was (the ORs work on the raw bytes). On a combining
network the switches do the ORs (the simulator's `collops.sim.innetwork`); elsewhere the
reduction is a binomial tree of p·m-byte messages, each rank ORing its children's buffers into
its own before it sends it up — p times the bytes of a binomial gather, the price of needing
no knowledge of the layout in the network. The root then copies each position to its
displacement (a gatherv's gaps stay as they were).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..schedule import OP_BOR_BYTES, RECV, SEND, TMP, Schedule
from .patterns import (
    absolute,
    ceil_log2,
    relative,
)
from .registry import CostModel, register
from .rooted import register_rooted
from .spec import CallSpec, builder_for, prefix

register_rooted(
    ("gather", "gatherv"), up=True,
    linear="Every rank sends its block straight to the root",
    binomial="Binomial tree: each rank sends its subtree's blocks up as one message",
)


def _or_combine_cost(spec: CallSpec, m: CostModel) -> float:
    p = spec.size
    if p == 1:
        return 0.0
    whole = sum(spec.counts) * spec.itemsize  # the zero-padded contribution: every position
    rounds = ceil_log2(p)
    return rounds * (m.alpha + whole * (m.beta + m.gamma)) + whole * m.gamma


@register(
    ("gather", "gatherv"), "or_combine",
    "Seed 002: gather as one bitwise-OR reduction of zero-padded p·m-byte contributions; "
    "combined in the switches of a combining network, by a binomial OR-reduction elsewhere "
    "(correct on every transport and topology)",
    cost=_or_combine_cost,
    resources=("in_network_reduction",),
)
def gather_or_combine(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Zero the whole result, place the own block, OR-reduce up a binomial tree to the root."""
    p, root = spec.size, spec.root
    counts = spec.counts
    at = prefix(tuple(counts))
    total = sum(counts)
    v = relative(rank, root, p)
    children = []  # v + 2^k below v's lowest set bit (every k for the root)
    for k in range(ceil_log2(p)):
        if v >> k & 1:
            break
        if v + (1 << k) < p:
            children.append(v + (1 << k))
    b = builder_for(rank, spec, tmp=total * (1 + len(children)))
    whole = TMP(0, total)
    mine = counts[rank]
    if total == 0:
        return b.build()
    done = [b.zero(whole)]
    if mine:
        done = [b.copy(whole.sub(at[rank], mine), SEND(0, mine), done)]
    for i, child in enumerate(children):  # OR each child's contribution into mine
        theirs = TMP(total * (i + 1), total)
        got = b.recv(absolute(child, root, p), theirs)
        done = [b.reduce(whole, theirs, [*done, got], op=OP_BOR_BYTES)]
    if v:
        lowest = v & -v  # my parent clears my lowest set bit
        b.send(absolute(v - lowest, root, p), whole, done)
        return b.build()
    for r in range(p):
        if counts[r]:
            b.copy(RECV(spec.displs[r], counts[r]), whole.sub(at[r], counts[r]), done)
    return b.build()
