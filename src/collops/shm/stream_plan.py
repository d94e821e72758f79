"""Stream plans: what one rank writes and reads in one call signature, laid out once per
signature (`plan_for`) for the compiled loop or `PyPlan`; which blocks go by reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import config
from ..algorithms import tuning
from ..algorithms.spec import CallSpec
from ..datatypes import address_of
from ..errors import ArgumentError
from ..ops import compiled_kernel
from . import direct as shm_direct
from . import stream_vector
from .roll_call import has_roll_call, heard_words
from .segment import ROLL_SLOTS
from .stream_area import StreamArea
from .stream_protocol import (
    IN_OWN,
    IN_RING,
    IN_SEND,
    NAME,
    OWN_BLOCK_SOURCES,
    R_EXPECT,
    S_BLOCKED_ON,
    S_FAILED_WRITER,
    S_FOREIGN_WRITER,
    S_RECEIVED,
    PyPlan,
)

try:
    from . import _stream
except ImportError:  # built without a C compiler: `PyPlan` runs the same protocol
    _stream = None  # type: ignore[assignment]


#: collectives whose contributions are gathered into a scratch buffer and folded there
FOLDED = frozenset({"reduce", "reduce_scatter_block"})


def by_reference(spec: CallSpec) -> bool:
    """Whether each block of ``spec`` is published by reference (one process_vm_readv by the
    reader instead of two copies through the ring): the selection table's
    ``protocols.shm_stream.by_reference``."""
    return bool(tuning.setting("shm_stream", "by_reference", spec,
                               config.settings.tuning_file).value)


def streaming_from(spec: CallSpec, case: str) -> float:
    """Bytes received in one call from which the compiled loop copies into the receive buffer
    with non-temporal stores (`copy_streaming` in ``_shm_wait.h``), for a ``case`` of
    `STREAMING_CASES`: the selection table's ``protocols.shm_stream.streaming_<case>_from``."""
    return float(tuning.setting("shm_stream", f"streaming_{case}_from", spec,
                                config.settings.tuning_file).value)


def fold_as_read(spec: CallSpec, index: int, chunk_bytes: int, whole: bool
                 ) -> tuple[int, int] | None:
    """The (operator, dtype) kernel codes with which group member ``index`` folds each chunk
    into its result as it reads it (see ``_stream.c``), or None where it gathers the
    contributions into a scratch buffer and folds them after (`FoldingExecution`): a reduce's
    root or a reduce_scatter_block's rank, an operator and dtype the compiled kernels
    implement, chunks of whole items through the rings, and the selection table's
    ``protocols.shm_stream.fold_as_read``."""
    c = spec.collective
    if c not in FOLDED or (c == "reduce" and index != spec.root) or spec.size < 2 or whole \
            or not spec.count:
        return None
    codes = compiled_kernel(spec.op, spec.dtype)
    if codes is None or chunk_bytes % spec.itemsize or not tuning.setting(
            "shm_stream", "fold_as_read", spec, config.settings.tuning_file).value:
        return None
    return codes


def own_block(spec: CallSpec) -> int:
    """Where an allgather whose blocks go by reference publishes its own block unless that
    copy would be aliased (IN_SEND or IN_RECV): the selection table's
    ``protocols.shm_stream.own_block`` ("send" or "recv")."""
    rule = tuning.setting("shm_stream", "own_block", spec, config.settings.tuning_file)
    try:
        return OWN_BLOCK_SOURCES[rule.value]
    except (KeyError, TypeError):
        raise ArgumentError("allgather", "protocols.shm_stream.own_block", rule.value,
                            f"{rule.where}: one of {', '.join(OWN_BLOCK_SOURCES)}") from None


#: a rank that also writes its ring; one that only reads; a call whose blocks go by
#: reference (only the own block's copy is the loop's); a call whose own block is copied in
#: the same pass as its ring chunks (`copy_twice`)
STREAMING_CASES = ("stores", "reader", "references", "fused")


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
    whole = t.capabilities().single_copy and by_reference(spec)
    fold = fold_as_read(spec, index, area.chunk_bytes, whole)
    writes, readers, own = _layout_of(spec, index, area.chunk_bytes, whole, fold is not None)
    me = area.me
    rows = [(group[w], area.filled[group[w]], area.headers[group[w]], area.rings[group[w]],
             area.drained[group[w]][me], dst, expect, t.pid_word(group[w]))
            for w, dst, expect in readers]
    own_block_row = IN_OWN if spec.collective == "allgather" and own[2] > 0 else IN_SEND
    write_rows = [(src, n, sum(1 << group[r] for r in mask), offset,
                   own_block_row if whole else IN_RING) for src, n, mask, offset in writes]
    sleepers = [r for r in group if r != me]
    fields: dict[str, Any] = dict(
        segment=t.segment_map, cursors=area.cursors, me=me, nchunks=area.nchunks,
        chunk_bytes=area.chunk_bytes, my_filled=area.filled[me],
        my_headers=area.headers[me], my_ring=area.rings[me],
        writes=np.array(write_rows, np.int64).reshape(-1, 5),
        drained_of_me=np.array(area.drained[me], np.int64),
        writers=np.array(rows, np.int64).reshape(-1, 8), self_copy=own,
        sleeper_words=[t.sleeping_word(r) for r in sleepers], sleeper_ranks=sleepers,
        wake=t.wake, own_from=own_block(spec) if own_block_row == IN_OWN and whole else IN_SEND,
        # a call of its own with a roll call: the words its compiled loop spins for, once its
        # data is done, before it returns (`RollCall` checks them, and waits on past the spin)
        roll_words=[w for _, w in heard_words(area, group, index, spec.root)]
        if call is spec and has_roll_call(spec) else [], roll_slots=ROLL_SLOTS)
    if fold is not None:  # each position's writer row, the own block (-1) at its own
        row_of = {w: k for k, (w, _, _) in enumerate(readers)}
        fields.update(fold=fold, fold_order=[row_of.get(j, -1) for j in range(len(group))])
    received = own[2] + sum(r[R_EXPECT] for r in rows)
    # the own block's copy starts where the ring chunks do: the compiled loop writes both in
    # one pass (`copy_twice`) — an allgather's, a bcast root's with an ``out`` of its own
    fused = not whole and own[2] > 0 and bool(writes) and writes[0][0] == own[0]
    streaming = fold is None and received >= streaming_from(
        spec, "references" if whole else "fused" if fused else "stores" if write_rows
        else "reader")
    plan = (_stream.Plan(**fields, streaming=streaming) if compiled
            else PyPlan(area, **fields))
    state = np.zeros(S_RECEIVED + len(rows) + len(area.cursors) - 1, np.int64)
    state[S_FOREIGN_WRITER] = state[S_BLOCKED_ON] = state[S_FAILED_WRITER] = -1
    return Prepared(plan, len(write_rows), [group.index(r[0]) for r in rows],
                    [r[R_EXPECT] for r in rows], own,
                    shm_direct.call_fingerprint(call, NAME), state, call.collective,
                    fold is not None)


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
    #: whether the rank folds each chunk into its result as it reads it (`fold_as_read`)
    folds_as_read: bool = False


def _layout_of(spec: CallSpec, me: int, chunk: int, whole: bool = False,
               fold: bool = False) -> tuple[
        list[tuple[int, int, tuple[int, ...], int]], list[tuple[int, int, int]],
        tuple[int, int, int]]:
    """What group member ``me`` writes, reads and copies itself in a call of ``spec``, in
    chunks of ``chunk`` bytes — or, when ``whole``, a block a chunk
    (the reference chunks `_make_plan` marks).

    Writes: chunks ``(src byte in send, bytes, readers (group ranks), offset in the reader's
    block)``; reads: ``(writer, byte of its block in recv, bytes expected)``; own: ``(src, dst,
    bytes)`` of the rank's own block copy. A reduce moves what a gather moves, a
    reduce_scatter_block what an alltoall does, into the folding ranks' scratch, where the
    rank's own contribution has no place: it is folded from where it is. A rank that folds
    as it reads (``fold``) reads every block into its result, and its own is ``(its block in
    send, 0, bytes)``: what it folds in at its position.
    """
    if spec.collective in stream_vector.SUPPORTED:
        return stream_vector.layout_of(spec, me, chunk, whole)
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
    if fold and nb:
        return writes, [(w, 0, e) for w, _, e in reads], (
            me * nb if c == "alltoall" else 0, 0, nb)
    return writes, reads, (0, 0, 0) if folded or nb == 0 else own


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


