"""The v-collectives on the blocking fast path: the hashable key of a call's counts and
displacements, and the spec its general path would make from them (see `FastPaths`).

A v-call whose counts are given everywhere it needs them is one phase, like its regular form,
so it takes the same route: its key (``counts``, displacements and, for ``reduce_scatter``,
the operator) stands where a reduction's operator stands in the prepared calls' keys, and a
signature run by a compiled runner is bound like any other; a result with gaps between its
blocks is allocated as zeros (`leaves_gaps`), as the general path makes it. Whatever the
general path would treat specially — counts exchanged, a bad argument — is left to it (None
here). ``scatterv`` is an envelope, as ``scatter`` is (`fast_scatterv`): a repeated signature
whose rows fit is bound to the envelope's compiled runner with a per-block layout; one whose
rows do not sends the counts and runs its data phase from its prepared call.
"""

from __future__ import annotations

import functools
import math
import operator
from typing import TYPE_CHECKING, Any

import numpy as np

from ..algorithms.native import LengthsLearned
from ..algorithms.spec import CallSpec, make_spec, prefix
from ..shm.direct_gatherv import own_spec
from .arguments import checked_displs, displaced_signature, rows_spanned
from .cache import SHARED
from .commbase import _SLOW, _row_size
from .envelope import _DATA_AT, _FAST_KINDS, _bcast_head, _envelope_view, _parse_header
from .overlap import may_overlap
from .phases import _counting_head, _counts_fit
from .request import Request
from .vector_gatherv import HEADED, guess_key, headed, learned, streamed

if TYPE_CHECKING:
    from .commbase import CommBase
    from .fastpaths import FastPaths
    from .prepared import PreparedCall

#: the single-phase v-collectives that take `FastPaths._fast` (scatterv: `fast_scatterv`)
VECTOR_FAST = frozenset({"allgatherv", "gatherv", "reduce_scatter", "alltoallv"})


def _ints(values: Any) -> tuple[int, ...] | None:
    """``values`` as a tuple of ints (None for None); raises TypeError when it is not one
    (a float, a string, bytes). A list of plain ints, the common case, is only copied."""
    if values is None:
        return None
    if type(values) is list or type(values) is tuple:
        ints = tuple(values)
        for v in ints:
            if type(v) is not int:
                return tuple(map(operator.index, ints))
        return ints
    if isinstance(values, (str, bytes)):
        raise TypeError(values)
    return tuple(map(operator.index, values))


def python_vector_key(*parts: Any) -> tuple[Any, ...] | None:
    """The hashable key of a v-call's counts and displacements (None: not all of them are
    sequences of integers, which the general path reports): `vector_key` in Python."""
    try:
        if len(parts) == 2:  # counts and displacements: the common cases, no map
            return _ints(parts[0]), _ints(parts[1])
        if len(parts) == 4:
            return _ints(parts[0]), _ints(parts[1]), _ints(parts[2]), _ints(parts[3])
        return tuple(map(_ints, parts))
    except TypeError:
        return None


try:  # the same, compiled (`_keys.c`), handing the uncommon arguments to the Python one
    from . import _keys
except ImportError:  # pragma: no cover - the build had no C compiler
    _keys = None  # type: ignore[assignment]
if _keys is not None:
    _keys.configure(python_vector_key)
#: the hashable key of a v-call's counts and displacements (None: not all of them are
#: sequences of integers): compiled where built, a call on the fast path of every v-call
vector_key = _keys.vector_key if _keys is not None else python_vector_key


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
    if spec.collective == "alltoallv" or (spec.collective == "gatherv" and not spec.counts):
        filled = sum(spec.recvcounts or ())  # (a gatherv's `own_spec`: the root's counts)
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
    if collective == "gatherv":
        return _headed_spec(comm, x, key, root)
    if collective == "allgatherv":
        counts, displs = key
        if not _counts_ok(counts, p) or counts[rank] != rows:
            return None
        total, placed = _placed_rows(comm, collective, "displs", displs, counts)
        spec = make_spec(collective, p, dt, counts=[c * per_row for c in counts],
                         displs=None if placed is None else [d * per_row for d in placed])
        return spec, displaced_signature(spec), (total, *trailing), True
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


def _headed_spec(comm: CommBase, x: np.ndarray, key: Any, root: int
                 ) -> tuple[CallSpec, object, tuple[int, ...], bool] | None:
    """`vector_blocking_spec` of a gatherv whose blocks' lengths travel in headers (`headed`:
    a non-root needs no counts; a root given none takes the general path, which allocates
    its result once the headers are read, unless it has a guess: ``key`` is then
    `guessing_key`'s)."""
    counts, displs = key[:2]
    guessed = len(key) == 3
    p, dt, rank = comm.size, x.dtype, comm.rank
    rows, trailing, per_row = x.shape[0], x.shape[1:], _row_size(x)
    root = comm._check_root("gatherv", root)
    receives = rank == root
    if counts is not None and (not _counts_ok(counts, p) or counts[rank] != rows):
        return None  # the general path says what is wrong
    if (receives and counts is None) or not headed(comm, root, dt, None):
        return None
    total, placed = _placed_rows(comm, "gatherv", "displs", displs, counts) if receives else (
        0, None)
    given = None if counts is None else tuple(c * per_row for c in counts)
    streams = not guessed and given is not None and streamed(comm, root, dt, given, None)
    spec = own_spec(p, dt, root, rows * per_row, given if receives or streams else None,
                    None if placed is None else tuple(d * per_row for d in placed), streams,
                    guessed)
    return spec, HEADED, (total, *trailing), receives


def guessing_key(comm: CommBase, x: Any, root: Any, displs: Any) -> tuple[Any, ...] | None:
    """The fast path's key of a gatherv root given no counts and no displacements: the rows
    each rank sent in its last such call (`vector_gatherv.learned`) and a mark; None when it
    has no guess (the general path learns one) or when the call is not that simple."""
    if displs is not None or type(x) is not np.ndarray or x.ndim == 0 or type(root) is not int:
        return None
    guess = comm._cache.get(guess_key(root, x))
    if guess is None or guess[comm.rank] != x.shape[0]:
        return None
    return guess, None, "guessed"


def learned_result(comm: CommBase, learned_in: LengthsLearned, x: np.ndarray, out: Any
                   ) -> np.ndarray:
    """The result of a guessing root's call that the Python protocol ran (it learned the
    lengths): as the general path makes it."""
    return learned(comm, "gatherv", learned_in, x, None, out)


#: a scatterv root's envelope for one ``x`` and key: the blocks' headers, where each block's
#: rows go in the envelope (view, first row, rows), the root's result shape, and the bound
#: runner's layout (byte offsets and lengths of the blocks in ``x``, headers, ``x``'s bytes)
RootLayout = tuple[np.ndarray, list[tuple[np.ndarray, int, int]], tuple[int, ...],
                   tuple[list[int], list[int], bytes, int]]
#: one whose rows do not fit the envelope: the blocks (headers and counts), the root's result
#: shape, and the spec of the data phase that follows
CountedLayout = tuple[np.ndarray, tuple[int, ...], CallSpec]


def _root_layout(comm: FastPaths, envelope: PreparedCall, x: np.ndarray, key: Any
                 ) -> RootLayout | CountedLayout | None:
    """The `RootLayout` of a scatterv root's envelope for ``x`` and ``key`` (counts, displs),
    a `CountedLayout` when the rows do not all fit it but the counts do, or None (anything
    else the general path must take)."""
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
    row_bytes = _row_size(x) * dt.itemsize
    inline = max(counts, default=0) * row_bytes <= block - _DATA_AT
    if not inline:
        return _counted_layout(comm, envelope, x, counts, displs)
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
    compiled = ([d * row_bytes if c else 0 for d, c in zip(displs, counts, strict=True)],
                [c * row_bytes for c in counts], heads.tobytes(), x.nbytes)
    return heads, places, (counts[comm.rank], *trailing), compiled


def _counted_layout(comm: FastPaths, envelope: PreparedCall, x: np.ndarray,
                    counts: tuple[int, ...], displs: tuple[int, ...]) -> CountedLayout | None:
    """The `CountedLayout` of a scatterv root whose rows do not fit its envelope: each block
    its rank's header and every rank's count, as the general path (`_scatterv`) writes them
    (None when the counts do not fit a block either)."""
    p, dt, trailing = comm.size, x.dtype, x.shape[1:]
    block = envelope.shape[0]
    if not _counts_fit(block, p):
        return None
    blocks = np.zeros((p, _DATA_AT + 8 * p), np.uint8)
    for j, c in enumerate(counts):
        head = _bcast_head(dt, (c, *trailing), False)
        if head is None:
            return None
        blocks[j, :_DATA_AT] = _counting_head(head, p)
        blocks[j, _DATA_AT:] = np.asarray(counts, "<i8").view(np.uint8)
    per_row = _row_size(x)
    spec = make_spec("scatterv", p, dt, counts=[c * per_row for c in counts],
                     root=comm.rank, displs=[d * per_row for d in displs])
    return blocks, (counts[comm.rank], *trailing), spec


def fast_scatterv(comm: FastPaths, x: Any, key: Any, root: Any, out: Any,
                  algorithm: str | None, timeout: float | None) -> Any:
    """A blocking scatterv through its envelope's prepared call and bound runner, as the
    general path (`_scatterv`) runs it: the root writes each rank's header and rows into the
    rank's block (or, when they do not fit, the counts, and the data phase follows); a
    non-root reads its block, and runs the data phase when the rows did not fit. A signature
    whose rows fit, run so once, is then bound to the envelope's compiled runner, which runs
    the whole call (the root's ``key``, a non-root's ``()``). `_SLOW` before the call takes
    its number for anything else."""
    bound = comm._bound("scatterv", key, root, algorithm)
    if bound is not None:
        got, timeout = comm._call_bound("scatterv", bound, x, out, timeout)
        if got is None:  # the root sent another signature: its envelope is in recv
            return _received(comm, bound[4], out, root, comm._call_number[0] - 1, algorithm,
                             timeout)
        if got is not _SLOW:
            return got
    envelope = comm._fast_envelope("scatterv", x, root, out, algorithm)
    if envelope is None:
        return _SLOW
    if comm.rank != root:
        seq, timeout = comm._next_call(timeout, "scatterv")
        envelope.run_blocking(comm, None, envelope.recv, seq, timeout)
        return _received(comm, envelope, out, root, seq, algorithm, timeout)
    layout_key = ("scatterv", x.dtype, x.shape, key)
    layout = envelope.views.get(layout_key, _SLOW)
    if layout is _SLOW:
        layout = envelope.views.put(layout_key, _root_layout(comm, envelope, x, key))
    if layout is None or (out is not None and may_overlap(out, x)):
        return _SLOW
    shape = layout[-2]
    if out is not None and (out.size != math.prod(shape) or out.dtype != x.dtype):
        return _SLOW  # the general path raises, naming ``out``
    if len(layout) == 3:
        return _root_counted(comm, envelope, layout, layout_key, x, out, root, algorithm,
                             timeout)
    heads, places, shape, compiled = layout
    assert envelope.send is not None
    envelope.send.reshape(comm.size, -1)[:, :_DATA_AT] = heads
    envelope.head = None  # scatter's cached head is not in it any more
    for place, d, c in places:
        place[...] = x[d: d + c]
    mine = places[comm.rank][0]
    got = comm._envelope_call("scatterv", envelope, mine, shape, out, root, algorithm, timeout)
    if algorithm is None and envelope.compiled is not None:
        rank = comm.rank
        _bind(comm, envelope, key, root, x.dtype, x.shape, shape, heads[rank].tobytes(),
              compiled[1][rank], compiled[0][rank], compiled)
    return got


def _root_counted(comm: FastPaths, envelope: PreparedCall, layout: CountedLayout,
                  layout_key: Any, x: np.ndarray, out: Any, root: int, algorithm: str | None,
                  timeout: float | None) -> Any:
    """A scatterv root whose rows do not fit its envelope: the counts in the envelope, then
    the data phase from its prepared call (`_SLOW` until a general call prepared it)."""
    blocks, shape, spec = layout
    data = envelope.views.get(("data", layout_key))
    if data is None:
        data = _data_call(comm, envelope, ("data", layout_key), spec, algorithm)
    if data is None:
        return _SLOW
    result = np.empty(shape, x.dtype) if out is None else out
    assert envelope.send is not None
    envelope.send.reshape(comm.size, -1)[:, : blocks.shape[1]] = blocks
    envelope.head = None
    seq, timeout = comm._next_call(timeout, "scatterv")
    # a data phase that checks the root itself spares the direct envelope's confirmation
    envelope.run_blocking(comm, envelope.send, envelope.recv, seq, timeout,
                          confirm=not (data.checks_root and envelope.name == "shm_direct"))
    data.run_blocking(comm, x.reshape(-1), result.reshape(-1), seq, timeout, 1)
    return result.reshape(shape)


def _bind(comm: FastPaths, envelope: PreparedCall, key: Any, root: int, dtype: np.dtype,
          shape: tuple[int, ...], result: tuple[int, ...], head: bytes, nbytes: int,
          own: int = 0, layout: Any = None) -> None:
    """Let the compiled runner of a scatterv's ``envelope`` run whole calls of one signature
    (``key``, ``root``; arrays of ``shape``, results of ``result``): a non-root whose block
    has header ``head`` and ``nbytes`` of data, or the root with its blocks' ``layout``
    (`RootLayout`) and its own result ``own`` bytes into its ``x``."""
    p, block = comm.size, envelope.shape[0]
    envelope.compiled.bind_bcast(
        comm._calls, envelope.recv, dtype, shape, nbytes, head, _SLOW,
        functools.partial(np.empty, result, dtype), result, p if layout else 1,
        block if layout else 0, own, layout)
    comm._bound_calls["scatterv"] = (key, root, envelope.compiled.bcast, envelope.name,
                                     envelope)


def _data_call(comm: FastPaths, envelope: PreparedCall, key: Any, spec: CallSpec,
               algorithm: str | None) -> PreparedCall | None:
    """The prepared data phase of a scatterv whose rows do not fit its ``envelope`` (None until
    a general call prepared it), kept in the envelope's views under ``key`` once found, so a
    repeated call does not look it up by its spec again (the envelope goes with the settings
    it was made under, and the data phase with it)."""
    data = comm._known(spec, algorithm)
    if data is not None:
        envelope.views.put(key, data)
    return data


def _received(comm: FastPaths, envelope: PreparedCall, out: Any, root: int, seq: int,
              algorithm: str | None, timeout: float | None) -> Any:
    """A non-root's result of scatterv call ``seq`` whose envelope ``envelope.recv`` holds:
    its rows (binding the signature to the compiled runner), or else the phases that follow
    run as the general path runs them."""
    assert envelope.header is not None and envelope.recv is not None
    raw = envelope.header.tobytes()
    inline, dtype, shape, _ = _parse_header(raw)
    if not inline:
        got = _received_data(comm, envelope, dtype, shape, out, root, seq, algorithm,
                             timeout)
        if got is not _SLOW:
            return got
        return Request(comm, comm._scatterv_received(
            "scatterv", envelope.recv, dtype, shape, out, root, seq, algorithm, {},
            timeout), True).wait()
    view = _envelope_view(envelope.recv, dtype, shape)
    result = comm._out("scatterv", out, shape, dtype)  # raises, naming a wrong ``out``
    result.reshape(shape)[...] = view
    if algorithm is None and envelope.compiled is not None and len(shape) <= 8:
        _bind(comm, envelope, (), root, dtype, shape, shape, raw, view.nbytes)
    return result.reshape(shape)


def _received_data(comm: FastPaths, envelope: PreparedCall, dtype: np.dtype,
                   shape: tuple[int, ...], out: Any, root: int, seq: int,
                   algorithm: str | None, timeout: float | None) -> Any:
    """The data phase of a non-root's scatterv whose envelope block (``envelope.recv``) holds
    the counts, from its prepared call; `_SLOW` (nothing run) until a general call prepared
    it, when the counts came apart, or for an ``out`` the general path must report."""
    p, env = comm.size, envelope.recv
    assert env is not None
    if not _counts_fit(len(env), p):
        return _SLOW
    raw = env[_DATA_AT: _DATA_AT + 8 * p].tobytes()
    trailing = shape[1:]
    spec_key = ("scatterv data", raw, dtype, trailing, root)
    data = envelope.views.get((spec_key, algorithm))
    if data is None:
        spec = SHARED.get(spec_key)
        if spec is None:
            per_row = math.prod(trailing)
            rows = np.frombuffer(raw, "<i8").tolist()
            spec = SHARED.put(spec_key, make_spec("scatterv", p, dtype, root=root,
                                                  counts=[r * per_row for r in rows]))
        data = _data_call(comm, envelope, (spec_key, algorithm), spec, algorithm)
    if data is None:
        return _SLOW
    if out is None:
        result = np.empty(shape, dtype)
    elif out.size == math.prod(shape) and (out.dtype is dtype or out.dtype == dtype):
        result = out if out.shape == shape else out.reshape(shape)
    else:
        return _SLOW
    data.run_blocking(comm, None, result.reshape(-1), seq, timeout, 1)
    return result
