"""``shm_stream``: large collectives on one machine, streamed chunk by chunk through rings.

A large call as a schedule of point-to-point messages pays the transport's Python per chunk
on both sides; ``shm_cma`` avoids copies but makes every rank wait for every peer twice.
Here each rank of a communicator with a *stream area* (the first ``stream_areas`` contexts
of the job segment) owns a ring of ``stream_chunks`` slots of ``stream_chunk_bytes``; per
call, every rank streams its contribution into its own ring and, at the same time, copies
the chunks it needs out of the rings of the ranks it reads — in C (`collops.shm.
_stream`) where it was built, else with the same protocol in Python (`PyPlan`):

* ``bcast``: the root writes, every other rank reads every chunk;
* ``allgather``: every rank writes its block (and copies it into its own output in the same
  pass over its input, `copy_twice`), every rank reads every other rank's;
* ``alltoall``: every rank writes its blocks for the others, interleaved chunk by chunk so
  each reader is fed at the same rate, and each chunk has one reader;
* ``scatter``/``gather``: the root writes one block per rank / reads one from each;
* ``reduce``: a gather of the contributions, which the root folds into its result in rank
  order, ``x0 ∘ x1 ∘ … ∘ x(p−1)`` as MPI specifies for any operator: each chunk straight
  from the ring as it reads it where the compiled kernels implement the operator and dtype
  (``fold_as_read`` in ``stream_plan``, the order kept as ``_stream.c`` describes), else
  gathered into a scratch buffer kept between calls and folded after with `Op.combine_into`
  (`FoldingExecution`). With more ranks than cores the copies into the rings run on the
  other core meanwhile, and no rank waits for a peer per step;
* ``reduce_scatter_block``: an alltoall, each rank folding its block in rank order the same
  way;
* ``allreduce``: that reduce-scatter into the rank's block of the result, then an allgather
  of the blocks, as two phases of the call (`ChainExecution`); when the count does not
  divide among the ranks, a reduce to rank 0 and a bcast from it instead;
* ``scatterv``, ``gatherv``, ``allgatherv``: as their regular forms, with blocks of their own
  lengths at their own displacements (`stream_vector`).

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
calls' chunks in the order it began them (`StreamArea.unwritten`). A call an error ended
leaves chunks in the rings; a rank drains past those of the calls it gave up
(`StreamArea.abandoned`) as it begins or waits in later calls, so the writers' slots free.

A rooted call's members also wait for their root's word for the call, and the root for every
member's (`roll_call`), so ranks that disagree on the root raise `CollectiveMismatch`.

A call is done on a rank once it has written all its chunks and read all it needs — not when
its readers have read them: the ring holds them, so a writer never waits for a reader beyond
the ring's worth. The exception is a block published *by reference* (where the selection
table's ``shm_stream.by_reference`` says so): its chunk holds only the block's address in the
writer's memory, the reader copies it from there with process_vm_readv (one copy instead of
two), and the writer's call is done once every such reader has drained past it. The C loop
returns whenever nothing can move for a few microseconds; waiting (spin, yield, sleep on the
doorbell) and the checks for a failed peer (`PeerFailed`), the deadline (`CollectiveTimeout`,
naming the ranks not heard from) and a peer that made another call directly stay in Python
(`DirectArea.wait`/``check``).

It needs the "shm_stream" resource, which the transport offers where the communicator's
context has a stream area and the job has at most 64 ranks; selection takes it unasked, for
calls too large for a direct slot, only where the selection table says so (its rules name
the benchmark records; `stream_cost` is a plain model).

This module registers it and starts its calls; the protocol's words and its Python loop are
in `stream_protocol`, the per-signature plans in `stream_plan`, the calls in flight in
`stream_run`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..algorithms import fingerprint as fp
from ..algorithms.native import NativeAlgorithm, NativeCall
from ..algorithms.registry import Algorithm, CostModel, Restriction, add_algorithm
from ..algorithms.spec import CallSpec
from ..errors import ScheduleError
from ..schedule import Schedule
from ..transport.tags import call_tag
from . import direct as shm_direct
from . import stream_vector
from .direct_area import DirectArea, call_number, held_word, slot_of
from .direct_vector import regular
from .roll_call import RollCall, has_roll_call
from .stream_plan import _addresses, plan_for
from .stream_protocol import DONE, MOVED, NAME, skip_abandoned
from .stream_run import (
    ChainExecution,
    FoldingExecution,
    StreamExecution,
    _areas_of,
    _chain,
    _execution,
    _flat,
    _folds,
    _spin,
    overwrites_own,
)
from .transport import ShmTransport

RESOURCE = "shm_stream"
SUPPORTED = ("bcast", "scatter", "gather", "allgather", "alltoall", "reduce", "allreduce",
             "reduce_scatter_block", *stream_vector.SUPPORTED)
#: the collectives right with ``x`` as ``out`` (`Algorithm.in_place`): allreduce writes its
#: input into the rings (or the peers read it by reference and are waited for) before its
#: fold and its allgather phase write the result, and the fold copies an own contribution it
#: would overwrite (`FoldingExecution`)
IN_PLACE = frozenset({"allreduce"})
#: collectives run as two stream phases (`ChainExecution`)
CHAINED = frozenset({"allreduce"})
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
            transports=shm_direct.TRANSPORTS, in_place=collective in IN_PLACE,
            agrees_on_root=True))  # the members' roll call (`roll_call`)


def _no_schedule(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    raise ScheduleError(
        f"{spec.collective}[{NAME}] streams through shared-memory rings; it is not a schedule "
        "and cannot be built, validated, simulated or costed step by step")


def stream_cost(spec: CallSpec, model: CostModel) -> float:
    """One synchronisation (α; two for allreduce's phases) plus the bytes the busiest rank
    copies into or out of the rings (β: the writers' and readers' copies run at once, on
    different ranks) plus what the folding ranks fold (γ).

    A model, not a calibration: where the stream is taken unasked is the selection table's
    to say (``defaults.toml``).
    """
    c, n, p = regular(spec.collective), spec.count * spec.itemsize, spec.size
    if c != spec.collective:  # a v-form: its largest block
        n = spec.message_bytes()
    if c == "allreduce":
        part = n * (p - 1) / p
        return 2 * model.alpha + 2 * part * model.beta + part * model.gamma
    moved = n if c == "bcast" else n * (p - 1)
    folded = n * (p - 1) if c in ("reduce", "reduce_scatter_block") else 0
    return model.alpha + moved * model.beta + folded * model.gamma


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
        roll = None
        if has_roll_call(spec):
            fingerprint = prepared.fingerprint
            roll = RollCall(direct, area, seq, phase,
                            held_word(call_number(seq, phase), fingerprint), fingerprint,
                            spec.root, prepared.plan.wake)
        ex = _execution(transport, direct, area, spec, prepared, rank, _flat(send),
                        _flat(recv), seq, phase, context, timeout, roll)
    ex.poll()
    return ex


def _root_heard(transport: ShmTransport, roll: RollCall, spin: float) -> bool:
    """Whether ``roll``'s root stored its word within ``spin`` s, waited for through the one
    wait (`waiting.Ladder`): a rank that writes chunks writes them only then
    (`RollCall.root_heard`); a rank that writes none needs not wait."""
    heard = roll.root_heard
    if heard():
        return True
    return transport.ladder.wait(heard, lambda timeout: transport.sleep_until(heard, timeout),
                                 deadline=time.monotonic() + spin)


def _hear_the_roll(direct: DirectArea, roll: RollCall, spec: CallSpec, rank: int,
                       seq: int, phase: int, context: int, timeout: float | None) -> None:
    """Finish a streamed call's ``roll`` call: the one wait, from its spin, until the words
    it waits for have come (or a mismatch, failure or the deadline raises)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    what = f"rank {rank}: {spec.collective}[{NAME}]"
    word = roll.word

    def awaited() -> list[int]:  # read on each round of the wait: a peer's other word raises
        roll.check(what)
        return roll.awaited()

    try:
        while not roll.poll():
            direct.wait(roll.ready, awaited, deadline, what, call_tag(context, seq, phase),
                        fp.describe, (slot_of(seq, phase), word, roll.fingerprint))
    finally:
        roll.end()


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
    alone = None if prepared is None or (_folds(spec, rank) and not prepared.folds_as_read) \
        else prepared
    fingerprint = 0 if prepared is None else prepared.fingerprint
    spin = _spin(transport)
    # decided once per signature, not per call: whether a roll call runs beside the data,
    # and whether this rank writes chunks only once it has heard its root (`_root_heard`)
    rooted = prepared is not None and has_roll_call(spec)
    hears_root = rooted and alone is not None and alone.nwrites > 0 and spec.root != rank
    # a rank that folds as it reads, whose own contribution a call in place may overwrite
    folds = alone is not None and alone.folds_as_read
    wake: Any = None if prepared is None else prepared.plan.wake

    def fn(send: np.ndarray | None, recv: np.ndarray | None, seq: int,
           timeout: float | None, phase: int = 0) -> None:
        flat_send, flat_recv = _flat(send), _flat(recv)
        ex: StreamExecution | FoldingExecution | ChainExecution
        word = held_word(call_number(seq, phase), fingerprint)
        roll = (RollCall(direct, area, seq, phase, word, fingerprint, spec.root, wake)
                if rooted else None)
        if area.abandoned:  # chunks of a call this rank gave up may hold a writer back
            skip_abandoned(area, direct.group)
        if alone is not None and not progress.active and not area.active and (
                not hears_root or (roll is not None and _root_heard(transport, roll, spin))) \
                and not (folds and flat_send is not None and flat_recv is not None
                         and overwrites_own(spec, rank, flat_send, flat_recv)):
            # nothing else in flight here: the whole call in C, as a rule; else on from there
            state = alone.state.copy()
            status = alone.plan.advance(state, *_addresses(alone, flat_send, flat_recv),
                                        word, fingerprint, True, spin)
            if status & ~MOVED == DONE:
                if roll is not None and not roll.poll():
                    _hear_the_roll(direct, roll, spec, rank, seq, phase, context, timeout)
                return
            ex = StreamExecution(transport, direct, area, spec, alone, rank, flat_send,
                                 flat_recv, seq, phase, context, timeout, state, roll)
        elif prepared is None:
            ex = _chain(transport, direct, area, spec, rank, flat_send, flat_recv, seq, phase,
                        context, timeout)
        else:
            ex = _execution(transport, direct, area, spec, prepared, rank, flat_send,
                            flat_recv, seq, phase, context, timeout, roll)
        if progress.active or len(area.active) > 1:
            if not ex.poll(ex.spin):
                progress.wait(ex)
        else:
            ex.wait()

    return fn
