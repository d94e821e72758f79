"""Gather and gatherv: every rank's SEND block ends at its displacement in the root's RECV.

``linear`` and ``binomial`` are the rooted patterns of `collops.algorithms.rooted` with the
blocks flowing up to the root (the scatters' are the same patterns flowing down): in the
binomial tree each rank with children assembles its subtree's blocks in TMP (its own first,
then each child's run, in virtual-rank order) and sends them up as one message.

``or_combine`` is seed 002's gather through a combining network. The root's result has one
position per rank; for each position every rank contributes its block if the position is its
own and zeros otherwise, and the network ORs the contributions bitwise — a gather built from a
reduction alone, exact for any dtype because OR with zero leaves every bit as it was.

A schedule has no step that writes zeros, and scratch memory is not zeroed, so the schedule
never materialises the zeros: a rank's partial result is a *window* of positions that hold
real data (the positions outside it are the implicit zeros). Combining a window into one that
does not overlap it is just receiving it next to the other; where two windows overlap, both
hold the same bytes, and OR-ing equal bytes is exact (x | x = x). The windows come from the
dissemination pattern: in round k rank v receives the window of rank v + 2**k, which is
2**k positions long. When p is not a power of two the last window wraps past position p−1
onto positions already held, and the overlap is ORed in with an ``OP_BOR_BYTES`` reduce
rather than trimmed away — exactly what a combining network would do with whole
contributions. Only the rounds that feed the root are kept (`dissemination_needed`), so on a
power-of-two size it is a binomial-tree gather and on others a binomial tree plus the wrapped
overlaps. It *wants* in-network reduction (its ORs map onto a combining tree's ALUs) but runs
correctly on any transport.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..schedule import OP_BOR_BYTES, RECV, SEND, TMP, Schedule, ScheduleBuilder
from .patterns import (
    absolute,
    bruck_offsets,
    ceil_log2,
    dissemination_needed,
    relative,
)
from .registry import CostModel, register
from .rooted import VirtualLayout, register_rooted
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
    block = spec.message_bytes()
    rounds = ceil_log2(p)
    moved = ((1 << rounds) - 1) * block
    overlap = ((1 << rounds) - p) * block
    return rounds * m.alpha + moved * m.beta + overlap * m.gamma


@register(
    ("gather", "gatherv"), "or_combine",
    "Seed 002: gather as a bitwise-OR reduction of zero-padded contributions; wants "
    "in-network reduction (a combining tree's ALU) but runs correctly everywhere",
    cost=_or_combine_cost,
    resources=("in_network_reduction",),
)
def gather_or_combine(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """OR-combine windows of positions along the dissemination rounds that feed the root."""
    p, root = spec.size, spec.root
    v = relative(rank, root, p)
    layout = VirtualLayout(spec)
    # this rank's window, position i = virtual rank v+i; periodic so wrapped positions index past p
    window_counts = [layout.counts[(v + i) % p] for i in range(p)]
    starts = prefix(tuple(window_counts * 2)) + (2 * sum(window_counts),)
    total = starts[p]
    offsets = bruck_offsets(p)
    needed = dissemination_needed(p)
    receives = [v in needed[k] for k in range(len(offsets))]
    sends = [(v - d) % p in needed[k] for k, d in enumerate(offsets)]
    tmp = max((starts[2 * d] for k, d in enumerate(offsets) if receives[k]), default=0)
    b = builder_for(rank, spec, tmp=tmp)
    own = window_counts[0]
    if own and any(receives):
        b.copy(TMP(0, own), SEND(0, own))
    for k, d in enumerate(offsets):
        if sends[k] and starts[d]:  # my window: positions 0 … d−1
            if k == 0:
                b.send(absolute((v - d) % p, root, p), SEND(0, own))
            else:
                b.send(absolute((v - d) % p, root, p), TMP(0, starts[d]), b.all_steps())
        if receives[k] and starts[2 * d] - starts[d]:  # their window: my positions d … 2d−1
            got = b.recv(absolute((v + d) % p, root, p), TMP(starts[d], starts[2 * d] - starts[d]))
            wrapped = max(0, starts[2 * d] - total)  # positions ≥ p are positions 0, 1, … again
            if wrapped:
                b.reduce(TMP(0, wrapped), TMP(total, wrapped), [*b.all_steps(), got],
                         op=OP_BOR_BYTES)
    if v == 0:
        _unpack_window(b, layout, starts, has_window=any(receives))
    return b.build()


def _unpack_window(
    b: ScheduleBuilder, layout: VirtualLayout, starts: tuple[int, ...], has_window: bool
) -> None:
    """The root copies each position of its window to its displacement in RECV."""
    done = b.all_steps()
    for u in range(layout.size):
        count = layout.counts[u]
        if not count:
            continue
        source = TMP(starts[u], count) if has_window else SEND(0, count)
        b.copy(RECV(layout.displs[u], count), source, done)
