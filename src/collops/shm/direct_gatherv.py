"""``gatherv`` through the direct slots (``shm_direct``), each block's length in its
writer's header: counts given on every rank, at the root only, or nowhere.

A gatherv's non-root needs no counts: it knows its own block (its ``x``). So each rank's spec
holds only what it knows (`own_spec`): its own elements and, at the root, the counts and
displacements it was given, if any. The call runs as `direct_alltoallv`'s protocol with a
gather's roles: a non-root writes a header (what it sends the root) and its block; the root
writes a header saying what it expects from each member, or `ANY_LENGTH` when it was given no
counts; the root checks each non-root's header against its counts (or takes the lengths from
them, places the blocks back to back or at its ``displs`` and allocates the result), and
each non-root checks the root's header (a mismatch: `CollectiveMismatch` naming both ranks,
on each rank that can tell). A block beyond a slot is read out of the writer's memory, or
sent as a message, as alltoallv's are, so every rank takes this protocol whatever the counts.

The spec a rank's route is chosen from is the same on every rank (`selection.rank_independent`
drops the counts), so no rank needs another's counts to agree on the algorithm.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ..algorithms.native import NativeAlgorithm, NativeCall
from ..algorithms.registry import add_algorithm, get_algorithm
from ..algorithms.spec import CallSpec, make_spec, prefix
from . import direct, direct_roles
from .direct_alltoallv import (
    ANY_LENGTH,
    AlltoallvExecution,
    Layout,
    layout_of,
    run_blocking,
    started,
    table_runner,
)
from .direct_area import DirectArea
from .transport import ShmTransport


def own_spec(size: int, dtype: np.dtype, root: int, own: int,
             counts: tuple[int, ...] | None = None,
             displs: tuple[int, ...] | None = None) -> CallSpec:
    """One rank's spec of a gatherv whose counts are each rank's own: its ``own`` elements
    and, at the root, the ``counts`` and ``displs`` (elements) it was given (None: not
    given; the root then takes the lengths from the headers)."""
    return make_spec("gatherv", size, dtype, counts=(), root=root).with_(
        sendcounts=(own,), recvcounts=tuple(counts or ()), rdispls=tuple(displs or ()))


def is_own(spec: CallSpec) -> bool:
    """Whether ``spec`` is a gatherv's `own_spec` (its counts are not every rank's)."""
    return spec.collective == "gatherv" and not spec.counts and spec.size > 0


def learns(spec: CallSpec, rank: int) -> bool:
    """Whether ``rank`` is the root of a gatherv given no counts: it learns them."""
    return rank == spec.root and is_own(spec) and not spec.recvcounts


@functools.lru_cache(maxsize=1024)
def layout_for(spec: CallSpec, rank: int, slot_bytes: int) -> Layout:
    """``rank``'s part of a gatherv of ``spec`` (`own_spec`, or counts on every rank) as an
    alltoallv's `Layout`: a non-root sends the root its block, the root expects each
    member's (any length when it learns them) and copies its own."""
    p, root = spec.size, spec.root
    if is_own(spec):
        own, counts, displs = spec.sendcounts[0], spec.recvcounts, spec.rdispls
    else:
        own, counts, displs = spec.counts[rank], spec.counts, spec.displs
    sends = [0] * p
    sends[root] = own
    expects = [0] * p
    if rank == root:
        expects = list(counts) if counts else [own if j == root else 0 for j in range(p)]
    mapped = make_spec("alltoallv", p, spec.dtype, sendcounts=sends, recvcounts=expects,
                       rdispls=displs if rank == root and displs else None)
    lay = layout_of(mapped, rank, slot_bytes)
    if learns(spec, rank):
        head = lay.head.copy()
        head[0] |= ANY_LENGTH
        lay = replace(lay, head=head)
    return lay


class GathervExecution(AlltoallvExecution):
    """A gatherv in flight through the direct slots (`AlltoallvExecution`'s protocol with a
    gather's roles); a root that learns the counts allocates its result (``recv``, bytes)
    once it has read the headers, and `lengths` says what each member sent."""

    __slots__ = ("lengths",)
    counts_name = "counts"

    def __init__(self, transport: ShmTransport, area: DirectArea, spec: CallSpec, rank: int,
                 send: np.ndarray | None, recv: np.ndarray | None, seq: int, phase: int,
                 context: int, timeout: float | None, published: bool = False) -> None:
        #: bytes each member sent (a root that learns them), once read
        self.lengths: list[int] | None = None
        super().__init__(transport, area, spec, rank, send, recv, seq, phase, context, timeout,
                         published, layout_for(spec, rank, area.capacity))

    def _learns(self) -> bool:
        return learns(self.spec, self.rank)

    def _placed(self, found: list[tuple[int, np.ndarray, np.ndarray, int]]
                ) -> tuple[tuple[tuple[int, int], ...], tuple[int, int, int]]:
        if not self._learns():
            return super()._placed(found)
        spec, me, lay = self.spec, self.rank, self.layout
        lengths = [0] * spec.size
        lengths[me] = lay.own[1]
        for w, _, words, _ in found:
            lengths[w] = int(words[1 + me])
        size = spec.itemsize
        at = ([d * size for d in spec.rdispls] if spec.rdispls
              else list(prefix(tuple(lengths))))
        extent = max((a + n for a, n in zip(at, lengths, strict=True) if n), default=0)
        self.recv = np.zeros(extent, np.uint8)
        self.lengths = lengths
        expects = tuple(zip(lengths, at, strict=True))
        return expects, (lay.own[0], lay.own[1], at[me])


#: start a gatherv (``start(call, send, recv, seq, phase, timeout)``), or run one
start = functools.partial(started, GathervExecution)
_run = functools.partial(run_blocking, GathervExecution)


def bind(call: NativeCall, length_prefix: tuple[int, int] | None = None
         ) -> Callable[..., None]:
    """A blocking gatherv of one signature: ``fn(send, recv, seq, timeout, phase=0)``,
    compiled (`table_runner`) unless this rank's block goes around its slot or, at a root
    that learns the counts, the result is allocated as the headers say (`_run`)."""
    transport, area = direct.area_of(call)
    spec, rank = call.spec, call.rank
    compiled = None
    if not learns(spec, rank):
        others = direct_roles.waits_for(spec, rank)
        compiled = table_runner(call, transport, area, layout_for(spec, rank, area.capacity),
                                others, list(direct_roles.readers(spec, rank)), _run)
    return compiled or functools.partial(_run, call)


def register() -> None:
    """Add the ``shm_direct`` record of ``gatherv``: alltoallv's, with its own protocol."""
    native = NativeAlgorithm(start, bind)
    add_algorithm(replace(
        get_algorithm("alltoallv", direct.NAME), collective="gatherv", native=native,
        agrees_on_root=True, description="gatherv through shared-memory slots: each block "
        "after a header of its length, which the root checks against its counts or takes as "
        "they are (beyond a slot: out of the writer's memory, or as messages)"))
