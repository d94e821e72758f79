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
where the selection table chooses the stream for the counts. A rank given counts asks it
(`own_spec`'s ``streamed``); where it streams, the rank's header says so (`STREAMED`; the
root's with its displacements, `DISPLACED`) and it goes on at once, waiting for nobody, to a
stream gatherv of those counts in the call's next phase (`GathervExecution.streamed`), whose
roll call is the call's one meeting (the stream's fingerprint holds the counts: ranks given
other counts raise there). A member given no counts reads the root's header, learns every
count from it, frees its slot (the root reads none) and follows. A root that takes the
blocks through the slots and finds a member's header streamed raises, as it does for any
other disagreement. Only a root given no counts takes a block beyond a slot out of the
writer's memory (or as a message), as alltoallv's are, so every rank takes this protocol
whatever the counts.

A root given no counts guesses, on its bound route, that each member sends what it sent in
its root's last call (`own_spec`'s ``guessed``): its header still says `ANY_LENGTH`, so the
members check nothing, and its compiled runner expects the guess and copies the blocks into
a result of that shape. A header that says otherwise hands the call to the Python protocol,
which learns the lengths and allocates as it does for any root given no counts, and then
raises the native interface's `LengthsLearned` with the lengths it learned and the blocks it
read: the route builds the result from them and guesses anew.

The spec a rank's route is chosen from is the same on every rank (`selection.rank_independent`
drops the counts), so no rank needs another's counts to agree on the algorithm.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ..algorithms.native import LengthsLearned, NativeAlgorithm, NativeCall, Runner
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
    posted,
    started,
    table_runner,
)
from .direct_area import DirectArea, call_number, slot_of
from .stream import bind as stream_bind
from .stream_protocol import NAME as _STREAM
from .transport import ShmTransport

#: the algorithm a gatherv's blocks are streamed by, when the selection chooses it
STREAM_NAME = _STREAM
#: a header's flags, after `direct_alltoallv`'s: the blocks come through the stream in the
#: call's next phase (this rank's counts say so); a root's block offsets hold its
#: displacements (bytes)
STREAMED = 8
DISPLACED = 16


#: a root's spec whose ``counts`` are its guess (kept as its ``sdispls``, which no gatherv
#: uses and no fingerprint holds)
GUESSED = (1,)


def own_spec(size: int, dtype: np.dtype, root: int, own: int,
             counts: tuple[int, ...] | None = None,
             displs: tuple[int, ...] | None = None, streamed: bool = False,
             guessed: bool = False) -> CallSpec:
    """One rank's spec of a gatherv whose counts are each rank's own: its ``own`` elements
    and, at the root, the ``counts`` and ``displs`` (elements) it was given (None: not
    given; the root then takes the lengths from the headers); ``streamed``: this rank was
    given ``counts`` the selection streams (kept as the spec's ``count``: 1; a non-root's
    ``counts`` are then in its spec too); ``guessed``: a root given none, whose ``counts``
    are what it expects (`GUESSED`)."""
    return make_spec("gatherv", size, dtype, counts=(), root=root).with_(
        count=int(streamed), sendcounts=(own,), recvcounts=tuple(counts or ()),
        rdispls=tuple(displs or ()), sdispls=GUESSED if guessed else ())


def full_spec(size: int, dtype: np.dtype, root: int, counts: tuple[int, ...],
              displs: tuple[int, ...] | None) -> CallSpec:
    """The spec of a gatherv of ``counts`` (elements) on every rank, at the root's
    ``displs``: what the root asks the selection, and what a streamed call runs."""
    return make_spec("gatherv", size, dtype, counts=counts, displs=displs or None, root=root)


def is_own(spec: CallSpec) -> bool:
    """Whether ``spec`` is a gatherv's `own_spec` (its counts are not every rank's)."""
    return spec.collective == "gatherv" and not spec.counts and spec.size > 0


def guesses(spec: CallSpec) -> bool:
    """Whether ``spec`` is a root's given no counts that expects a guess (`own_spec`)."""
    return spec.sdispls == GUESSED and is_own(spec)


def learns(spec: CallSpec, rank: int) -> bool:
    """Whether ``rank`` is the root of a gatherv given no counts: it learns them."""
    return rank == spec.root and is_own(spec) and (not spec.recvcounts or guesses(spec))


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
    elif streams(spec):
        head = lay.head.copy()
        head[0] |= STREAMED
        if rank == root and displs:
            head[0] |= DISPLACED
            head[1 + 2 * p: 1 + 3 * p] = [d * spec.itemsize for d in displs]
        lay = replace(lay, head=head)
    return lay


def streams(spec: CallSpec) -> bool:
    """Whether a rank of ``spec`` (`own_spec`) was given counts the selection streams."""
    return is_own(spec) and spec.count == 1


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

    @staticmethod
    def posting_runner(call: NativeCall, transport: ShmTransport, area: DirectArea
                       ) -> Callable[..., None] | None:
        """The compiled runner that posts a non-blocking gatherv (`posted`): `bind`'s, for
        a rank whose block goes through its slot and that is not a root learning the counts
        (None otherwise: the protocol runs in Python)."""
        spec, rank = call.spec, call.rank
        if streams(spec) or learns(spec, rank):
            return None
        return table_runner(call, transport, area, layout_for(spec, rank, area.capacity),
                            direct_roles.waits_for(spec, rank),
                            list(direct_roles.readers(spec, rank)),
                            functools.partial(_run, runners={}))

    def _learns(self) -> bool:
        return learns(self.spec, self.rank)

    def _advance(self, spin: float) -> bool:
        if not streams(self.spec):
            return super()._advance(spin)
        # given counts the selection streams: this rank's header says so, and nobody waits
        # for anybody here (a member that reads the root's header does, and releases its
        # slot, `_placed`); the stream's roll call is the call's one meeting
        area, slot = self.area, self.slot
        if not self.written:
            if not self._may_write():
                return self._stuck()
            head = self.layout.head
            area.slots[area.index][slot][: head.nbytes] = head.view(np.uint8)
            area.publish(slot, self.k, self.role.fingerprint, ())
            area.unwritten.popleft()
            self.written = self.read = self.acknowledged = True
        spec = self.spec
        self.streamed = full_spec(spec.size, spec.dtype, spec.root, spec.recvcounts,
                                  spec.rdispls if self.rank == spec.root else None)
        return True

    def _read(self) -> None:
        try:
            super()._read()
        except CollectiveMismatch as exc:
            # members that go on to the stream phase (their counts, or the root's header, said
            # so) wait there: they are told
            self.transport.give_up(make_tag_base(self.context, self.seq, self.phase + 1), exc)
            raise

    def _send_blocks(self) -> None:
        self.deferred = True  # the root's header may say the block is streamed instead

    def _placed(self, found: list[tuple[int, np.ndarray, np.ndarray, int]]
                ) -> tuple[tuple[tuple[int, int], ...], tuple[int, int, int]]:
        spec, root = self.spec, self.spec.root
        if self.rank != root:
            self.streamed = next((_streamed_by(spec, words) for w, _, words, _ in found
                                  if w == root), None)
            if self.streamed is not None:  # the root reads nothing of this rank's slot or
                self.by_reference = False  # memory: the slot is free again
                self.area.occupant[self.slot] = (self.k, ())
            elif self.deferred:
                super()._send_blocks()
            return super()._placed(found)
        for w, _, words, _ in found:
            if int(words[0]) & STREAMED:
                raise CollectiveMismatch(
                    f"{self.role.what}: rank {w} streams its block, as the selection does for "
                    f"the counts it was given; rank {root}, the root, "
                    + ("was given none" if self._learns() else "takes it through the slots, "
                       "as it does for its own counts"))
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


#: start a gatherv (``start(call, send, recv, seq, phase, timeout)``): `_run`'s, and (by the
#: compiled runner where it can post the call, `posted`) the native algorithm's
start = functools.partial(started, GathervExecution)
start_posted = functools.partial(posted, GathervExecution)


def _run(call: NativeCall, send: np.ndarray | None, recv: np.ndarray | None, seq: int,
         timeout: float | None, phase: int = 0, confirm: bool = True,
         published: bool = False, runners: dict[CallSpec, Runner] | None = None) -> None:
    """A blocking gatherv, and the stream phase its counts or its root's header ask for (its
    runners bound once per counts in ``runners``); a guessing root's raises
    `LengthsLearned` (its result is the execution's)."""
    ex = start(call, send, recv, seq, phase, timeout, published)
    assert isinstance(ex, GathervExecution)
    if not ex.poll():
        call.progress.wait(ex)
    if guesses(call.spec) and call.rank == call.spec.root:
        assert ex.lengths is not None and ex.recv is not None
        raise LengthsLearned(ex.lengths, ex.recv)
    if ex.streamed is None:
        return
    runner = None if runners is None else runners.get(ex.streamed)
    if runner is None:
        runner = stream_bind(replace(call, spec=ex.streamed))
        if runners is not None:
            runners[ex.streamed] = runner
    runner(send, recv, seq, timeout, phase + 1)


def bind(call: NativeCall, length_prefix: tuple[int, int] | None = None
         ) -> Callable[..., None]:
    """A blocking gatherv of one signature: ``fn(send, recv, seq, timeout, phase=0)``,
    compiled (`table_runner`) unless this rank's block goes around its slot or, at a root
    that learns the counts without a guess, the result is allocated as the headers say
    (`_run`)."""
    transport, area = direct.area_of(call)
    spec, rank = call.spec, call.rank
    run = functools.partial(_run, runners={})
    if streams(spec):
        return _streamed_runner(call, area, run)
    compiled = None
    if not learns(spec, rank) or guesses(spec):
        others = direct_roles.waits_for(spec, rank)
        compiled = table_runner(call, transport, area, layout_for(spec, rank, area.capacity),
                                others, list(direct_roles.readers(spec, rank)), run)
    return compiled or functools.partial(run, call)


def _streamed_runner(call: NativeCall, area: DirectArea, run: Callable[..., None]
                     ) -> Runner:
    """The blocking runner of a rank given counts the selection streams: its header (no
    wait, as `GathervExecution` publishes it) and the stream phase, bound once; through
    `_run` while anything else is in flight here or its slot is busy."""
    spec, rank = call.spec, call.rank
    head = layout_for(spec, rank, area.capacity).head.view(np.uint8)
    fingerprint = direct.call_fingerprint(spec)
    stream = full_spec(spec.size, spec.dtype, spec.root, spec.recvcounts,
                       spec.rdispls if rank == spec.root else None)
    runner = stream_bind(replace(call, spec=stream))
    progress, mine = call.progress, area.slots[area.index]

    def fn(send: np.ndarray | None, recv: np.ndarray | None, seq: int,
           timeout: float | None, phase: int = 0) -> None:
        slot = slot_of(seq, phase)
        if progress.active or area.unwritten or area.inflight or not area.writable(slot):
            run(call, send, recv, seq, timeout, phase)
            return
        mine[slot][: head.nbytes] = head
        area.publish(slot, call_number(seq, phase), fingerprint, ())
        runner(send, recv, seq, timeout, phase + 1)

    return fn


def _reported_as(spec: CallSpec, rank: int) -> str:
    """A call whose blocks the selection streams is the stream's (its data phase)."""
    return STREAM_NAME if streams(spec) else direct.NAME


def register() -> None:
    """Add the ``shm_direct`` record of ``gatherv``: alltoallv's, with its own protocol."""
    native = NativeAlgorithm(start_posted, bind, reported_as=_reported_as)
    add_algorithm(replace(
        get_algorithm("alltoallv", direct.NAME), collective="gatherv", native=native,
        agrees_on_root=True, restrictions=(direct.FITS,), description="gatherv through "
        "shared-memory slots: each block after a header of its length, which the root checks "
        "against its counts or takes as they are (blocks the selection streams for the "
        "root's counts: through the stream rings next)"))
