"""A blocking call's one route: look up its prepared call, run it (by a native algorithm's
bound runner where it has one; see `Comm`)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .. import config as _cfg
from ..algorithms.spec import CallSpec, make_spec
from ..datatypes import check_dtype
from ..errors import ArgumentError, CollopsError
from .abandon import abandon_call
from .commbase import _SLOW, _row_size
from .envelope_start import start_enveloped
from .enveloped import EnvelopedCalls
from .overlap import may_overlap
from .prepared import BoundEntry, BoundKey, PreparedCall
from .request import Request, StartedRequest, Then
from .vector_calls import VECTOR_FAST, leaves_gaps, vector_blocking_spec
from .vector_gatherv import HEADED, STREAM_NAME

#: the blocking calls whose prepared call is an envelope (dtype, shape and, when they fit,
#: the data), their data following in a phase of its own when it does not fit
_ENVELOPED = frozenset(("bcast", "scatter"))


class FastPaths(EnvelopedCalls):
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
            if (out is x or (not (of.owndata and xf.owndata) and may_overlap(out, x))
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
