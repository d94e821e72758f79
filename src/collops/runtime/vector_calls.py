"""The v-collectives on the blocking fast path: the hashable key of a call's counts and
displacements, and the spec its general path would make from them (see `FastPaths`).

A v-call whose counts are given everywhere it needs them is one phase, like its regular form,
so it takes the same route: its key (``counts``, displacements and, for ``reduce_scatter``,
the operator) stands where a reduction's operator stands in the prepared calls' keys, and a
signature run by a compiled runner is bound like any other; a result with gaps between its
blocks is allocated as zeros (`leaves_gaps`), as the general path makes it. Whatever the
general path would treat specially — counts exchanged, a bad argument — is left to it (None
here).
"""

from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING, Any

import numpy as np

from ..algorithms.spec import CallSpec, make_spec, prefix
from .arguments import checked_displs, displaced_signature, rows_spanned
from .commbase import _SLOW, _row_size
from .envelope import _DATA_AT, _FAST_KINDS, _bcast_head, _envelope_view, _parse_header
from .request import Request

if TYPE_CHECKING:
    from .commbase import CommBase
    from .fastpaths import FastPaths
    from .prepared import PreparedCall

#: the single-phase v-collectives that take `FastPaths._fast` (scatterv: `fast_scatterv`)
VECTOR_FAST = frozenset({"allgatherv", "gatherv", "reduce_scatter", "alltoallv"})


def _ints(values: Any) -> tuple[int, ...] | None:
    """``values`` as a tuple of ints (None for None); raises TypeError when it is not one."""
    if values is None:
        return None
    if isinstance(values, (str, bytes)):
        raise TypeError(values)
    return tuple(operator.index(v) for v in values)


def vector_key(*parts: Any) -> tuple[Any, ...] | None:
    """The hashable key of a v-call's counts and displacements (None: not all of them are
    sequences of integers, which the general path reports)."""
    try:
        return tuple(_ints(part) for part in parts)
    except TypeError:
        return None


def _counts_ok(counts: tuple[int, ...] | None, p: int) -> bool:
    return counts is not None and len(counts) == p and min(counts, default=0) >= 0


def _placed_rows(comm: CommBase, call: str, name: str, displs: tuple[int, ...] | None,
                 counts: tuple[int, ...]) -> tuple[int, tuple[int, ...] | None]:
    """``(rows of the result, displs)``: displacements of received blocks checked
    (`ArgumentError` if they overlap; None when not given). A result with gaps between its
    blocks holds zeros there when the call makes it (`leaves_gaps`)."""
    if displs is None:
        return sum(counts), None
    checked_displs(call, name, displs, list(counts), comm.rank, True)
    return rows_spanned(list(displs), list(counts)), displs


def leaves_gaps(spec: CallSpec, shape: tuple[int, ...]) -> bool:
    """Whether a v-call's result of ``shape`` has elements no block fills (zeros when the
    call allocates the result; a caller's ``out`` keeps what it held there)."""
    if spec.collective == "alltoallv":
        filled = sum(spec.recvcounts or ())
    elif spec.collective in ("allgatherv", "gatherv"):
        filled = sum(spec.counts or ())
    else:
        return False
    return math.prod(shape) > filled


def vector_blocking_spec(comm: CommBase, collective: str, x: np.ndarray, key: Any, root: int
                         ) -> tuple[CallSpec, object, tuple[int, ...], bool] | None:
    """``(spec, counts signature, result shape, whether this rank receives)`` of a blocking
    v-call on ``x`` with ``key`` (`vector_key`), as its general path makes them."""
    if x.ndim == 0 or key is None:
        return None
    p, dt, rank = comm.size, x.dtype, comm.rank
    rows, trailing, per_row = x.shape[0], x.shape[1:], _row_size(x)
    if collective in ("allgatherv", "gatherv"):
        counts, displs = key
        if not _counts_ok(counts, p) or counts[rank] != rows:
            return None
        root = comm._check_root(collective, root) if collective == "gatherv" else 0
        receives = collective == "allgatherv" or rank == root
        total, placed = _placed_rows(comm, collective, "displs",
                                     displs if receives else None, counts)
        spec = make_spec(collective, p, dt, counts=[c * per_row for c in counts], root=root,
                         displs=None if placed is None else [d * per_row for d in placed])
        return spec, displaced_signature(spec), (total, *trailing), receives
    if collective == "reduce_scatter":
        op, counts = key
        if not _counts_ok(counts, p) or sum(counts) != rows:
            return None
        resolved = comm._op(collective, op, dt)
        spec = make_spec(collective, p, dt, counts=[c * per_row for c in counts], op=resolved)
        return spec, (spec.count, spec.counts, resolved.name), (counts[rank], *trailing), True
    if collective == "alltoallv":
        sendcounts, sdispls, recvcounts, rdispls = key
        if not (_counts_ok(sendcounts, p) and _counts_ok(recvcounts, p)):
            return None
        if recvcounts[rank] != sendcounts[rank]:
            return None
        if sdispls is None:
            if sum(sendcounts) > rows:
                return None
        else:
            comm._send_blocks(collective, x, sendcounts, sdispls, ("sendcounts", "sdispls"))
        total, placed = _placed_rows(comm, collective, "rdispls", rdispls, recvcounts)
        spec = make_spec(collective, p, dt, sendcounts=[c * per_row for c in sendcounts],
                         sdispls=None if sdispls is None else [d * per_row for d in sdispls],
                         recvcounts=[c * per_row for c in recvcounts],
                         rdispls=None if placed is None else [d * per_row for d in placed])
        return spec, ("v", per_row), (total, *trailing), True
    return None


def _root_layout(comm: FastPaths, envelope: PreparedCall, x: np.ndarray, key: Any
                 ) -> tuple[np.ndarray, list[tuple[np.ndarray, int, int]], tuple[int, ...]] | None:
    """``(heads, [(where block j's rows go in the envelope, first row, rows)], root's shape)``
    of a scatterv root's envelope for ``x`` and ``key`` (counts, displs), or None when the
    rows do not all fit it (or anything else the general path must take)."""
    counts, displs = key
    p, dt = comm.size, x.dtype
    if dt.kind not in _FAST_KINDS or x.ndim == 0 or x.ndim > 8 or not _counts_ok(counts, p):
        return None
    rows = x.shape[0]
    if displs is None:
        if sum(counts) != rows:
            return None
        displs = prefix(counts)
    elif len(displs) != p or any(d < 0 or (c and d + c > rows)
                                 for d, c in zip(displs, counts, strict=True)):
        return None
    block, trailing = envelope.shape[0], x.shape[1:]
    if max(counts, default=0) * _row_size(x) * dt.itemsize > block - _DATA_AT:
        return None
    heads = np.empty((p, _DATA_AT), np.uint8)
    places = []
    assert envelope.send is not None
    blocks = envelope.send.reshape(p, block)
    for j, (d, c) in enumerate(zip(displs, counts, strict=True)):
        head = _bcast_head(dt, (c, *trailing), True)
        if head is None:
            return None
        heads[j] = head
        places.append((_envelope_view(blocks[j], dt, (c, *trailing)), d, c))
    return heads, places, (counts[comm.rank], *trailing)


def fast_scatterv(comm: FastPaths, x: Any, key: Any, root: Any, out: Any,
                  algorithm: str | None, timeout: float | None) -> Any:
    """A blocking scatterv whose rows fit its envelope, through the envelope's prepared call
    and its bound runner, as the general path (`_scatterv`) runs it: the root writes each
    rank's header and rows into the rank's block; a non-root reads its block, or runs the
    phases that follow when the rows did not fit. `_SLOW` before the call takes its number
    for anything else."""
    envelope = comm._fast_envelope("scatterv", x, root, out, algorithm)
    if envelope is None:
        return _SLOW
    if comm.rank == root:
        layout_key = ("scatterv", x.dtype, x.shape, key)
        layout = envelope.views.get(layout_key, _SLOW)
        if layout is _SLOW:
            layout = envelope.views.put(layout_key, _root_layout(comm, envelope, x, key))
        if layout is None or (out is not None and np.may_share_memory(out, x)):
            return _SLOW
        heads, places, shape = layout
        if out is not None and (out.size != math.prod(shape) or out.dtype != x.dtype):
            return _SLOW  # the general path raises, naming ``out``
        assert envelope.send is not None
        envelope.send.reshape(comm.size, -1)[:, :_DATA_AT] = heads
        envelope.head = None  # scatter's cached head is not in it any more
        for place, d, c in places:
            place[...] = x[d: d + c]
        mine = places[comm.rank][0]
        return comm._envelope_call("scatterv", envelope, mine, shape, out, root, algorithm,
                                   timeout)
    seq, timeout = comm._next_call(timeout, "scatterv")
    envelope.run_blocking(comm, None, envelope.recv, seq, timeout)
    assert envelope.header is not None and envelope.recv is not None
    inline, dtype, shape, _ = _parse_header(envelope.header.tobytes())
    if not inline:
        return Request(comm, comm._scatterv_received(
            "scatterv", envelope.recv, dtype, shape, out, root, seq, algorithm, {},
            timeout), True).wait()
    view = _envelope_view(envelope.recv, dtype, shape)
    result = comm._out("scatterv", out, shape, dtype)  # raises, naming a wrong ``out``
    result.reshape(shape)[...] = view
    return result.reshape(shape)
