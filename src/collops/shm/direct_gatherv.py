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
on each rank that can tell).

Larger blocks are streamed (``shm_stream``, two copies that the writers and the root share)
where the selection table chooses the stream for the counts: a root given counts asks it
(`own_spec`'s ``streamed``) and says so in its header (`STREAMED`, with its displacements
when it has any: `DISPLACED`); every member, having read that header, knows every count, and
the call goes on as a stream gatherv of those counts in its next phase (`GathervExecution.
streamed`). Only the root given no counts takes a block beyond a slot out of the writer's
memory (or as a message), as alltoallv's are, so every rank takes this protocol whatever the
counts.

The spec a rank's route is chosen from is the same on every rank (`selection.rank_independent`
drops the counts), so no rank needs another's counts to agree on the algorithm.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ..algorithms.native import NativeAlgorithm, NativeCall, Runner
from ..algorithms.registry import add_algorithm, get_algorithm
from ..algorithms.spec import CallSpec, make_spec, prefix
from ..errors import CollectiveMismatch
from ..transport.tags import make_tag_base
from . import direct, direct_roles
from .direct_alltoallv import (
    ANY_LENGTH,
    AlltoallvExecution,
    Layout,
    layout_of,
    started,
    table_runner,
)
from .direct_area import DirectArea
from .stream import bind as stream_bind
from .stream_protocol import NAME as _STREAM
from .transport import ShmTransport

#: the algorithm a gatherv's blocks are streamed by, when the selection chooses it
STREAM_NAME = _STREAM
#: a root's header flags, after `direct_alltoallv`'s: the blocks come through the stream in
#: the call's next phase; its header's block offsets hold its displacements (bytes)
STREAMED = 8
DISPLACED = 16


def own_spec(size: int, dtype: np.dtype, root: int, own: int,
             counts: tuple[int, ...] | None = None,
             displs: tuple[int, ...] | None = None, streamed: bool = False) -> CallSpec:
    """One rank's spec of a gatherv whose counts are each rank's own: its ``own`` elements
    and, at the root, the ``counts`` and ``displs`` (elements) it was given (None: not
    given; the root then takes the lengths from the headers) and whether the selection
    streams a gatherv of those counts (``streamed``, kept as the spec's ``count``: 1)."""
    return make_spec("gatherv", size, dtype, counts=(), root=root).with_(
        count=int(streamed), sendcounts=(own,), recvcounts=tuple(counts or ()),
        rdispls=tuple(displs or ()))


def full_spec(size: int, dtype: np.dtype, root: int, counts: tuple[int, ...],
              displs: tuple[int, ...] | None) -> CallSpec:
    """The spec of a gatherv of ``counts`` (elements) on every rank, at the root's
    ``displs``: what the root asks the selection, and what a streamed call runs."""
    return make_spec("gatherv", size, dtype, counts=counts, displs=displs or None, root=root)


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
    elif rank == root and is_own(spec) and spec.count:
        head = lay.head.copy()
        head[0] |= STREAMED | (DISPLACED if displs else 0)
        if displs:
            head[1 + 2 * p: 1 + 3 * p] = [d * spec.itemsize for d in displs]
        lay = replace(lay, head=head)
    return lay


class GathervExecution(AlltoallvExecution):
    """A gatherv in flight through the direct slots (`AlltoallvExecution`'s protocol with a
    gather's roles); a root that learns the counts allocates its result (``recv``, bytes)
    once it has read the headers, and `lengths` says what each member sent."""

    __slots__ = ("lengths", "streamed", "deferred")
    counts_name = "counts"

    def __init__(self, transport: ShmTransport, area: DirectArea, spec: CallSpec, rank: int,
                 send: np.ndarray | None, recv: np.ndarray | None, seq: int, phase: int,
                 context: int, timeout: float | None, published: bool = False) -> None:
        #: bytes each member sent (a root that learns them), once read
        self.lengths: list[int] | None = None
        #: the stream gatherv the call goes on as in its next phase (the root said so)
        self.streamed: CallSpec | None = None
        #: this rank's block is a message, sent once the root's header says it is not streamed
        self.deferred = False
        super().__init__(transport, area, spec, rank, send, recv, seq, phase, context, timeout,
                         published, layout_for(spec, rank, area.capacity))

    def _learns(self) -> bool:
        return learns(self.spec, self.rank)

    def _read(self) -> None:
        try:
            super()._read()
        except CollectiveMismatch as exc:
            if self.rank == self.spec.root and is_own(self.spec) and self.spec.count:
                # the members whose blocks agree wait in the stream phase: they are told
                self.transport.give_up(make_tag_base(self.context, self.seq, self.phase + 1),
                                       exc)
            raise

    def _send_blocks(self) -> None:
        self.deferred = True  # the root's header may say the block is streamed instead

    def _placed(self, found: list[tuple[int, np.ndarray, np.ndarray, int]]
                ) -> tuple[tuple[tuple[int, int], ...], tuple[int, int, int]]:
        spec, root = self.spec, self.spec.root
        if self.rank != root:
            self.streamed = next((_streamed_by(spec, words) for w, _, words, _ in found
                                  if w == root), None)
            if self.streamed is not None:  # the root copies nothing out of this rank's memory
                self.by_reference = False
            elif self.deferred:
                super()._send_blocks()
            return super()._placed(found)
        if is_own(spec) and spec.count:  # the headers checked; the blocks come streamed
            self.streamed = full_spec(spec.size, spec.dtype, root, spec.recvcounts,
                                      spec.rdispls)
            return ((0, 0),) * spec.size, (0, 0, 0)
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


def _streamed_by(spec: CallSpec, words: np.ndarray) -> CallSpec | None:
    """The stream gatherv a root's header (``words``) says the call goes on as (None: its
    blocks came through the slots)."""
    flags, p, size = int(words[0]), spec.size, spec.itemsize
    if not flags & STREAMED:
        return None
    counts = tuple(int(n) // size for n in words[1 + p: 1 + 2 * p])
    displs = (tuple(int(d) // size for d in words[1 + 2 * p: 1 + 3 * p])
              if flags & DISPLACED else None)
    return full_spec(p, spec.dtype, spec.root, counts, displs)


#: start a gatherv (``start(call, send, recv, seq, phase, timeout)``)
start = functools.partial(started, GathervExecution)


def _run(call: NativeCall, send: np.ndarray | None, recv: np.ndarray | None, seq: int,
         timeout: float | None, phase: int = 0, confirm: bool = True,
         published: bool = False, streams: dict[CallSpec, Runner] | None = None) -> None:
    """A blocking gatherv, and the stream phase its root's header asks for (its runners
    bound once per counts in ``streams``)."""
    ex = start(call, send, recv, seq, phase, timeout, published)
    assert isinstance(ex, GathervExecution)
    if not ex.poll():
        call.progress.wait(ex)
    if ex.streamed is None:
        return
    runner = None if streams is None else streams.get(ex.streamed)
    if runner is None:
        runner = stream_bind(replace(call, spec=ex.streamed))
        if streams is not None:
            streams[ex.streamed] = runner
    runner(send, recv, seq, timeout, phase + 1)


def bind(call: NativeCall, length_prefix: tuple[int, int] | None = None
         ) -> Callable[..., None]:
    """A blocking gatherv of one signature: ``fn(send, recv, seq, timeout, phase=0)``,
    compiled (`table_runner`) unless this rank's block goes around its slot or, at a root
    that learns the counts, the result is allocated as the headers say (`_run`)."""
    transport, area = direct.area_of(call)
    spec, rank = call.spec, call.rank
    run = functools.partial(_run, streams={})
    compiled = None
    if not learns(spec, rank) and not (rank == spec.root and spec.count):
        others = direct_roles.waits_for(spec, rank)
        compiled = table_runner(call, transport, area, layout_for(spec, rank, area.capacity),
                                others, list(direct_roles.readers(spec, rank)), run)
    return compiled or functools.partial(run, call)


def register() -> None:
    """Add the ``shm_direct`` record of ``gatherv``: alltoallv's, with its own protocol."""
    native = NativeAlgorithm(start, bind)
    add_algorithm(replace(
        get_algorithm("alltoallv", direct.NAME), collective="gatherv", native=native,
        agrees_on_root=True, restrictions=(direct.FITS,), description="gatherv through "
        "shared-memory slots: each block after a header of its length, which the root checks "
        "against its counts or takes as they are (blocks the selection streams for the "
        "root's counts: through the stream rings next)"))
