"""A blocking call's one route: look up its prepared call, run it (by a native algorithm's
bound runner where it has one; see `Comm`)."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from .. import config as _cfg
from ..algorithms.spec import CallSpec, make_spec
from ..datatypes import check_dtype
from ..errors import ArgumentError, CollopsError
from .abandon import abandon_call
from .commbase import _SLOW, _row_size, _same_bytes
from .envelope import (
    _DATA_AT,
    _ENVELOPE_DTYPE,
    _FAST_KINDS,
    _NBYTES_AT,
    _bcast_head,
    _bcast_spec,
    _blocks_view,
    _envelope_view,
    _known_signature,
    _parse_header,
)
from .envelope_start import start_enveloped
from .phases import PhaseGenerators
from .prepared import BoundEntry, BoundKey, PreparedCall
from .request import Request, StartedRequest, Then
from .vector_calls import VECTOR_FAST, leaves_gaps, vector_blocking_spec
from .vector_gatherv import HEADED, STREAM_NAME

#: the blocking calls whose prepared call is an envelope (dtype, shape and, when they fit,
#: the data), their data following in a phase of its own when it does not fit
_ENVELOPED = frozenset(("bcast", "scatter"))


class FastPaths(PhaseGenerators):
    """A blocking call's one route: look up its `PreparedCall`, run it; anything unusual
    returns `_SLOW` before the call takes its number, and the general path
    (`PhaseGenerators`) runs the call instead."""

    def _fast(self, collective: str, x: Any, op: Any, root: Any, out: Any,
              algorithm: str | None, timeout: float | None) -> Any:
        """A blocking call on contiguous arrays from its `PreparedCall`: the one bound to the
        collective's last signature (its compiled runner checks the arrays and runs
        the whole call), else the one the cache holds for the arguments (`_lookup`) — a
        single-phase call's, or a bcast's or scatter's envelope's (`_through_envelope`).

        The first call of a signature goes the general way (and checks everything); a
        signature run here by a compiled runner is then bound to it (`_bind_call`,
        `_bind_bcast`).
        """
        # the compiled whole call bound to ``collective`` (with the algorithm asked for, if
        # any) with this ``op`` and ``root``, unless the settings changed since (inline: the
        # hottest path)
        bound = self._bound_calls.get(collective if algorithm is None else
                                      (collective, algorithm))
        if (bound is not None and (bound[0] is op or (type(op) is tuple and bound[0] == op))
                and type(root) is int and root == bound[1]
                and self._generation == _cfg.generation):
            if timeout is None and self.timeout is None:  # the default needs no check
                timeout = _cfg.settings.timeout
                got = bound[2](x, out, timeout)
                if got is not _SLOW:
                    self.last_algorithm = bound[3]
            else:
                got, timeout = self._call_bound(collective, bound, x, out, timeout)
            if got is not _SLOW:
                if got is None and bound[4].header is not None:
                    # the root sent another signature: parse its envelope
                    return self._received(collective, bound[4], out, root,
                                          self._call_number[0] - 1, algorithm, timeout)
                return got
        if collective in _ENVELOPED:
            envelope = self._fast_envelope(collective, x, root, out, algorithm)
            if envelope is None:
                return _SLOW
            return self._through_envelope(collective, envelope, x, root, out, algorithm,
                                          timeout)
        prepared = self._lookup(collective, x, op, root, algorithm)
        if prepared is None:
            return _SLOW
        return self._run_prepared(collective, prepared, x, op, root, out, algorithm, timeout)

    def _call_bound(self, collective: str, bound: BoundEntry, x: Any, out: Any,
                    timeout: float | None) -> tuple[Any, float | None]:
        """``(result, timeout)`` of the compiled whole call ``bound`` (`_bound`): its result,
        None (a bcast's or scatter's root sent another signature, whose envelope the caller
        parses) or `_SLOW` (nothing ran)."""
        if timeout is None and self.timeout is None:
            timeout = _cfg.settings.timeout  # the default needs no check
        else:
            try:
                timeout = self._timeout(timeout, collective)
            except ArgumentError as exc:  # only this rank may see it: its peers are told
                abandon_call(self, exc)
                raise
        got = bound[2](x, out, timeout)
        if got is not _SLOW:
            self.last_algorithm = bound[3]
        return got, timeout

    def _lookup(self, collective: str, x: Any, op: Any, root: int, algorithm: str | None
                ) -> PreparedCall | None:
        """The prepared call of a single-phase blocking call on ``x``, or None (a first call,
        which prepares it, or one the fast path does not take)."""
        if type(x) is not np.ndarray:
            return None
        if self._generation != _cfg.generation:
            self._new_generation()
        if type(root) is not int and not isinstance(root, np.integer):
            return None  # 0.0 would find root 0's call: the general path rejects it
        key = (collective, x.dtype, x.shape, op, root, algorithm)
        try:
            prepared = self._cache.get(key, _SLOW)
        except TypeError:  # an unhashable op or root: the general path says what is wrong
            return None
        if prepared is _SLOW:
            self._cache.put(key, self._prepare_blocking(collective, x, op, root, algorithm))
            return None
        return prepared  # type: ignore[no-any-return]

    def _buffers(self, prepared: PreparedCall, x: np.ndarray, out: Any, private: bool
                 ) -> tuple[Any, np.ndarray | None, np.ndarray | None]:
        """``(result, send, recv)`` of a single-phase call on ``x`` by ``prepared`` (``recv``
        flat), or ``(_SLOW, None, None)`` for an ``x`` or ``out`` the fast paths do not take
        as they are (the general path copies or raises, naming the argument).

        An ``out`` that overlaps ``x`` (MPI_IN_PLACE: ``out`` is ``x``, or ``x`` its own block
        of ``out``) is taken as it is when the algorithm is right that way
        (`Algorithm.in_place`); otherwise ``x`` is copied first — into the prepared call's own
        send buffer, or (``private``: a non-blocking call, which another may overtake) into a
        copy of its own."""
        xf = x.flags
        if not xf.c_contiguous:
            return _SLOW, None, None
        send = x
        if not prepared.receives:
            return None, send, None
        dt = x.dtype
        if out is None:
            result = recv = (np.zeros if prepared.zeros else np.empty)(prepared.shape, dt)
        elif type(out) is np.ndarray and out.size == prepared.n_out and (
                out.dtype is dt or out.dtype == dt):
            of = out.flags
            if not (of.c_contiguous and of.writeable):
                return _SLOW, None, None
            result = recv = out
            # arrays that each own their memory cannot overlap, unless they are one array
            if (out is x or (not (of.owndata and xf.owndata) and np.may_share_memory(out, x))
                    ) and not prepared.algorithm.in_place:
                send = x.copy() if private else prepared.own_send(x)
        else:
            return _SLOW, None, None
        if recv.ndim != 1:
            recv = recv.reshape(-1)
        return result, send, recv

    def _run_prepared(self, collective: str, prepared: PreparedCall, x: np.ndarray, op: Any,
                      root: int, out: Any, algorithm: str | None, timeout: float | None
                      ) -> Any:
        """Run a single-phase blocking call on ``x`` by ``prepared``, binding its compiled
        runner to the signature; `_SLOW` for an ``x`` or ``out`` it does not take as is."""
        result, send, recv = self._buffers(prepared, x, out, False)
        if result is _SLOW:
            return _SLOW
        seq, timeout = self._next_call(timeout, collective)
        prepared.run_blocking(self, send, recv, seq, timeout)
        key = collective if algorithm is None else (collective, algorithm)
        if prepared.compiled is not None and (
                prepared.hot is None or self._bound_calls.get(key) is not prepared.hot):
            self._bind_call(collective, prepared, x, op, root, key)
        if result is None or prepared.none_on_this_rank:
            return None
        return result if result.shape == prepared.shape else result.reshape(prepared.shape)

    def _fast_start(self, collective: str, x: Any, op: Any, root: Any, out: Any,
                    algorithm: str | None, timeout: float | None) -> Request | None:
        """A non-blocking call begun from the `PreparedCall` its blocking form uses (same
        signature key, algorithm, native runner): its one phase started at once on the
        caller's arrays (`PreparedCall.start`, as the general path starts it), in a `Request`
        whose `~Request.test` and `~Request.wait` drive it with the communicator's other calls
        in flight. None where the blocking form would go the general way (a first call of
        the signature, which prepares it; an ``x`` or ``out`` the fast paths do not take)."""
        if collective in _ENVELOPED or collective == "scatterv":  # an envelope first
            return start_enveloped(self, collective, x, op, root, out, algorithm, timeout)
        if op is None and collective in VECTOR_FAST:
            return None  # counts that make no key: the general path
        prepared = self._lookup(collective, x, op, root, algorithm)
        if prepared is None:
            return None
        result, send, recv = self._buffers(prepared, x, out, True)
        if result is _SLOW:
            return None
        seq, timeout = self._next_call(timeout, collective)
        if result is not None and not prepared.none_on_this_rank:
            if result.shape != prepared.shape:
                result = result.reshape(prepared.shape)
        else:
            result = None
        started = prepared.start(self, send, recv, seq, 0, timeout, agree=prepared.agree)
        if collective == "gatherv":
            return StartedRequest(self, started, result,
                                  self._stream_step(send, recv, seq, timeout))
        return StartedRequest(self, started, result)

    def _stream_step(self, send: np.ndarray | None, recv: np.ndarray | None, seq: int,
                     timeout: float | None) -> Then:
        """A gatherv's second step: the stream phase its headers said its blocks go by
        (`direct_gatherv`), begun as the general path begins it (`by_headers`)."""
        def then(request: StartedRequest, headers: Any) -> Any:
            stream = getattr(headers, "streamed", None)
            if stream is None:
                return None
            return self._execute(stream, send, recv, seq, 1, STREAM_NAME, {}, timeout,
                                 counts_signature=HEADED)
        return then

    def _bind_call(self, collective: str, prepared: PreparedCall, x: np.ndarray, op: Any,
                   root: int, key: BoundKey) -> None:
        """Let ``prepared``'s compiled runner run whole calls of its signature: `_fast` then
        calls it first for ``collective`` with this ``op`` and ``root`` (``key``: the
        collective, or it and the algorithm the call asks for)."""
        hot = prepared.hot
        if hot is None:
            if prepared.none_on_this_rank or x.ndim > 8 or len(prepared.shape) > 8:
                return
            prepared.compiled.bind_call(
                self._calls, x.dtype, x.dtype.itemsize, x.shape,
                prepared.shape if prepared.receives else None, _SLOW,
                functools.partial(np.zeros if prepared.zeros else np.empty, prepared.shape,
                                  x.dtype))
            hot = prepared.hot = (op, root, prepared.compiled.call, prepared.name, prepared)
        self._bound_calls[key] = hot

    def _received(self, call: str, envelope: PreparedCall, out: Any, root: int, seq: int,
                  algorithm: str | None, timeout: float | None) -> np.ndarray:
        """A non-root's result of a bcast or scatter whose envelope ``envelope.recv`` holds:
        the inline data, or else the data phase (phase 1) run as the general path runs it."""
        assert envelope.header is not None and envelope.recv is not None
        raw = envelope.header.tobytes()
        views = envelope.views
        got: Any = views.get(raw)
        if got is None:  # (inline, dtype, shape, view of the inline data or `_data_call`'s)
            inline, dtype, shape, _ = _parse_header(raw)
            got = views.put(raw, (inline, dtype, shape, _envelope_view(
                envelope.recv, dtype, shape) if inline else None))
        inline, dtype, shape, view = got
        if inline and envelope.compiled is not None:
            self._bind_bcast(envelope, root, dtype, shape, view.nbytes, raw, call,
                             algorithm=algorithm)
        if inline:
            if out is None:
                return view.copy()  # type: ignore[no-any-return]
            if out.size == view.size and (out.dtype is dtype or out.dtype == dtype):
                if out.shape == shape:
                    out[...] = view
                    return out  # type: ignore[no-any-return]
                result = out.reshape(shape)
                result[...] = view
                return result  # type: ignore[no-any-return]
            self._out(call, out, shape, dtype)  # raises, naming ``out``
        # the data phase as the general path prepared it (a first one goes the general way)
        known = view if view is not None else self._data_call(call, envelope, raw, got, dtype,
                                                              root, algorithm)
        data = None
        if known is not None:
            data, size, _ = known
            if out is None:
                result = np.empty(shape, dtype)
            elif out.size == size and (out.dtype is dtype or out.dtype == dtype):
                result = out if out.shape == shape else out.reshape(shape)
            else:
                data = None  # the general phase takes part, then raises naming ``out``
        if data is not None:
            data.run_blocking(self, None, result.reshape(-1), seq, timeout, 1)
            return result
        return self._data_phase(call, dtype, shape, out, root, seq, algorithm, {}, timeout)

    def _through_envelope(self, call: str, envelope: PreparedCall, x: Any, root: int,
                          out: Any, algorithm: str | None, timeout: float | None) -> Any:
        """A blocking bcast or scatter through its prepared envelope call (`_envelope`).

        Taken only when the envelope's algorithm has a bound blocking runner (``shm_direct``),
        which depends on nothing that differs between ranks. The envelope phase is the general
        path's (`_bcast`, `_scatter`), so every rank may take this path or that one on its
        own: the root packs dtype, shape and (when they fit) the data into the envelope — a
        scatter's into one block per rank — or else sends the data in a phase of its own
        (`_root_data`); a non-root reads the envelope and, when the data did not fit, runs
        the data phase as the general path does (`_received`). Anything unusual returns
        `_SLOW`, before the call takes its number.
        """
        if self.rank != root:
            if out is not None and call == "bcast" and _knows_signatures(envelope):
                signature = _known_signature(out.dtype, out.shape, envelope.shape[0])
                if signature:
                    return self._known_reader(envelope, signature, out, root, algorithm,
                                              timeout)
            return self._envelope_call(call, envelope, None, (), out, root, algorithm, timeout)
        dt = x.dtype
        entry = self._kept_root_entry(call, envelope, x)
        if entry is None:
            return _SLOW
        head, inline, shape, own = entry
        if inline is None:  # the data follows the envelope in a phase of its own
            return self._root_data(call, envelope, x, out, entry, root, algorithm, timeout)
        if out is not None and not (out.size == own.size
                                    and (out.dtype is dt or out.dtype == dt)):
            return _SLOW  # the general path raises, naming ``out``
        if envelope.compiled is not None:
            self._bind_bcast(envelope, root, dt, shape, own.nbytes, head, call, x.shape,
                             algorithm)
        if envelope.head is not head:
            self._write_head(envelope, head)
        inline[...] = x.reshape(inline.shape)
        if out is x and call == "bcast":  # in place, as MPI_Bcast's root: x holds the result
            seq, timeout = self._next_call(timeout, call)
            envelope.run_blocking(self, envelope.send, envelope.recv, seq, timeout)
            return x
        return self._envelope_call(call, envelope, own, shape, out, root, algorithm, timeout)

    @staticmethod
    def _write_head(envelope: PreparedCall, head: np.ndarray) -> None:
        """Put ``head`` at the start of the root's envelope (of each block of a scatter's);
        only the fast paths write it, so they call this only when it changes."""
        assert envelope.send is not None
        envelope.send.reshape(-1, envelope.shape[0])[:, :_DATA_AT] = head
        envelope.head = head

    def _bind_bcast(self, envelope: PreparedCall, root: int, dtype: np.dtype,
                    shape: tuple[int, ...], nbytes: int, head: Any, call: str = "bcast",
                    x_shape: tuple[int, ...] | None = None, algorithm: str | None = None
                    ) -> None:
        """Let the compiled runner of ``envelope`` (a bcast's or scatter's envelope's) run
        whole calls whose result has ``dtype`` and ``shape`` (``nbytes`` of data after the
        envelope header ``head``; a scatter root's ``x`` has ``x_shape``): `bcast` and
        `scatter` then call it first."""
        blocks = block = own = 0
        if call == "scatter" and x_shape is not None:  # the root writes every rank's block
            blocks, block, own = self.size, envelope.shape[0], self.rank * nbytes
        envelope.compiled.bind_bcast(self._calls, envelope.recv, dtype, x_shape or shape, nbytes,
                                     head, _SLOW, functools.partial(np.empty, shape, dtype),
                                     shape, max(blocks, 1), block, own)
        self._bound_calls[call if algorithm is None else (call, algorithm)] = (
            None, root, envelope.compiled.bcast, envelope.name, envelope)

    def _bound(self, collective: str, op: Any, root: Any, algorithm: str | None
               ) -> BoundEntry | None:
        """``(op, root, call, algorithm name, prepared call)``: the compiled whole call bound to
        ``collective`` with ``op`` and ``root`` (None: nothing bound, or an algorithm asked
        for, or the settings changed since); `_fast` inlines the same test."""
        hot = self._bound_calls.get(collective)
        if (hot is not None and (hot[0] is op or (type(op) is tuple and hot[0] == op))
                and type(root) is int and root == hot[1]
                and algorithm is None and self._generation == _cfg.generation):
            return hot
        return None

    def _root_data(self, call: str, envelope: PreparedCall, x: np.ndarray, out: Any,
                   entry: tuple[Any, ...], root: int, algorithm: str | None,
                   timeout: float | None) -> Any:
        """The root of a bcast or scatter whose data does not fit the envelope (its view
        ``entry``, `_root_entry`): the envelope (headers only), then the data phase from its
        prepared runner, as the general path runs them; `_SLOW` until a general call has
        prepared that phase, or for an ``out`` that is wrong or overlaps ``x`` (the general
        path copies or raises)."""
        head, _, shape, known = entry
        if known is None:
            known = self._data_call(call, envelope, (x.dtype, x.shape), entry, x.dtype, root,
                                    algorithm)
            if known is None:
                return _SLOW
        data, count, confirm = known
        own = x.reshape(self.size, -1)[self.rank] if call == "scatter" else x
        if out is None:
            result = np.empty(shape, x.dtype)
        elif out.size == count and (out.dtype is x.dtype or out.dtype == x.dtype) and (
                out is own or _same_bytes(out, own) or not np.may_share_memory(out, x)):
            result = out
        else:
            return _SLOW
        if envelope.head is not head:
            self._write_head(envelope, head)
        seq, timeout = self._next_call(timeout, call)
        one = None
        if call == "bcast" and _knows_signatures(envelope):
            # one phase when every rank knows the data's signature (`run_known`)
            one = envelope.compiled.run_known(
                _known_signature(x.dtype, shape, envelope.shape[0]), envelope.send,
                envelope.recv, x, seq, timeout)
        if one is None:
            envelope.run_blocking(self, envelope.send, envelope.recv, seq, timeout,
                                  confirm=confirm)
        if not one:
            data.run_blocking(self, x.reshape(-1), result.reshape(-1), seq, timeout, 1)
        else:
            if result is not x and not _same_bytes(result, x):
                result.reshape(-1)[...] = x.reshape(-1)
            self._bind_known(envelope, root, x.dtype, shape, algorithm,
                             (head, None, shape, known))
        return result if result.shape == shape else result.reshape(shape)

    def _known_reader(self, envelope: PreparedCall, signature: int, out: np.ndarray,
                      root: int, algorithm: str | None, timeout: float | None) -> Any:
        """A bcast's non-root that passed ``out``, whose data cannot go in the envelope: in one
        phase when every rank knows the data's ``signature`` (`run_known`), else the envelope
        and the data phase as `_received` runs them."""
        seq, timeout = self._next_call(timeout, "bcast")
        one = envelope.compiled.run_known(signature, None, envelope.recv, out, seq, timeout)
        if one:
            self._bind_known(envelope, root, out.dtype, out.shape, algorithm, signature)
            return out
        if one is None:
            envelope.run_blocking(self, None, envelope.recv, seq, timeout)
        return self._received("bcast", envelope, out, root, seq, algorithm, timeout)

    def _bind_known(self, envelope: PreparedCall, root: int, dtype: np.dtype,
                    shape: tuple[int, ...], algorithm: str | None, known: Any) -> None:
        """Bind a bcast of ``dtype`` and ``shape`` whose data every rank knew (`run_known`)
        to `bcast`: its later calls skip the envelope's lookups and go straight to
        `_root_data` (``known``: the root's envelope entry) or `_known_reader` (``known``:
        the signature), which go on in two phases when a rank does not know it."""
        key = ("known", root, dtype, shape, algorithm)
        bound = envelope.views.get(key)
        if bound is None:
            if root == self.rank:
                def run(x: Any, out: Any, timeout: float | None) -> Any:
                    if type(x) is not np.ndarray or x.shape != shape or x.dtype != dtype \
                            or not x.flags.c_contiguous or (out is not None and (
                                type(out) is not np.ndarray or not out.flags.c_contiguous
                                or not out.flags.writeable)):
                        return _SLOW
                    return self._root_data("bcast", envelope, x, out, known, root,
                                           algorithm, timeout)
            else:
                def run(x: Any, out: Any, timeout: float | None) -> Any:
                    if type(out) is not np.ndarray or out.shape != shape \
                            or out.dtype != dtype or not out.flags.c_contiguous \
                            or not out.flags.writeable:
                        return _SLOW
                    return self._known_reader(envelope, known, out, root, algorithm, timeout)
            bound = envelope.views.put(key, (None, root, run, envelope.name, envelope))
        self._bound_calls["bcast" if algorithm is None else ("bcast", algorithm)] = bound

    def _data_call(self, call: str, envelope: PreparedCall, key: Any, entry: tuple[Any, ...],
                   dtype: np.dtype, root: int, algorithm: str | None
                   ) -> tuple[PreparedCall, int, bool] | None:
        """``(data phase, count, confirm)`` of a bcast or scatter whose data does not fit
        ``envelope``: the data phase's prepared call as the general path prepared it (None
        until a call did), its element count, and whether the envelope's root confirms its
        readers found the call (not when a direct envelope is followed by a data phase that
        checks the root itself). Kept in place of the envelope view ``entry`` (under
        ``key``) has no use for, so later calls of the signature look nothing up."""
        count = math.prod(entry[2])
        data = self._known(_bcast_spec(self.size, dtype, count, root, call), algorithm)
        if data is None:
            return None
        known = (data, count, not (data.checks_root and envelope.name == "shm_direct"))
        envelope.views.put(key, (*entry[:3], known))
        return known

    def _fast_envelope(self, call: str, x: Any, root: Any, out: Any, algorithm: str | None
                       ) -> Any:
        """The prepared envelope of a fast bcast or scatter (`_envelope`), or None when ``out``
        (any rank's) or ``x`` (the root's) is not a contiguous array the fast path takes as it
        is."""
        if out is not None and (type(out) is not np.ndarray
                                or not (out.flags.c_contiguous and out.flags.writeable)):
            return None
        if self.rank == root and (type(x) is not np.ndarray or not x.flags.c_contiguous):
            return None
        return self._envelope(call, root, algorithm)

    def _envelope(self, collective: str, root: Any, algorithm: str | None
                  ) -> PreparedCall | None:
        """The prepared envelope call of a blocking bcast or scatter with ``root``, when the
        envelope's algorithm has a bound blocking runner (only ``shm_direct``'s is worth it);
        else None — also until a general call has prepared the envelope's algorithm (the
        general path runs the root agreement and says what is wrong with a bad ``root``)."""
        if type(root) is not int or not 0 <= root < self.size:
            return None  # 0.0 or np.int64(0) would find root 0's: the general path checks
        if self._generation != _cfg.generation:
            self._new_generation()
        key = (collective, "envelope", root, algorithm)
        call = self._cache.get(key, _SLOW)
        if call is not _SLOW:
            return call  # type: ignore[no-any-return]
        p = self.size
        if collective == "bcast":
            size = self._envelope_size("bcast", algorithm)
            spec = _bcast_spec(p, _ENVELOPE_DTYPE, size, root)
        else:  # a scatterv's envelope is a scatter's with its own signature
            size = self._scatter_block(algorithm, collective)
            spec = _bcast_spec(p, _ENVELOPE_DTYPE, size, root, "scatter")
        prepared = self._known(spec, algorithm, "envelope" if collective != "scatterv"
                               else ("scatterv", "envelope"))
        if prepared is None:
            return None
        call = prepared.for_blocking((size,), True, agree=True)
        # the envelope's header says how many of its bytes are in use (`_HEADER`'s nbytes)
        call.length_prefix = (_NBYTES_AT, _DATA_AT)
        if call.bind(self) is None:
            return self._cache.put(key, None)  # type: ignore[no-any-return]
        if collective == "bcast":
            call.scratch = call.send = call.recv = np.zeros(size, np.uint8)
        else:
            call.scratch = np.zeros((p + 1) * size, np.uint8)
            call.send, call.recv = call.scratch[: p * size], call.scratch[p * size:]
        call.header = call.recv[:_DATA_AT]
        return self._cache.put(key, call)  # type: ignore[no-any-return]

    def _envelope_call(self, call: str, envelope: PreparedCall, mine: np.ndarray | None,
                       shape: tuple[int, ...], out: Any, root: int, algorithm: str | None,
                       timeout: float | None) -> Any:
        """Run a fast bcast's or scatter's envelope call; the root's result is ``mine`` (None
        on the other ranks, which read theirs from the envelope, `_received`)."""
        seq, timeout = self._next_call(timeout, call)
        envelope.run_blocking(self, None if mine is None else envelope.send, envelope.recv,
                              seq, timeout)
        if mine is None:
            return self._received(call, envelope, out, root, seq, algorithm, timeout)
        # the root's result comes from its envelope, which ``out`` cannot overlap
        if out is None:
            return mine.copy()
        if out.shape == shape:
            out[...] = mine
            return out
        result = out.reshape(shape)
        result[...] = mine
        return result

    def _kept_root_entry(self, call: str, envelope: PreparedCall, x: np.ndarray) -> Any:
        """`_root_entry` for ``x``'s dtype and shape, worked out once and kept with the
        envelope."""
        key = (x.dtype, x.shape)
        entry = envelope.views.get(key, _SLOW)
        if entry is _SLOW:
            entry = envelope.views.put(key, self._root_entry(call, envelope, x))
        return entry

    def _root_entry(self, call: str, envelope: PreparedCall, x: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray | None, tuple[int, ...], Any] | None:
        """``(header, inline, shape, own)`` of a root's bcast or scatter of ``x`` through
        ``envelope`` — ``inline``: where ``x`` goes in it (a scatter's: every block's data as
        one ``(size, *shape)`` view), None when the data follows in a phase of its own;
        ``shape``: the result's; ``own``: the root's result in the envelope (when the data
        follows, `_data_call`'s once known) — or None when the call does not fit the
        envelope's header (the general path takes it)."""
        p, dt = self.size, x.dtype
        if dt.kind not in _FAST_KINDS:
            return None
        if call == "bcast":
            shape = x.shape
        elif x.ndim == 0 or x.ndim > 8 or x.shape[0] % p:
            return None
        else:
            shape = (x.shape[0] // p, *x.shape[1:])
        block = envelope.shape[0]  # the envelope's bytes (a scatter's: each rank's block's)
        fits = math.prod(shape) * dt.itemsize <= block - _DATA_AT
        head = _bcast_head(dt, shape, fits)
        if head is None:
            return None
        if not fits:
            return head, None, shape, None
        assert envelope.scratch is not None
        if call == "bcast":
            view = _envelope_view(envelope.scratch, dt, shape)
            return head, view, shape, view
        blocks = _blocks_view(envelope.scratch, p, block, dt, shape)
        return head, blocks, shape, blocks[self.rank]

    def _prepare_blocking(self, collective: str, x: np.ndarray, op: Any, root: int,
                          algorithm: str | None) -> PreparedCall | None:
        """The prepared call of a blocking call on ``x`` (its spec's, `_prepared`, knowing the
        result's shape), or None when the call does not fit the fast path."""
        try:
            got = self._blocking_spec(collective, x, op, root)
            if got is None:
                return None
            spec, signature, shape, receives = got
            return self._prepared(spec, algorithm, {}, signature).for_blocking(
                shape, receives, collective == "exscan" and self.rank == 0,
                agree=collective in ("gather", "gatherv", "reduce"),
                zeros=receives and leaves_gaps(spec, shape))
        except CollopsError:
            return None

    def _blocking_spec(self, collective: str, x: np.ndarray, op: Any, root: int
                       ) -> tuple[CallSpec, object, tuple[int, ...], bool] | None:
        """``(spec, counts signature, result shape, whether this rank receives)`` of a
        blocking single-phase call on ``x`` as its general path makes them (None: a call the
        fast path does not take)."""
        if collective == "barrier":
            return make_spec("barrier", self.size, np.uint8), None, (), False
        check_dtype(x.dtype, collective, "x", self.rank)  # what the general path checks
        if collective in VECTOR_FAST:  # ``op``: the key of its counts (`vector_key`)
            return vector_blocking_spec(self, collective, x, op, root)
        p, dt = self.size, x.dtype
        if collective in ("allreduce", "reduce", "scan", "exscan"):
            resolved = self._op(collective, op, dt)
            root = self._check_root(collective, root) if collective == "reduce" else 0
            spec = make_spec(collective, p, dt, count=x.size, root=root, op=resolved)
            receives = collective != "reduce" or self.rank == root
            return spec, (spec.count, spec.counts, resolved.name), x.shape, receives
        if collective in ("allgather", "gather"):
            root = self._check_root(collective, root) if collective == "gather" else 0
            spec = make_spec(collective, p, dt, count=x.size, root=root)
            shape = (p,) if x.ndim == 0 else (p * x.shape[0], *x.shape[1:])
            return spec, None, shape, collective == "allgather" or self.rank == root
        if collective == "reduce_scatter_block":
            if x.ndim == 0 or x.shape[0] % p:
                return None
            resolved = self._op(collective, op, dt)
            rows = x.shape[0] // p
            elem = rows * _row_size(x)
            spec = make_spec(collective, p, dt, count=elem, counts=[elem] * p, op=resolved)
            return spec, (spec.count, spec.counts, resolved.name), (rows, *x.shape[1:]), True
        if collective == "alltoall":
            if x.ndim == 0 or x.shape[0] % p:
                return None
            spec = make_spec("alltoall", p, dt, count=x.size // p)
            return spec, (spec.count,), x.shape, True
        return None


def _knows_signatures(envelope: PreparedCall) -> bool:
    """Whether a bcast envelope's bound runner can run a call whose data every rank knows in
    one phase (`run_known`: ``mpi_native`` on a node's board)."""
    return bool(getattr(envelope.compiled, "knows_signatures", False))
