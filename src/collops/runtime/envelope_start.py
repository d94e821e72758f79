"""Non-blocking bcast, scatter and scatterv begun from their prepared envelope call.

A bcast or a scatter(v) is an envelope — dtype, shape and, when they fit, the data; a
scatter's one block per rank — and, when the data does not fit, a data phase after it
(`PhaseGenerators._bcast`, `_scatter`, `_scatterv`). Its blocking fast path runs both from
prepared calls (`FastPaths._through_envelope`, `vector_calls.fast_scatterv`); the
non-blocking form here starts the very same envelope call at once, as a posted call of two
steps (`StartedRequest`'s ``then``): the envelope, then — when a non-root finds the data
inline — its result copied out of it, or else the data phase, begun as the general path
begins it (on a non-root by the general path's own generator of what follows the envelope).

What differs from the blocking form is only where the envelope lives: a blocking call reuses
the prepared call's one envelope (a blocking call completes before the next begins), while
each non-blocking call has its own, since several may be outstanding. Anything the fast path
does not take as it is — a first call of the signature, an ``out`` that is wrong or overlaps
``x``, an algorithm without a bound runner for the envelope — returns None before the call
takes its number, and the general path runs the call (and says what is wrong).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from .commbase import _SLOW, _same_bytes
from .envelope import _DATA_AT, _bcast_spec, _blocks_view, _envelope_view, _parse_header
from .overlap import may_overlap
from .request import Phases, StartedRequest

if TYPE_CHECKING:
    from .engine import Execution
    from .fastpaths import FastPaths
    from .prepared import PreparedCall


def _go_on(request: StartedRequest, phases: Phases) -> Execution | None:
    """The rest of a call as its phase generator ``phases`` runs it: its next phase, begun
    (the ones after it the request's next steps; its value the request's), or None when
    the generator is done."""
    try:
        ex = phases.send(None)
    except StopIteration as stop:
        request._value = stop.value
        return None
    request._then = lambda req, _done: _go_on(req, phases)
    return ex


def _result(out: Any, own: np.ndarray, shape: tuple[int, ...]) -> Any:
    """A root's result ``own`` (of ``shape``) copied into ``out`` (or a new array); `_SLOW`
    for an ``out`` of another size or dtype, or one overlapping ``own`` only in part (the
    general path raises or copies)."""
    if out is None:
        return own.reshape(shape).copy()
    if not (out.size == own.size and (out.dtype is own.dtype or out.dtype == own.dtype)):
        return _SLOW
    result = out if out.shape == shape else out.reshape(shape)
    if not _same_bytes(out, own):
        if may_overlap(out, own):
            return _SLOW
        result[...] = own.reshape(shape)
    return result


def start_enveloped(comm: FastPaths, call: str, x: Any, key: Any, root: Any, out: Any,
                    algorithm: str | None, timeout: float | None) -> StartedRequest | None:
    """A non-blocking bcast, scatter or scatterv (``key``: a scatterv root's counts and
    displacements, `vector_key`) begun from its prepared envelope call; None for the general
    path (see the module)."""
    envelope = comm._fast_envelope(call, x, root, out, algorithm)
    if envelope is None:
        return None
    if comm.rank != root:
        return _reader(comm, call, envelope, out, root, algorithm, timeout)
    if call == "scatterv":
        return _scatterv_root(comm, envelope, x, key, root, out, algorithm, timeout)
    dt = x.dtype
    entry = comm._kept_root_entry(call, envelope, x)
    if entry is None:
        return None
    head, inline, shape, _ = entry
    p, block = comm.size, envelope.shape[0]
    own = x if call == "bcast" else x.reshape(p, -1)[comm.rank]
    if out is x and call == "bcast":
        result = x
    else:
        result = _result(out, own, shape)
        if result is _SLOW:
            return None
    data = None
    if inline is None:  # the data follows in a phase of its own, from its prepared call
        data = comm._known(_bcast_spec(p, dt, math.prod(shape), root, call), algorithm)
        if data is None:
            return None
    if call == "bcast":
        env = send = recv = np.empty(block, np.uint8)
        env[:_DATA_AT] = head
        if inline is not None:
            _envelope_view(env, dt, shape)[...] = x
    else:
        env = np.empty((p + 1) * block, np.uint8)
        send, recv = env[: p * block], env[p * block:]
        send.reshape(p, block)[:, :_DATA_AT] = head
        if inline is not None:
            _blocks_view(env, p, block, dt, shape)[...] = x.reshape(p, *shape)
    return _begun(comm, call, envelope, send, recv, x, result, data, timeout)


def _scatterv_root(comm: FastPaths, envelope: PreparedCall, x: np.ndarray, key: Any, root: int,
                   out: Any, algorithm: str | None, timeout: float | None
                   ) -> StartedRequest | None:
    """A scatterv root's call: each rank's header and rows (or, when they do not fit, its
    header and the counts) in a block of its own envelope, then the data phase if needed."""
    from .vector_calls import _root_layout  # (it imports this module's neighbours)

    layout_key = ("scatterv", x.dtype, x.shape, key)
    layout = envelope.views.get(layout_key, _SLOW)
    if layout is _SLOW:  # kept as the blocking path keeps it (`fast_scatterv`)
        layout = envelope.views.put(layout_key, _root_layout(comm, envelope, x, key))
    if layout is None:
        return None
    p, block, rank = comm.size, envelope.shape[0], comm.rank
    env = np.empty((p + 1) * block, np.uint8)
    send, recv = env[: p * block], env[p * block:]
    blocks = send.reshape(p, block)
    data = None
    if len(layout) == 3:  # the counts in the envelope, the rows in a data phase
        heads, shape, spec = layout
        data = comm._known(spec, algorithm)
        if data is None:
            return None
        own_rows = None
    else:
        heads, places, shape, _ = layout
        d, c = places[rank][1], places[rank][2]
        own_rows = x[d: d + c]
    if out is not None and (out.size != math.prod(shape) or out.dtype != x.dtype
                            or may_overlap(out, x)):
        return None  # the general path raises, naming ``out``, or copies
    blocks[:, : heads.shape[1]] = heads
    if own_rows is not None:
        for j, (view, d, c) in enumerate(places):
            _envelope_view(blocks[j], x.dtype, view.shape)[...] = x[d: d + c]
        result = own_rows.copy() if out is None else out.reshape(shape)
        if out is not None:
            result[...] = own_rows
    else:
        result = np.empty(shape, x.dtype) if out is None else out.reshape(shape)
    return _begun(comm, "scatterv", envelope, send, recv, x, result, data, timeout)


def _begun(comm: FastPaths, call: str, envelope: PreparedCall, send: np.ndarray,
           recv: np.ndarray, x: np.ndarray, result: np.ndarray, data: PreparedCall | None,
           timeout: float | None) -> StartedRequest:
    """A root's request: its envelope call started under the call's number, and its data
    phase (``data``, when the data did not fit the envelope) the request's second step."""
    seq, timeout = comm._next_call(timeout, call)
    started = envelope.start(comm, send, recv, seq, 0, timeout, agree=True)
    if data is None:
        return StartedRequest(comm, started, result)
    send_data, recv_data = x.reshape(-1), result.reshape(-1)

    def then(request: StartedRequest, _envelope: Any) -> Execution:
        return data.start(comm, send_data, recv_data, seq, 1, timeout)
    return StartedRequest(comm, started, result, then)


def _reader(comm: FastPaths, call: str, envelope: PreparedCall, out: Any, root: int,
            algorithm: str | None, timeout: float | None) -> StartedRequest:
    """A non-root's call: its envelope (a scatter's: its block) into an array of its own,
    then its result copied out of it, or what follows as the general path runs it."""
    env = np.empty(envelope.shape[0], np.uint8)
    seq, timeout = comm._next_call(timeout, call)
    started = envelope.start(comm, None, env, seq, 0, timeout, agree=True)

    def then(request: StartedRequest, _envelope: Any) -> Execution | None:
        inline, dtype, shape, _ = _parse_header(env[:_DATA_AT].tobytes())
        if inline:
            view = _envelope_view(env, dtype, shape)
            result = comm._out(call, out, shape, dtype)  # raises, naming a wrong ``out``
            result.reshape(shape)[...] = view
            request._value = result.reshape(shape)
            return None
        if call == "scatterv":
            rest = comm._scatterv_received(call, env, dtype, shape, out, root, seq, algorithm,
                                           {}, timeout)
        else:
            rest = comm._data_phase_gen(call, dtype, shape, out, root, seq, algorithm, {},
                                        timeout)
        return _go_on(request, rest)
    return StartedRequest(comm, started, None, then)
