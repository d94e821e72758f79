"""``shm_stream``: large collectives on one machine, streamed chunk by chunk through rings.

A large call as a schedule of point-to-point messages pays the transport's Python per chunk
on both sides; ``shm_cma`` avoids copies but makes every rank wait for every peer twice.
Here each rank of a communicator with a *stream area* (the first ``stream_areas`` contexts
of the job segment) owns a ring of ``stream_chunks`` slots of ``stream_chunk_bytes``; per
call, every rank streams its contribution into its own ring and, at the same time, copies
the chunks it needs out of the rings of the ranks it reads — in C (`collops.transport.
_stream`) where it was built, else with the same protocol in Python (`PyPlan`):

* ``bcast``: the root writes, every other rank reads every chunk;
* ``allgather``: every rank writes its block (and copies it into its own output in the same
  pass over its input, `copy_twice`), every rank reads every other rank's;
* ``alltoall``: every rank writes its blocks for the others, interleaved chunk by chunk so
  each reader is fed at the same rate, and each chunk has one reader;
* ``scatter``/``gather``: the root writes one block per rank / reads one from each;
* ``reduce``: a gather of the contributions into a scratch buffer of the root's (kept
  between calls), which the root then folds into its result in rank order with the
  operator's numpy function, ``x0 ∘ x1 ∘ … ∘ x(p−1)`` as MPI specifies for any operator
  (`FoldingExecution`). The root folds alone, but with more ranks than cores the copies
  into the rings run on the other core meanwhile, and no rank waits for a peer per step;
* ``reduce_scatter_block``: an alltoall into every rank's scratch, each rank then folding
  its block in rank order;
* ``allreduce``: that reduce-scatter into the rank's block of the result, then an allgather
  of the blocks, as two phases of the call (`ChainExecution`); when the count does not
  divide among the ranks, a reduce to rank 0 and a bcast from it instead.

A writer's ring is a FIFO over calls. Its control lines hold its *filled* counter (chunks
published, cumulative over the job, so nothing is ever reset), a header per slot — the
chunk's number, the call's held word (call number and fingerprint, as in the direct areas),
the mask of the ranks that must read it, where its bytes go and how many — and, per reader,
a *drained* counter of the chunks that reader is done with. A writer reuses a slot once every
reader in the mask of the chunk it held has drained past it; a reader walks a writer's ring
from its cursor, skips chunks whose mask lacks it (and everything older than the last ring's
worth: those were not its own, or the writer could not have gone on), copies those of its
call and stops at one of another call. That chunk is handed to the call it belongs to if this
rank has begun it (calls may begin in different orders on different ranks: the data phase
of a non-blocking bcast starts when its envelope arrives); one with this call's number and
another fingerprint is `CollectiveMismatch`, saying what each side called. A rank writes its
calls' chunks in the order it began them (`StreamArea.unwritten`).

A call is done on a rank once it has written all its chunks and read all it needs — not when
its readers have read them: the ring holds them, so a writer never waits for a reader beyond
the ring's worth. The exception is a block published *by reference* (`BY_REFERENCE`): its
chunk holds only the block's address in the writer's memory, the reader copies it from there
with process_vm_readv (one copy instead of two), and the writer's call is done once every
such reader has drained past it. The C loop returns whenever nothing can move for a few
microseconds; waiting (spin, yield, sleep on the doorbell) and the checks for a failed peer
(`PeerFailed`), the deadline (`CollectiveTimeout`, naming the ranks not heard from) and a
peer that made another call directly stay in Python (`DirectArea.wait`/``check``).

Registered with ``shm_direct`` where the transport offers the "shm_stream" resource (the
communicator's context has a stream area, the job has at most 64 ranks), for calls too large
for a direct slot; selection takes it unasked only where it measured faster than the
schedules (`stream_cost`).
"""

from __future__ import annotations

import ctypes
import errno
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import config
from ..algorithms import fingerprint as fp
from ..algorithms.native import NativeAlgorithm, NativeCall
from ..algorithms.registry import Algorithm, CostModel, Restriction, add_algorithm
from ..algorithms.spec import CallSpec, make_spec
from ..datatypes import address_of
from ..errors import CollectiveMismatch, PeerFailed, ScheduleError, TransportError
from ..schedule import Schedule
from ..transport.tags import call_tag
from . import direct as shm_direct
from . import segment as seg
from .direct_area import DirectArea, call_number, held_word, slot_of
from .stream_area import StreamArea
from .transport import ShmTransport

try:
    from . import _stream
except ImportError:  # built without a C compiler: `PyPlan` runs the same protocol
    _stream = None  # type: ignore[assignment]

NAME = "shm_stream"
RESOURCE = "shm_stream"
SUPPORTED = ("bcast", "scatter", "gather", "allgather", "alltoall", "reduce", "allreduce",
             "reduce_scatter_block")
#: collectives whose contributions are gathered into a scratch buffer and folded there
FOLDED = frozenset({"reduce", "reduce_scatter_block"})
#: the collectives right with ``x`` as ``out`` (`Algorithm.in_place`): allreduce writes its
#: input into the rings (or the peers read it by reference and are waited for) before its
#: fold and its allgather phase write the result, and the fold copies an own contribution it
#: would overwrite (`FoldingExecution`)
IN_PLACE = frozenset({"allreduce"})
#: collectives run as two stream phases (`ChainExecution`)
CHAINED = frozenset({"allreduce"})
#: the collectives selection gives it unasked: beyond a direct slot and up to these bytes
#: per block (``count × itemsize``) at up to 2, 4 and 8 ranks (more ranks: the 8-rank bound)
#: — where it measured faster than the best schedule (ring, recursive doubling, linear,
#: binomial, scatter-allgather) and shm_cma, `collops bench` on the quiet 2-core VM
#: (2026-11-25, docs/performance.md). With more ranks than cores every step of a schedule
#: waits for a peer to be scheduled and the stream needs none, so at 4 and 8 ranks it wins at
#: every size measured (128 KiB to 4 MiB: 0.2-0.6 of the schedules' time). At 2 ranks, each
#: on its own core, a byte the stream copies twice (into the ring, out of it) costs more than
#: one kernel single copy once the messages are large: bcast streams up to 4 MiB (8 MiB:
#: linear's 364 µs against 566), alltoall at every size (its blocks of 512 KiB and more by
#: reference, `BY_REFERENCE`; through the ring it streamed up to 2 MiB: 4 MiB took 274 µs
#: by linear against 329), scatter up to 8 MiB, allgather at every size (at 2 MiB the ring
#: won by 15 %, at 1, 4, 8 and 16 MiB the stream by 4-30 %, at 16 MiB with
#: `STREAMING_STORES_FROM`; 1-8 MiB blocks now by reference), gather at every size
#: (shm_cma's reads were slower), reduce up to 4 MiB
#: (1 MiB: 141 µs against shm_cma's 225; 16 MiB: 5.0 ms against 4.6) and at 4 and 8 ranks
#: 0.1-0.8 of rabenseifner's time. allreduce (a reduce-scatter and an allgather) up to 1 MiB
#: vectors and reduce_scatter_block up to 1 MiB blocks with more ranks than cores (4 ranks, 1 MiB:
#: 637 µs against rabenseifner's 957, 275 against recursive halving's 619; at 4 MiB the
#: schedules caught up), reduce_scatter_block to 256 KiB on 2 ranks (128 KiB blocks: 40 µs
#: against 57; 512 KiB: even), allreduce on 2 from 512 KiB (`AUTO_FROM`) to 4 MiB vectors
#: once its allgather phase went by reference and its fold into one pass (2026-11-25,
#: against MPICH in the same processes: 512 KiB 1.16 against the ring's 1.38, 1, 2, 4 MiB
#: 1.05-1.09 / 0.89-0.95 / 0.87-0.88 against 1.20-1.22 / 0.97-0.99 / 0.95-1.00; at 256 KiB
#: the ring 0.72-0.75 against 0.96-1.02, at 16 MiB the ring 0.60 against 0.76).
KiB = 1024
MiB = 1024 * KiB
UNBOUNDED = math.inf
AUTO_UP_TO: dict[str, dict[int, float]] = {
    "bcast": {2: 4 * MiB, 8: UNBOUNDED},
    "allgather": {2: UNBOUNDED, 8: UNBOUNDED},
    "alltoall": {2: UNBOUNDED, 8: UNBOUNDED},
    "scatter": {2: 8 * MiB, 8: UNBOUNDED},
    "gather": {2: UNBOUNDED, 8: UNBOUNDED},
    "reduce": {2: 4 * MiB, 8: UNBOUNDED},
    "allreduce": {2: 4 * MiB, 8: MiB},
    "reduce_scatter_block": {2: 256 * KiB, 8: MiB},
}
#: the smallest block selection streams unasked, where not every call beyond a direct slot
AUTO_FROM: dict[str, dict[int, float]] = {"allreduce": {2: 512 * KiB, 8: 0}}


def auto_limit(collective: str, p: int) -> float:
    """The largest block selection streams unasked for ``collective`` on ``p`` ranks."""
    return _by_ranks(AUTO_UP_TO[collective], p)


def auto_floor(collective: str, p: int) -> float:
    """The smallest block selection streams unasked for ``collective`` on ``p`` ranks."""
    return _by_ranks(AUTO_FROM[collective], p) if collective in AUTO_FROM else 0


def _by_ranks(bounds: dict[int, Any], p: int) -> Any:
    """The entry of a table by rank count for ``p`` ranks: the first at or above ``p``, else
    the last."""
    return bounds[min((q for q in bounds if q >= p), default=max(bounds))]


AUTO = frozenset(AUTO_UP_TO)

#: header words of a chunk slot (one 64-byte line each); SOURCE: 0 for bytes in the slot,
#: else their address in the writer's memory (a reference chunk)
H_SEQ, H_CALL, H_FP, H_MASK, H_OFFSET, H_NBYTES, H_SOURCE = range(7)
#: results of `advance`, with MOVED or-ed in when anything was written, read or copied
DONE, STUCK, FOREIGN, FAILED = range(4)
MOVED = 4
#: state words of a call on one rank: chunks written, own-block bytes copied, the first
#: chunk of another call met (writer, call word, fingerprint), the reader a write or a
#: reference waits for, the writer whose reference could not be copied and the errno; then
#: the bytes received from each writer read, then per world rank the reference chunk + 1 it
#: must drain past (0: none)
S_WRITTEN, S_SELF, S_FOREIGN_WRITER, S_FOREIGN_CALL, S_FOREIGN_FP, S_BLOCKED_ON, \
    S_FAILED_WRITER, S_ERRNO, S_RECEIVED = range(9)
#: columns of a write row (one chunk) and of a writer row (one ring read)
W_SRC, W_NBYTES, W_MASK, W_OFFSET, W_REFERENCE = range(5)
#: where a write row's bytes go (W_REFERENCE): into the ring, or published by reference where
#: they are, in the send buffer or — once the own block is copied — in the receive buffer.
#: IN_OWN, an allgather's own block: from the receive buffer when the reader's destination
#: (where this rank copies its own block, if the ranks allocated alike) is aliased with the
#: send buffer (4 KiB aliasing, the kernel copy's slow case; the destinations then sit at the
#: source's page offsets, as MPICH's ring allgather always reads), else from whichever of the
#: two the compiled loop measured faster over the plan's first calls (`Plan.own_source`; the
#: Python loop takes the send buffer). The send buffer is readable at once and its lines are
#: clean, the receive buffer's were just written by the other core; but a larger array is
#: likelier on huge pages, which make the kernel's copy twice as fast. 2 ranks, interleaved
#: with MPICH in one sitting: 1-4 MiB blocks 0.54-0.57 of MPICH's time from send, 0.95-1.07
#: from recv; in another, 2 and 4 MiB 1.16 and 1.14 from send, ~1.0 from recv. W_SRC is the
#: send buffer's offset (`own_block_source`, `reference_of` in the C loop, say where).
IN_RING, IN_SEND, IN_RECV, IN_OWN = range(4)
R_RANK, R_FILLED, R_HEADERS, R_RING, R_DRAINED, R_DST, R_EXPECT, R_PID = range(8)
#: the block sizes (bytes, ``[low, high)``) a writer publishes each block of as one
#: *reference* chunk instead of copying it through its ring chunk by chunk (where the kernel
#: permits cross-memory attach), by collective and number of ranks as in `AUTO_UP_TO`
#: (absent: never). The reader copies the block with one process_vm_readv — one copy
#: instead of two, but on one core, and the kernel's copy has glibc's 4 KiB-aliasing slow
#: case (such reads go through a bounce buffer). An allgather's own block is published from
#: the send or the receive buffer (IN_OWN). Measured on 2 ranks, 2026-11-25, interleaved with
#: MPICH in the same processes and on the same buffers (docs/performance.md): the ring took
#: 1.08, 1.12, 1.37, 0.98 and 0.83 of MPICH's time at 1, 2, 4, 8 and 16 MiB, by reference
#: from the receive buffer 0.98, 1.02, 1.02, 1.01 and 0.92 (MPICH reads the same way from
#: 64 KiB up); later, with IN_OWN, 512 KiB by reference 0.90 of the ring's time (256 KiB
#: 1.13), 8-32 MiB 0.95-0.96 of it, and with NT stores for the own block only from 16 MiB
#: (`STREAMING_REFERENCES_FROM`), 16 and 32 MiB 0.70 of MPICH's time. alltoall (per-rank
#: sizes 1, 2, 4, 16 MiB; blocks of half that): the ring 1.15, 1.09, 1.10 of MPICH's time
#: (16 MiB: linear, 1.06), by reference 0.98, 0.97, 1.00, 0.80. All those ring figures
#: were taken while the ring's reads, aliased with numpy's arrays, went through `rep movsq`
#: (`copy_bytes`); once they went through a vector loop (2026-11-25, evening; two
#: interleaved runs, MPICH in the same processes) the ring took 0.81-0.90 of MPICH's time
#: for allgather blocks of 512 KiB to 2 MiB against 0.96-1.03 by reference, 1.04-1.06 at
#: 4 MiB against 0.99-1.02, 0.98-1.03 at 8 MiB against 0.96-0.98 and 0.86-0.89 at 16 MiB
#: alike; for alltoall blocks of 512 KiB to 2 MiB 0.82-0.96 against 0.93-1.19, of 4 MiB
#: 1.04-1.06 against 0.97-0.99, of 8 MiB 0.84-0.89 against 0.95-0.99 (the ring's own block
#: then with non-temporal stores). Then the ring's allgather copied its own block in the
#: pass that writes its chunks (`copy_twice`), through the cache (`STREAMING_FUSED_FROM`):
#: 1 MiB 0.73-0.80 against 0.83-0.84 by reference, 4 MiB 0.94-1.05 against 0.98-0.99,
#: 8 MiB 0.83-0.85 against 0.97-1.01, 16 MiB 0.80-0.83 against 0.91; without MPI in
#: between (`benchmarks/variants.py`, three runs) 4 MiB 420-444 µs against 487-534 and
#: 6 MiB 749-759 against 869-905, so the table no longer sends an allgather by reference
#: (`IN_OWN` stays, tested, for a table that does); alltoall blocks of 4 and 6 MiB
#: by reference 557-656 and 1023-1220 µs against the ring's 602-677 and 1109-1270.
#: Elsewhere the ring won: bcast 2-3x (a root whose core would otherwise idle pipelines
#: better through its ring), allgather at 4 ranks on 2 cores mixed (256 KiB 1.53, 1 MiB
#: 0.79, 4 MiB 1.16 of the ring's time).
BY_REFERENCE: dict[str, dict[int, tuple[float, float]]] = {
    "alltoall": {2: (4 * MiB, 8 * MiB), 8: (UNBOUNDED, UNBOUNDED)},
}


def by_reference(collective: str, p: int, nbytes: int) -> bool:
    """Whether a block of ``nbytes`` of ``collective`` on ``p`` ranks goes by reference."""
    bounds = BY_REFERENCE.get(collective)
    if not bounds:
        return False
    low, high = _by_ranks(bounds, p)
    return bool(low <= nbytes < high)


#: bytes received in one call from which the compiled loop copies into the receive buffer
#: with non-temporal stores (`copy_streaming` in ``_shm_wait.h``), for a rank that also
#: writes and for one that only reads. 2 ranks, 16 MiB: bcast 1.6 -> 0.8 ms, allgather
#: 4.3 -> 3.6 ms, alltoall 2.1 -> 1.7 ms. Below, the cache paid off for a rank that also
#: writes its ring (4 MiB allgather, 8 MiB received: 0.65 against 0.81 ms; alltoall
#: 0.30 against 0.41) but not for a bcast's readers (4 MiB: 0.24 against 0.29 ms).
STREAMING_STORES_FROM = 16 * MiB
STREAMING_READER_FROM = 4 * MiB
#: the same for a call whose blocks go by reference (only the own block's copy is the loop's):
#: 2-rank allgather of 8 MiB blocks (16 MiB received) 0.99-1.02 of MPICH's time with cached
#: stores against 1.19, of 16 MiB blocks 0.70-0.72 with streaming stores against 0.98-1.01
STREAMING_REFERENCES_FROM = 32 * MiB
#: the same for a call through the rings whose own block is copied in the same pass as its
#: ring chunks (`copy_twice` in ``_shm_wait.h``; an allgather): never — its source is read
#: once and its destination lines then are better written through the cache (2-rank
#: allgather, 8 / 16 / 32 MiB blocks: 1.10 / 2.79 / 6.44 ms cached against 1.22 / 2.96-3.01 /
#: 6.69-6.87 streaming). A call in place skips the own copy; its reads stay cached too
STREAMING_FUSED_FROM = UNBOUNDED
#: seconds the compiled loop spins for its peers before returning to Python to wait
SPIN = 20e-6
#: the same when ranks outnumber cores (a late peer then needs this rank's core)
SPIN_OVERSUBSCRIBED = 2e-6


def register() -> None:
    """Add an ``shm_stream`` record to every supported collective."""
    ranks = Restriction("at_most_64_ranks", "the communicator has at most 64 ranks",
                        lambda spec: spec.size <= 64)
    native = NativeAlgorithm(start, bind)
    for collective in SUPPORTED:
        add_algorithm(Algorithm(
            collective, NAME, f"{collective} streamed chunk by chunk through each rank's ring "
            "in shared memory, written and read at once, no messages", _no_schedule,
            restrictions=(ranks,), cost=stream_cost,
            needs=frozenset({shm_direct.RESOURCE, RESOURCE}), native=native,
            transports=shm_direct.TRANSPORTS, in_place=collective in IN_PLACE))


def _no_schedule(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    raise ScheduleError(
        f"{spec.collective}[{NAME}] streams through shared-memory rings; it is not a schedule "
        "and cannot be built, validated, simulated or costed step by step")


def stream_cost(spec: CallSpec, model: CostModel) -> float:
    """A quarter α plus one block's bytes at half the model's β, for the calls of the
    collectives in `AUTO` too large for a direct slot and no larger than `AUTO_UP_TO`;
    infinite (taken only when asked for by name, which works at any size) for the others.

    A calibration rather than a model of the copies (a byte is copied twice, into the ring
    and out of it, but both copies run at once on different ranks and in C): within those
    bounds the stream measured faster than the schedules selection took before, and this
    cost is below theirs (one synchronisation instead of at least one α per message).
    """
    n, p = spec.count * spec.itemsize, spec.size
    if spec.collective not in AUTO or (
            shm_direct.fits_a_slot(spec)):
        return math.inf  # shm_direct's calls (and the envelopes of bcast), or by name only
    if not auto_floor(spec.collective, p) <= n <= auto_limit(spec.collective, p):
        return math.inf  # measured slower than the schedules' messages
    return 0.25 * model.alpha + 0.5 * n * model.beta  # below shm_cma's and the schedules'


# -- plans: what a rank writes and reads in one call signature ---------------------------------
def plan_for(area: StreamArea, spec: CallSpec, group: tuple[int, ...], index: int,
             call: CallSpec | None = None) -> Prepared:
    """The (cached, on the area) plan of ``spec`` for group member ``index``: compiled or
    `PyPlan`. ``call``: the user's call ``spec`` is a phase of, whose fingerprint it carries
    (default: ``spec``'s own)."""
    compiled = _stream is not None and config.settings.compiled
    return shm_direct.kept(  # type: ignore[no-any-return]
        area.memo, (NAME, spec, group, index, compiled, call),
        lambda: _make_plan(area, spec, group, index, compiled, call or spec), limit=256)


def _make_plan(area: StreamArea, spec: CallSpec, group: tuple[int, ...], index: int,
               compiled: bool, call: CallSpec) -> Prepared:
    t = area.transport
    whole = t.capabilities().single_copy and by_reference(
        spec.collective, spec.size, spec.count * spec.itemsize)
    writes, readers, own = _layout_of(spec, index, area.chunk_bytes, whole)
    me = area.me
    rows = [(group[w], area.filled[group[w]], area.headers[group[w]], area.rings[group[w]],
             area.drained[group[w]][me], dst, expect, t.pid_word(group[w]))
            for w, dst, expect in readers]
    own_block = IN_OWN if spec.collective == "allgather" and own[2] > 0 else IN_SEND
    write_rows = [(src, n, sum(1 << group[r] for r in mask), offset,
                   own_block if whole else IN_RING) for src, n, mask, offset in writes]
    sleepers = [r for r in group if r != me]
    fields: dict[str, Any] = dict(
        segment=t.segment_map, cursors=area.cursors, me=me, nchunks=area.nchunks,
        chunk_bytes=area.chunk_bytes, my_filled=area.filled[me],
        my_headers=area.headers[me], my_ring=area.rings[me],
        writes=np.array(write_rows, np.int64).reshape(-1, 5),
        drained_of_me=np.array(area.drained[me], np.int64),
        writers=np.array(rows, np.int64).reshape(-1, 8), self_copy=own,
        sleeper_words=[t.sleeping_word(r) for r in sleepers], sleeper_ranks=sleepers,
        wake=t.wake)
    received = own[2] + sum(r[R_EXPECT] for r in rows)
    # the own block's copy starts where the ring chunks do: the compiled loop writes both in
    # one pass (`copy_twice`) — an allgather's, a bcast root's with an ``out`` of its own
    fused = not whole and own[2] > 0 and bool(writes) and writes[0][0] == own[0]
    streaming = received >= (STREAMING_REFERENCES_FROM if whole else STREAMING_FUSED_FROM
                             if fused else STREAMING_STORES_FROM if write_rows
                             else STREAMING_READER_FROM)
    plan = (_stream.Plan(**fields, streaming=streaming) if compiled
            else PyPlan(area, **fields))
    state = np.zeros(S_RECEIVED + len(rows) + len(area.cursors) - 1, np.int64)
    state[S_FOREIGN_WRITER] = state[S_BLOCKED_ON] = state[S_FAILED_WRITER] = -1
    return Prepared(plan, len(write_rows), [group.index(r[0]) for r in rows],
                    [r[R_EXPECT] for r in rows], own,
                    shm_direct.call_fingerprint(call, NAME), state, call.collective)


@dataclass(frozen=True)
class Prepared:
    """One call signature's plan on one rank, with what the Python side needs of it."""

    plan: Any
    nwrites: int
    #: group rank of each writer read, and the bytes expected from it
    writers: list[int]
    expects: list[int]
    own: tuple[int, int, int]
    #: the call's fingerprint, and the state array a call starts from (copied per call)
    fingerprint: int
    state: np.ndarray
    #: the user's collective (an allreduce for the phases of one), for error messages
    collective: str


def _layout_of(spec: CallSpec, me: int, chunk: int, whole: bool = False) -> tuple[
        list[tuple[int, int, tuple[int, ...], int]], list[tuple[int, int, int]],
        tuple[int, int, int]]:
    """What group member ``me`` writes, reads and copies itself in a call of ``spec``, in
    chunks of ``chunk`` bytes — or, when ``whole``, a block a chunk
    (the reference chunks `_make_plan` marks).

    Writes: chunks ``(src byte in send, bytes, readers (group ranks), offset in the reader's
    block)``; reads: ``(writer, byte of its block in recv, bytes expected)``; own: ``(src, dst,
    bytes)`` of the rank's own block copy. A reduce moves what a gather moves, a
    reduce_scatter_block what an alltoall does, into the folding ranks' scratch, where the
    rank's own contribution has no place: it is folded from where it is.
    """
    c, p, root = spec.collective, spec.size, spec.root
    folded = c in FOLDED
    c = {"reduce": "gather", "reduce_scatter_block": "alltoall"}.get(c, c)
    nb = spec.count * spec.itemsize
    pieces = range(0, nb, nb if whole and nb else chunk)
    others = [(me + d) % p for d in range(1, p)]
    writes: list[tuple[int, int, tuple[int, ...], int]] = []
    reads: list[tuple[int, int, int]] = []
    own = (0, 0, 0)
    if c in ("bcast", "allgather", "gather"):
        writing = c == "allgather" or (me == root) == (c == "bcast")
        if writing:
            mask = (root,) if c == "gather" else tuple(others)
            writes = [(t, min(pieces.step, nb - t), mask, t) for t in pieces]
        if c == "bcast":
            if me != root:
                reads = [(root, 0, nb)]
            else:
                own = (0, 0, nb)
        elif c == "allgather" or me == root:
            reads = [(w, w * nb, nb) for w in others]
            own = (0, me * nb, nb)
    else:  # scatter, alltoall: one block per reader, interleaved chunk by chunk
        if c == "alltoall" or me == root:
            writes = [(r * nb + t, min(pieces.step, nb - t), (r,), t) for t in pieces
                      for r in others]
        if c == "alltoall":
            reads = [(w, w * nb, nb) for w in others]
            own = (me * nb, me * nb, nb)
        elif me == root:
            own = (me * nb, 0, nb)
        else:
            reads = [(root, 0, nb)]
    if nb == 0:
        reads = []
    return writes, reads, (0, 0, 0) if folded or nb == 0 else own


def own_block_source(own: tuple[int, int, int], src: int, nbytes: int, send: int,
                     recv: int) -> int:
    """Where an allgather publishes the ``nbytes`` at ``src`` of its own block (IN_OWN):
    IN_SEND, or IN_RECV when a reader whose buffers sit as this rank's would copy them
    aliased."""
    to = recv + own[1] + src - own[0]
    return IN_RECV if seg.aliased(to, send + src, nbytes) else IN_SEND


# -- the protocol in Python (when the extension is missing or COLLOPS_COMPILED=0) ---------------
class PyPlan:
    """`collops.shm._stream.Plan` in Python: the same protocol, chunk for chunk."""

    def __init__(self, area: StreamArea, *, segment: Any, cursors: np.ndarray, me: int,
                 nchunks: int, chunk_bytes: int, my_filled: int, my_headers: int,
                 my_ring: int, writes: np.ndarray, drained_of_me: np.ndarray,
                 writers: np.ndarray, self_copy: tuple[int, int, int],
                 sleeper_words: Sequence[int], sleeper_ranks: Sequence[int],
                 wake: Callable[[int], None]) -> None:
        self.words, self.cursor, self.me = area.words, cursors, me
        self.size = len(cursors) - 1
        self.nchunks, self.chunk_bytes = nchunks, chunk_bytes
        self.my_filled, self.my_headers, self.my_ring = my_filled, my_headers // 8, my_ring
        self.write = writes.tolist()
        self.drained = drained_of_me.tolist()
        self.writer = writers.tolist()
        self.own = self_copy
        self.base = area.transport.segment_address
        self.transport, self.group = area.transport, list(sleeper_ranks) + [me]
        #: where in a state array the words of the references to drain begin
        self.must_drain = S_RECEIVED + len(self.writer)

    def _slot_free(self, c: int, state: np.ndarray) -> bool:
        if c < self.nchunks:
            return True
        words = self.words
        mask = words[self.my_headers + 8 * (c % self.nchunks) + H_MASK]
        need = c - self.nchunks + 1
        for r in _bits(mask):
            if words[self.drained[r]] < need:
                state[S_BLOCKED_ON] = r
                return False
        return True

    def _reference_of(self, row: np.ndarray, send: int, recv: int) -> int:
        """Where write ``row`` is published from in this call (see IN_OWN)."""
        kind = int(row[W_REFERENCE])
        if kind != IN_OWN:
            return kind
        return own_block_source(self.own, int(row[W_SRC]), int(row[W_NBYTES]), send, recv)

    def _write_one(self, state: np.ndarray, send: int, recv: int, word: int,
                   fingerprint: int) -> int:
        i = int(state[S_WRITTEN])
        if i >= len(self.write):
            return 0
        reference = self._reference_of(self.write[i], send, recv)
        if reference == IN_RECV and state[S_SELF] < self.own[2]:
            return 0
        c = int(self.cursor[self.size])
        if not self._slot_free(c, state):
            return 0
        state[S_BLOCKED_ON] = -1
        src, n, mask, offset, kind = self.write[i]
        if reference == IN_RECV and kind == IN_OWN:
            src += self.own[1] - self.own[0]
        slot, words = c % self.nchunks, self.words
        h = self.my_headers + 8 * slot
        words[h + H_SEQ] = 0
        words[h + H_CALL], words[h + H_FP], words[h + H_MASK] = word, fingerprint, mask
        words[h + H_OFFSET], words[h + H_NBYTES] = offset, n
        if reference:
            words[h + H_SOURCE] = (recv if reference == IN_RECV else send) + src
            for r in _bits(mask):
                state[self.must_drain + r] = c + 1
        else:
            words[h + H_SOURCE] = 0
            ctypes.memmove(self.base + self.my_ring + slot * self.chunk_bytes, send + src, n)
        words[h + H_SEQ] = c + 1
        words[self.my_filled] = c + 1
        self.cursor[self.size] = c + 1
        state[S_WRITTEN] = i + 1
        return 1

    def _read_from(self, k: int, state: np.ndarray, recv: int, word: int, limit: int) -> int:
        rank, filled_word, headers, ring, drained, dst, expect, _ = self.writer[k]
        received = int(state[S_RECEIVED + k])
        if received >= expect:
            return 0
        words, nchunks = self.words, self.nchunks
        cur = start = int(self.cursor[rank])
        filled = words[filled_word]
        cur = max(cur, filled - nchunks)
        bit, moved, foreign, failed = 1 << self.me, 0, False, False
        while cur < filled and moved < limit and received < expect:
            slot = cur % nchunks
            h = headers // 8 + 8 * slot
            seq = words[h + H_SEQ]
            if seq != cur + 1:
                cur += 1
                continue
            mask, call, fingerprint = words[h + H_MASK], words[h + H_CALL], words[h + H_FP]
            offset, n, source = words[h + H_OFFSET], words[h + H_NBYTES], words[h + H_SOURCE]
            if words[h + H_SEQ] != seq or not mask & bit:
                cur += 1
                continue
            if call != word:
                state[S_FOREIGN_WRITER], foreign = rank, True
                state[S_FOREIGN_CALL], state[S_FOREIGN_FP] = _signed(call), _signed(fingerprint)
                break
            if source:
                try:
                    self.transport.read_from(rank, source, recv + dst + offset, n)
                except TransportError as e:  # as the compiled loop reports it
                    state[S_FAILED_WRITER], failed = rank, True
                    state[S_ERRNO] = errno.ESRCH if isinstance(e, PeerFailed) else 0
                    break
            else:
                ctypes.memmove(recv + dst + offset, self.base + ring + slot * self.chunk_bytes,
                               n)
            received += n
            cur += 1
            moved += 1
        state[S_RECEIVED + k] = received
        if cur != start:
            self.cursor[rank] = cur
            words[drained] = cur
        if failed:
            return -2
        return -1 if foreign and not moved else moved + (cur != start)

    def _self_copy_some(self, state: np.ndarray, send: int, recv: int) -> bool:
        src, dst, n = self.own
        done = int(state[S_SELF])
        if done >= n:
            return False
        piece = min(n - done, self.chunk_bytes)
        if recv + dst != send + src:
            ctypes.memmove(recv + dst + done, send + src + done, piece)
        state[S_SELF] = done + piece
        return True

    def _moved_all(self, state: np.ndarray) -> bool:
        if state[S_WRITTEN] < len(self.write) or state[S_SELF] < self.own[2]:
            return False
        return all(state[S_RECEIVED + k] >= row[R_EXPECT] for k, row in enumerate(self.writer))

    def _references_drained(self, state: np.ndarray) -> bool:
        words, base = self.words, self.must_drain
        for r in range(self.size):
            need = state[base + r]
            if need and words[self.drained[r]] < need:
                state[S_BLOCKED_ON] = r
                return False
        state[S_BLOCKED_ON] = -1
        return True

    def _finished(self, state: np.ndarray) -> bool:
        return self._moved_all(state) and self._references_drained(state)

    def advance(self, state: np.ndarray, send: int, recv: int, word: int, fingerprint: int,
                may_write: bool, spin: float) -> int:
        """Everything that can move now (spinning at most ``spin`` s): DONE, STUCK or FOREIGN,
        with MOVED or-ed in when anything moved."""
        state[S_FOREIGN_WRITER] = -1
        status, touched, copied, stop = STUCK, False, False, 0.0
        written = int(state[S_WRITTEN])
        if may_write and written < len(self.write) and \
                self._reference_of(self.write[written], send, recv) == IN_RECV:
            while self._self_copy_some(state, send, recv):  # the own block first
                copied = True
        while True:
            moved, foreign = 0, False
            if may_write:
                moved += self._write_one(state, send, recv, word, fingerprint)
            for k in range(len(self.writer)):
                got = self._read_from(k, state, recv, word, 2)
                if got == -2:
                    return FAILED | (MOVED if touched or copied else 0)
                if got < 0:
                    foreign = True
                else:
                    moved += got
            if moved and not touched:
                touched = True
                self.transport.wake_sleepers(self.group)
            if not moved and self._self_copy_some(state, send, recv):
                copied = True
                continue
            if self._finished(state):
                status = DONE
                break
            if moved:
                stop = 0.0
                continue
            if foreign:
                status = FOREIGN
                break
            t = time.perf_counter()
            if not stop:
                stop = t + spin
            if t >= stop:
                break
        if touched:
            self.transport.wake_sleepers(self.group)
        return status | (MOVED if touched or copied else 0)

    def ready(self, state: np.ndarray, send: int, recv: int, word: int, fingerprint: int,
              may_write: bool) -> bool:
        """Whether `advance` can move now."""
        if may_write and state[S_WRITTEN] < len(self.write) and self._slot_free(
                int(self.cursor[self.size]), state):
            return True
        words, foreign = self.words, state[S_FOREIGN_WRITER]
        for k, row in enumerate(self.writer):
            if (state[S_RECEIVED + k] < row[R_EXPECT] and row[R_RANK] != foreign
                    and words[row[R_FILLED]] > self.cursor[row[R_RANK]]):
                return True
        if state[S_SELF] < self.own[2]:
            return True
        return self._moved_all(state) and self._references_drained(state)


def _addresses(prepared: Prepared, send: np.ndarray | None, recv: np.ndarray | None
               ) -> tuple[int, int]:
    """The addresses `Plan.advance` takes for ``send`` and ``recv``."""
    send_address = address_of(send)
    if recv is not None:
        return send_address, address_of(recv)
    # without a receive buffer (a bcast root's may be its send buffer, or none) the own copy
    # is skipped: the addresses given make source and destination coincide
    src, dst, _ = prepared.own
    return send_address, send_address + src - dst


def _bits(mask: int) -> list[int]:
    """The positions of the set bits of ``mask``, lowest first."""
    return [r for r in range(mask.bit_length()) if mask >> r & 1]


def _signed(v: int) -> int:
    """A u64 word as the int64 a state array holds."""
    return v - (1 << 64) if v >= 1 << 63 else v


# -- the call ----------------------------------------------------------------------------------
class StreamExecution:
    """An ``shm_stream`` call in flight, polled like an `Execution` (``poll``, ``left``)."""

    __slots__ = ("transport", "direct", "area", "spec", "prepared", "rank", "plan", "nwrites",
                 "state", "send", "recv", "send_address", "recv_address", "fingerprint",
                 "word", "expect", "tag", "deadline", "spin", "left", "moved", "__weakref__")

    def __init__(self, transport: ShmTransport, direct: DirectArea, area: StreamArea,
                 spec: CallSpec, prepared: Prepared, rank: int, send: np.ndarray | None,
                 recv: np.ndarray | None, seq: int, phase: int, context: int,
                 timeout: float | None, state: np.ndarray | None = None) -> None:
        self.transport, self.direct, self.area, self.spec = transport, direct, area, spec
        self.prepared, self.rank = prepared, rank
        self.plan, self.nwrites = prepared.plan, prepared.nwrites
        # ``state``: where a first `advance` without this object left the call
        self.state = prepared.state.copy() if state is None else state
        self.send, self.recv = send, recv  # held while the call runs
        self.send_address, self.recv_address = _addresses(prepared, send, recv)
        fingerprint = self.fingerprint = prepared.fingerprint
        k = call_number(seq, phase)
        self.word = word = held_word(k, fingerprint)
        self.expect = (slot_of(seq, phase), word, fingerprint)
        self.tag = call_tag(context, seq, phase)
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.spin = _spin(transport)
        self.left = 1
        self.moved = False
        area.active.append(self)
        if self.state[S_WRITTEN] < self.nwrites:
            area.unwritten.append(self)
        transport.watch_direct(self._ready)

    @property
    def what(self) -> str:
        """Who runs what, for error messages."""
        return f"rank {self.rank}: {self.prepared.collective}[{NAME}]"

    def _may_write(self) -> bool:
        unwritten = self.area.unwritten
        return bool(unwritten) and unwritten[0] is self

    def _advance(self, spin: float) -> int:
        """`Plan.advance` for this call: its status; ``self.moved`` says whether it moved."""
        may_write = self._may_write()
        status = self.plan.advance(self.state, self.send_address, self.recv_address,
                                   self.word, self.fingerprint, may_write, spin)
        if may_write and self.state[S_WRITTEN] >= self.nwrites:
            self.area.unwritten.popleft()
        self.moved = bool(status & MOVED)
        return int(status & ~MOVED)

    def _ready(self) -> bool:
        return bool(self.plan.ready(self.state, self.send_address, self.recv_address,
                                    self.word, self.fingerprint, self._may_write()))

    def poll(self, spin: float = 0.0) -> bool:
        """Advance without waiting (beyond ``spin`` s); True once the call is done here."""
        if not self.left:
            return True
        try:
            status = self._advance(spin)
            moved = self.moved
            if status == FOREIGN:
                # a chunk of another call this rank has begun: give it to that call
                for other in list(self.area.active):
                    if other is not self and other.left:
                        other._advance(0.0)
                status = self._advance(0.0)
                moved |= self.moved
            if status == DONE:
                self._end()
                return True
            if status == FAILED:
                self._failed()
            if status == FOREIGN or not moved:
                self._check()  # only when stuck: the checks cost more than a chunk
        except BaseException:
            self._end()
            raise
        return False

    def _awaited(self) -> list[int]:
        """The group ranks this call waits for: writers not fully read, a reader to drain."""
        state, prepared, group = self.state, self.prepared, self.direct.group
        out = [m for k, (m, expect) in enumerate(zip(prepared.writers, prepared.expects,
                                                     strict=True))
               if state[S_RECEIVED + k] < expect]
        blocked = int(state[S_BLOCKED_ON])  # a slot to reuse, or a reference to drain
        if blocked >= 0 and blocked in group:
            out.append(group.index(blocked))
        return sorted(set(out))

    def _failed(self) -> None:
        """Raise for the reference chunk `advance` could not copy: `PeerFailed` naming the
        writer when its process is gone, else a `TransportError`."""
        writer, err = int(self.state[S_FAILED_WRITER]), int(self.state[S_ERRNO])
        error = self.transport.single_copy_error(
            writer, err, os.strerror(err) if err else "process_vm_readv failed")
        member = self.direct.group.index(writer)
        if isinstance(error, PeerFailed):
            raise PeerFailed(member, f"{self.what}: reading its buffer: {error}")
        raise TransportError(f"{self.what}: reading rank {member}'s buffer: {error}")

    def _check(self) -> None:
        state = self.state
        writer = int(state[S_FOREIGN_WRITER])
        if writer >= 0:
            call = int(state[S_FOREIGN_CALL]) & (2**64 - 1)
            if call >> 24 == self.word >> 24 and call != self.word:
                theirs = int(state[S_FOREIGN_FP]) & (2**64 - 1)
                member = self.direct.group.index(writer)
                raise CollectiveMismatch(
                    f"{self.what}: called {fp.describe(self.fingerprint)} but rank {member} "
                    f"called {fp.describe(theirs)} at the same point")
        self.direct.check(self._awaited, self.deadline, self.what, self.tag, fp.describe,
                          self.expect)

    def wait(self) -> None:
        """Block until done (nothing else in flight to progress meanwhile)."""
        while not self.poll(self.spin):
            self.direct.wait(self._ready, self._awaited, self.deadline, self.what, self.tag,
                             fp.describe, self.expect)

    def _end(self) -> None:
        if self.left:
            self.left = 0
            area = self.area
            area.active.remove(self)
            if self in area.unwritten:
                area.unwritten.remove(self)
            self.transport.unwatch_direct(self._ready)
            self.send = self.recv = None


def _areas_of(call: NativeCall) -> tuple[ShmTransport, DirectArea, StreamArea]:
    transport, direct = shm_direct.area_of(call)
    area = transport.stream_area(call.context)
    if area is None:
        raise ScheduleError(f"{NAME}: communicator context {call.context} has no stream area")
    return transport, direct, area


class FoldingExecution:
    """A stream ``reduce`` (at its root) or ``reduce_scatter_block`` in flight, polled like an
    `Execution`: the contributions streamed into a scratch buffer, one row per rank
    (``inner``), then folded in rank order into the result, the rank's own contribution
    (``own``, at row ``position``) taken from where it is."""

    def __init__(self, inner: StreamExecution, pool: list[np.ndarray], scratch: np.ndarray,
                 own: np.ndarray, position: int, recv: np.ndarray) -> None:
        self.inner, self.pool, self.scratch = inner, pool, scratch
        self.own, self.position, self.recv = own, position, recv
        self.deadline, self.spin, self.left = inner.deadline, inner.spin, 1

    def poll(self, spin: float = 0.0) -> bool:
        """Advance the gather; fold once it is done. True once the call is done here."""
        if not self.left:
            return True
        try:
            if not self.inner.poll(spin):
                return False
            self._fold()
            return True
        finally:
            if not self.inner.left:  # done, or ended by an error
                self._release()

    def wait(self) -> None:
        """Block until done."""
        try:
            self.inner.wait()
            self._fold()
        finally:
            self._release()

    def _fold(self) -> None:
        spec, out = self.inner.spec, self.recv
        op, p = spec.op, spec.size
        assert op is not None
        rows = self.scratch.reshape(p, -1)
        parts = [self.own if k == self.position else rows[k] for k in range(p)]
        if p == 1:
            if out is not parts[0]:
                np.copyto(out, parts[0])
            return
        # the first two in one pass: ``out`` is never ``parts[1:]`` (an in-place rank's own
        # contribution past position 0 was copied in `_execution`)
        op.combine_into(out, parts[0], parts[1])
        for part in parts[2:]:
            op.combine_into(out, out, part)

    def _release(self) -> None:
        if self.left:
            self.left = 0
            self.pool.append(self.scratch)
            self.own = self.recv = self.scratch = None  # type: ignore[assignment]


def _folds(spec: CallSpec, rank: int) -> bool:
    """Whether group member ``rank`` folds in a call of ``spec`` (`FoldingExecution`)."""
    return spec.collective == "reduce_scatter_block" or (
        spec.collective == "reduce" and rank == spec.root)


def _execution(transport: ShmTransport, direct: DirectArea, area: StreamArea, spec: CallSpec,
               prepared: Prepared, rank: int, send: np.ndarray | None,
               recv: np.ndarray | None, seq: int, phase: int, context: int,
               timeout: float | None) -> StreamExecution | FoldingExecution:
    """The execution of one call: a `StreamExecution`, wrapped in a `FoldingExecution` where
    the rank folds."""
    if not _folds(spec, rank) or recv is None:
        return StreamExecution(transport, direct, area, spec, prepared, rank, send, recv, seq,
                               phase, context, timeout)
    assert send is not None
    n = spec.count
    own, position = ((send, spec.root) if spec.collective == "reduce"
                     else (send[rank * n:(rank + 1) * n], rank))
    if position and np.may_share_memory(own, recv):
        own = own.copy()  # in place: the fold writes the result before the rank's turn
    pool = _pool(area, spec.dtype, spec.size * n)
    scratch = pool.pop() if pool else np.empty(spec.size * n, spec.dtype)
    inner = StreamExecution(transport, direct, area, spec, prepared, rank, send, scratch, seq,
                            phase, context, timeout)
    return FoldingExecution(inner, pool, scratch, own, position, recv)


def _pool(area: StreamArea, dtype: np.dtype, count: int) -> list[np.ndarray]:
    """The free scratch buffers of ``count`` items of ``dtype`` kept on ``area``."""
    pool = area.memo.setdefault((NAME, "scratch", dtype, count), [])
    assert isinstance(pool, list)
    return pool


class ChainExecution:
    """An allreduce in flight, polled like an `Execution`: its two phases one after the other
    (``phase``, ``phase + 1``), each a stream call carrying the allreduce's fingerprint."""

    def __init__(self, phases: list[Callable[[float | None], Any]],
                 deadline: float | None) -> None:
        self.phases, self.deadline = phases, deadline
        self.index, self.left = 0, 1
        self.current = phases[0](self._remaining())
        self.spin = self.current.spin

    def _remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def poll(self, spin: float = 0.0) -> bool:
        """Advance the current phase, starting the next once it is done; True once the call
        is done here."""
        if not self.left:
            return True
        try:
            while self.current.poll(spin):
                self.index += 1
                if self.index == len(self.phases):
                    self.left = 0
                    return True
                self.current = self.phases[self.index](self._remaining())
        except BaseException:
            self.left = 0
            raise
        return False

    def wait(self) -> None:
        """Block until done."""
        while not self.poll(self.spin):
            self.current.wait()


def _chain(transport: ShmTransport, direct: DirectArea, area: StreamArea, spec: CallSpec,
           rank: int, send: np.ndarray | None, recv: np.ndarray | None, seq: int, phase: int,
           context: int, timeout: float | None) -> ChainExecution:
    """An allreduce as two stream phases: a reduce-scatter into the rank's block of the
    result, then an allgather of the blocks; or, when the count does not divide among the
    ranks, a reduce to rank 0, then a bcast from it."""
    p, n, dt, op = spec.size, spec.count, spec.dtype, spec.op
    assert send is not None and recv is not None
    group = tuple(direct.group)
    ends: list[tuple[np.ndarray | None, np.ndarray | None]]  # (send, recv) of each phase
    if n % p == 0:
        b = n // p
        first = make_spec("reduce_scatter_block", p, dt, count=b, op=op)
        then = make_spec("allgather", p, dt, count=b)
        mine = recv[rank * b:(rank + 1) * b]
        ends = [(send, mine), (mine, recv)]
    else:
        first = make_spec("reduce", p, dt, count=n, root=0, op=op)
        then = make_spec("bcast", p, dt, count=n, root=0)
        # rank 0 reduces into its result and broadcasts it in place
        ends = [(send, recv if rank == 0 else None), (recv if rank == 0 else None,
                                                      None if rank == 0 else recv)]
    plans = [plan_for(area, s, group, rank, spec) for s in (first, then)]

    def reduce(remaining: float | None) -> Any:
        return _execution(transport, direct, area, first, plans[0], rank, *ends[0], seq,
                          phase, context, remaining)

    def spread(remaining: float | None) -> Any:
        return StreamExecution(transport, direct, area, then, plans[1], rank, *ends[1], seq,
                               phase + 1, context, remaining)

    deadline = None if timeout is None else time.monotonic() + timeout
    return ChainExecution([reduce, spread], deadline)


def start(call: NativeCall, send: np.ndarray | None, recv: np.ndarray | None, seq: int,
          phase: int, timeout: float | None
          ) -> StreamExecution | FoldingExecution | ChainExecution:
    """Start ``call`` (its number ``seq``, phase ``phase``) through its stream area."""
    transport, direct, area = _areas_of(call)
    spec, rank, context = call.spec, call.rank, call.context
    ex: StreamExecution | FoldingExecution | ChainExecution
    if spec.collective in CHAINED:
        ex = _chain(transport, direct, area, spec, rank, _flat(send), _flat(recv), seq,
                    phase, context, timeout)
    else:
        prepared = plan_for(area, spec, tuple(direct.group), rank)
        ex = _execution(transport, direct, area, spec, prepared, rank, _flat(send),
                        _flat(recv), seq, phase, context, timeout)
    ex.poll()
    return ex


def _flat(a: np.ndarray | None) -> np.ndarray | None:
    return None if a is None else a.reshape(-1)


def _spin(transport: ShmTransport) -> float:
    """Seconds the compiled loop spins before returning to Python to wait."""
    return SPIN_OVERSUBSCRIBED if transport.oversubscribed else SPIN


def bind(call: NativeCall, length_prefix: tuple[int, int] | None = None) -> Callable[..., None]:
    """The blocking form: ``fn(send, recv, seq, timeout, phase=0)`` (``length_prefix``
    changes nothing here)."""
    transport, direct, area = _areas_of(call)
    progress, spec = call.progress, call.spec
    rank, context = call.rank, call.context
    chained = spec.collective in CHAINED
    # held: the memo may forget it
    prepared = None if chained else plan_for(area, spec, tuple(direct.group), rank)
    # a call that does not fold may run in one `advance`, before any object is made for it
    alone = None if prepared is None or _folds(spec, rank) else prepared
    spin = _spin(transport)

    def fn(send: np.ndarray | None, recv: np.ndarray | None, seq: int,
           timeout: float | None, phase: int = 0) -> None:
        flat_send, flat_recv = _flat(send), _flat(recv)
        ex: StreamExecution | FoldingExecution | ChainExecution
        if alone is not None and not progress.active and not area.active:
            # nothing else in flight here: the whole call in C, as a rule; else on from there
            state = alone.state.copy()
            fingerprint = alone.fingerprint
            status = alone.plan.advance(state, *_addresses(alone, flat_send, flat_recv),
                                        held_word(call_number(seq, phase), fingerprint),
                                        fingerprint, True, spin)
            if status & ~MOVED == DONE:
                return
            ex = StreamExecution(transport, direct, area, spec, alone, rank, flat_send,
                                 flat_recv, seq, phase, context, timeout, state)
        elif prepared is None:
            ex = _chain(transport, direct, area, spec, rank, flat_send, flat_recv, seq, phase,
                        context, timeout)
        else:
            ex = _execution(transport, direct, area, spec, prepared, rank, flat_send,
                            flat_recv, seq, phase, context, timeout)
        if progress.active or len(area.active) > 1:
            if not ex.poll(ex.spin):
                progress.wait(ex)
        else:
            ex.wait()

    return fn
