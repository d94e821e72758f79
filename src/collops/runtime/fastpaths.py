"""Blocking calls from cached templates: single-phase calls and the envelopes of bcast and
scatter, run by a native algorithm's bound runner where it has one (see `Comm`)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import config as _cfg
from ..algorithms.spec import CallSpec, make_spec
from ..datatypes import check_dtype
from ..errors import CollopsError
from .commbase import _SLOW, _bind_of, _row_size, _same_bytes
from .envelope import (
    _DATA_AT,
    _ENVELOPE_DTYPE,
    _FAST_KINDS,
    _NBYTES_AT,
    _bcast_head,
    _bcast_spec,
    _blocks_view,
    _envelope_view,
    _parse_header,
)
from .phases import PhaseGenerators
from .prepared import BoundEntry, _Template


class FastPaths(PhaseGenerators):
    """The blocking fast paths, each falling back to the general path (`PhaseGenerators`)."""

    def _new_generation(self) -> None:
        """The settings changed: drop the templates made under the old ones."""
        self._cache.clear()
        self._bound_calls.clear()
        self._generation = _cfg.generation

    def _fast(self, collective: str, x: Any, op: Any, root: int, out: Any,
              algorithm: str | None, timeout: float | None) -> Any:
        """Blocking single-phase calls on contiguous arrays, from a cached template.

        Returns `_SLOW` whenever anything is unusual (a first call, an odd buffer, overlap):
        the general path then handles the call and raises the proper errors. A signature run
        here by a compiled runner is bound to it (`_bind_call`), and its next calls go to the
        runner straight away.
        """
        bound = self._bound(collective, op, root, algorithm)
        if bound is not None:
            got = bound[2](x, out, self._timeout(timeout, collective))
            if got is not _SLOW:
                self.last_algorithm = bound[3]
                return got
        if type(x) is not np.ndarray:
            return _SLOW
        if self._generation != _cfg.generation:
            self._new_generation()
        if type(root) is not int and not isinstance(root, np.integer):
            return _SLOW  # 0.0 would find root 0's template: the general path rejects it
        dt = x.dtype
        key = ("template", collective, dt, x.shape, op, root, algorithm)
        try:
            template = self._cache.get(key, _SLOW)
        except TypeError:  # an unhashable op or root: the general path says what is wrong
            return _SLOW
        if template is _SLOW:
            self._cache.put(key, self._template(collective, x, op, root))
            return _SLOW  # the first call goes the general way (and checks everything)
        if template is None:
            return _SLOW
        xf = x.flags
        if not xf.c_contiguous:
            return _SLOW
        if not template.receives:
            result = recv = None
        elif out is None:
            result = recv = np.empty(template.shape, dt)
            if recv.ndim != 1:
                recv = recv.reshape(-1)
        elif type(out) is np.ndarray and out.size == template.n_out and (
                out.dtype is dt or out.dtype == dt):
            of = out.flags
            # arrays that each own their memory cannot overlap, unless they are one array
            if not (of.c_contiguous and of.writeable) or out is x or (
                    not (of.owndata and xf.owndata) and np.may_share_memory(out, x)):
                return _SLOW
            result = recv = out
            if recv.ndim != 1:
                recv = recv.reshape(-1)
        else:
            return _SLOW
        seq, timeout = self._next_call(timeout, collective)
        runner = template.runner
        if runner is not None:  # a native blocking fast path, prepared by an earlier call
            self.last_algorithm = template.alg_name
            runner(x, recv, seq, timeout)
            if template.compiled is not None and algorithm is None and (
                    template.hot is None or self._bound_calls.get(collective) is not template.hot):
                self._bind_call(collective, template, x, op, root)
        else:
            self._run_template(template, x, recv, seq, algorithm, timeout)
        if result is None or template.none_on_this_rank:
            return None
        return result if result.shape == template.shape else result.reshape(template.shape)

    def _bind_call(self, collective: str, template: _Template, x: np.ndarray, op: Any,
                   root: int) -> None:
        """Let ``template``'s compiled runner run whole calls of its signature: `_fast` then
        calls it first for ``collective`` with this ``op`` and ``root``."""
        hot = template.hot
        if hot is None:
            if template.none_on_this_rank or x.ndim > 8 or len(template.shape) > 8:
                return
            template.compiled.bind_call(
                self._calls, x.dtype, x.dtype.itemsize, x.shape,
                template.shape if template.receives else None, _SLOW,
                functools.partial(np.empty, template.shape, x.dtype))
            hot = template.hot = (op, root, template.compiled.call, template.alg_name, template)
        self._bound_calls[collective] = hot

    def _run_template(self, template: _Template, x: np.ndarray | None, result: np.ndarray | None,
                      seq: int, algorithm: str | None, timeout: float | None) -> None:
        """Run phase 0 of call ``seq`` from ``template`` to completion."""
        spec = template.spec
        prepared = template.prepared
        timeout = self._timeout(timeout, spec.collective)
        rooted = spec.collective in ("gather", "reduce")
        if prepared is not None and rooted and not prepared[0].agrees_on_root:
            prepared = None  # `_execute` runs the root agreement first
        bind = None if prepared is None else _bind_of(prepared[0])
        if bind is not None:
            assert prepared is not None
            self.last_algorithm = template.alg_name = prepared[0].name
            runner = template.runner
            if runner is None:
                runner = template.runner = bind(self._native_call(spec, prepared[3]))
                owner = getattr(runner, "__self__", None)
                template.compiled = owner if hasattr(owner, "bind_call") else None
            runner(x, result if result is None or result.ndim == 1 else result.reshape(-1), seq,
                   timeout)
            return
        if prepared is None or prepared[1] is None:
            ex = self._execute(spec, x, result, seq, 0, algorithm, {}, timeout,
                               template.signature, agree=rooted)
            template.prepared = self._cache.get(
                ("prepared", spec, algorithm, (), template.signature, _cfg.generation))
        else:
            self.last_algorithm = prepared[0].name
            ex = self._begin(prepared, spec, x, result, seq, 0, timeout)
        if not ex.poll():
            self._progress.wait(ex)

    def _data_phase_runner(self, spec: CallSpec, algorithm: str | None
                           ) -> tuple[Callable[..., None], str] | None:
        """``(fn, algorithm name)``: a blocking ``fn(send, recv, seq, timeout, phase)`` for a
        bcast's or scatter's data phase of ``spec``, once a general call has prepared it (else
        None): the algorithm's own fast path where it has one, else its plan run by an
        `Execution`."""
        key = ("data", spec, algorithm)
        known = self._cache.get(key)
        if known is not None:
            return known  # type: ignore[no-any-return]
        prepared = self._cache.get(("prepared", spec, algorithm, (), None, _cfg.generation))
        if prepared is None:
            return None
        alg, plan, info, resolved = prepared
        bind = _bind_of(alg)
        if bind is not None:
            fn: Callable[..., None] = bind(self._native_call(spec, resolved))
        elif plan is not None:
            def fn(send: np.ndarray | None, recv: np.ndarray | None, seq: int,
                   timeout: float | None, phase: int) -> None:
                ex = self._begin(prepared, spec, send, recv, seq, phase, timeout)
                if not ex.poll():
                    self._progress.wait(ex)
        else:
            return None
        return self._cache.put(key, (fn, alg.name))  # type: ignore[no-any-return]

    def _envelope_template(self, collective: str, root: Any, algorithm: str | None
                           ) -> _Template | None:
        """The template of a bcast's or a scatter's envelope phase, when it is prepared with
        a blocking fast path (only an envelope algorithm with one, ``shm_direct``, is worth
        it); else None, making the template on a first call, which goes the general way and
        so prepares the envelope's algorithm."""
        if type(root) is not int or not 0 <= root < self.size:
            return None
        key = ("envelope", collective, root, algorithm)
        template = self._cache.get(key, _SLOW)
        if template is _SLOW:
            p = self.size
            if collective == "bcast":
                size = self._envelope_size("bcast", algorithm)
                t = _Template(_bcast_spec(p, _ENVELOPE_DTYPE, size, root), "envelope",
                              (size,), True)
                t.scratch = t.send = t.recv = np.zeros(size, np.uint8)
            else:
                block = self._scatter_block(algorithm)
                t = _Template(_bcast_spec(p, _ENVELOPE_DTYPE, block, root, "scatter"),
                              "envelope", (block,), True)
                t.scratch = np.zeros((p + 1) * block, np.uint8)
                t.send, t.recv = t.scratch[: p * block], t.scratch[p * block:]
            t.header = t.recv[:_DATA_AT]
            self._cache.put(key, t)
            return None
        if template is None:
            return None
        if template.runner is None:
            prepared = template.prepared
            if prepared is None:
                prepared = template.prepared = self._cache.get(
                    ("prepared", template.spec, algorithm, (), "envelope", _cfg.generation))
            bind = (None if prepared is None or not prepared[0].agrees_on_root
                    else _bind_of(prepared[0]))
            if bind is None:
                return None  # (the general path runs the root agreement, `agreement`)
            assert prepared is not None
            # the envelope's header says how many of its bytes are in use (`_HEADER`'s nbytes)
            template.runner = bind(self._native_call(template.spec, prepared[3]),
                                   length_prefix=(_NBYTES_AT, _DATA_AT))
            template.alg_name = prepared[0].name
            if collective in ("bcast", "scatter"):
                owner = getattr(template.runner, "__self__", None)
                template.compiled = owner if hasattr(owner, "bind_bcast") else None
        return template  # type: ignore[no-any-return]

    def _received(self, call: str, template: _Template, out: Any, root: int, seq: int,
                  algorithm: str | None, timeout: float | None) -> np.ndarray:
        """A non-root's result of a bcast or scatter whose envelope ``template.recv`` holds:
        the inline data, or else the data phase (phase 1) run as the general path runs it."""
        assert template.header is not None and template.recv is not None
        raw = template.header.tobytes()
        views = template.views
        got: Any = views.get(raw)
        if got is None:  # (inline, dtype, shape, view of the inline data or None)
            inline, dtype, shape, _ = _parse_header(raw)
            got = views.put(raw, (inline, dtype, shape, _envelope_view(
                template.recv, dtype, shape) if inline else None))
        inline, dtype, shape, view = got
        if inline and algorithm is None and template.compiled is not None:
            self._bind_bcast(template, root, dtype, shape, view.nbytes, raw, call)
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
        if call in ("bcast", "scatter"):
            size = math.prod(shape)
            spec = _bcast_spec(self.size, dtype, size, root, call)
            data = self._data_phase_runner(spec, algorithm)
            if data is not None:
                if out is None:
                    result = np.empty(shape, dtype)
                elif out.size == size and (out.dtype is dtype or out.dtype == dtype):
                    result = out if out.shape == shape else out.reshape(shape)
                else:
                    data = None  # the general phase takes part, then raises naming ``out``
            if data is not None:
                data[0](None, result.reshape(-1), seq, timeout, 1)
                self.last_algorithm = data[1]
                return result
        return self._data_phase(call, dtype, shape, out, root, seq, algorithm, {}, timeout)

    def _fast_bcast(self, x: Any, root: Any, out: Any, algorithm: str | None,
                    timeout: float | None) -> Any:
        """A blocking broadcast whose envelope carries the data, from a cached template.

        Taken only when the envelope's algorithm has a blocking fast path (``shm_direct``),
        which depends on nothing that differs between ranks. The envelope phase is the general
        path's (`_bcast`), so every rank may choose this path or that one on its own: the root
        packs dtype, shape and data into the envelope when they fit (else it goes the general
        way, which sends them in a second phase); a non-root reads the envelope and, when the
        data did not fit, runs the data phase as the general path does. Anything unusual
        returns `_SLOW`.
        """
        template = self._fast_envelope("bcast", x, root, out, algorithm)
        if template is None:
            return _SLOW
        env = template.scratch
        is_root = self.rank == root
        if is_root:
            dt, shape = x.dtype, x.shape
            entry = template.views.get((dt, shape), _SLOW)
            if entry is _SLOW:
                fits = x.nbytes <= env.size - _DATA_AT
                head = _bcast_head(dt, shape, fits) if dt.kind in _FAST_KINDS else None
                entry = template.views.put((dt, shape), None if head is None else (
                    head, _envelope_view(env, dt, shape) if fits else None))
            if entry is None:
                return _SLOW
            if entry[1] is None:  # the data follows the envelope in a phase of its own
                return self._fast_bcast_root_data(template, x, out, entry[0], root,
                                                  algorithm, timeout)
            if out is not None and not (out.size == x.size
                                        and (out.dtype is dt or out.dtype == dt)):
                return _SLOW  # the general path raises, naming ``out``
            head, view = entry
            if algorithm is None and template.compiled is not None:
                self._bind_bcast(template, root, dt, shape, x.nbytes, head)
            if template.head is not head:  # only this path writes the root's envelope
                env[:_DATA_AT] = head
                template.head = head
            view[...] = x
            if out is x:  # in place, as MPI_Bcast's root: x already holds the result
                seq, timeout = self._next_call(timeout, "bcast")
                self.last_algorithm = template.alg_name
                template.runner(env, env, seq, timeout)
                return x
        return self._envelope_call("bcast", template, env if is_root else None, env,
                                   view if is_root else None, shape if is_root else (), out,
                                   root, algorithm, timeout)

    def _bind_bcast(self, template: _Template, root: int, dtype: np.dtype,
                    shape: tuple[int, ...], nbytes: int, head: Any, call: str = "bcast",
                    x_shape: tuple[int, ...] | None = None) -> None:
        """Let the compiled runner of ``template`` (a bcast's or scatter's envelope's) run
        whole calls whose result has ``dtype`` and ``shape`` (``nbytes`` of data after the
        envelope header ``head``; a scatter root's ``x`` has ``x_shape``): `bcast` and
        `scatter` then call it first."""
        blocks = block = own = 0
        if call == "scatter" and x_shape is not None:  # the root writes every rank's block
            blocks, block, own = self.size, template.shape[0], self.rank * nbytes
        template.compiled.bind_bcast(self._calls, template.recv, dtype, x_shape or shape, nbytes,
                                     head, _SLOW, functools.partial(np.empty, shape, dtype),
                                     shape, max(blocks, 1), block, own)
        self._bound_calls[call] = (None, root, template.compiled.bcast, template.alg_name,
                                   template)

    def _envelope_fast(self, call: str, x: Any, root: Any, out: Any, algorithm: str | None,
                       timeout: float | None, params: dict) -> Any:
        """A blocking bcast or scatter by its bound compiled call, else by `_fast_bcast` or
        `_fast_scatter`; `_SLOW` when neither can take it."""
        if params:
            return _SLOW
        bound = self._bound(call, None, root, algorithm)
        if bound is not None:
            timeout = self._timeout(timeout, call)
            got = bound[2](x, out, timeout)
            if got is not _SLOW:
                self.last_algorithm = bound[3]
            if got is None:  # the root sent another signature: parse its envelope
                return self._received(call, bound[4], out, root, self._call_number[0] - 1,
                                      None, timeout)
            if got is not _SLOW:
                return got
        fast = self._fast_bcast if call == "bcast" else self._fast_scatter
        return fast(x, root, out, algorithm, timeout)

    def _bound(self, collective: str, op: Any, root: Any, algorithm: str | None
               ) -> BoundEntry | None:
        """``(op, root, call, algorithm name, template)``: the compiled whole call bound to
        ``collective`` with ``op`` and ``root`` (None: nothing bound, or an algorithm asked
        for, or the settings changed since)."""
        hot = self._bound_calls.get(collective)
        if (hot is not None and hot[0] is op and type(root) is int and root == hot[1]
                and algorithm is None and self._generation == _cfg.generation):
            return hot
        return None

    def _fast_bcast_root_data(self, template: Any, x: np.ndarray, out: Any, head: np.ndarray,
                              root: int, algorithm: str | None, timeout: float | None) -> Any:
        """The root of a broadcast whose data does not fit its envelope (see `_root_data`)."""
        return self._root_data("bcast", template, x, out, head, x.shape, x.size, root,
                               algorithm, timeout)

    def _fast_scatter_root_data(self, template: Any, x: np.ndarray, out: Any, head: np.ndarray,
                                shape: tuple[int, ...], root: int, algorithm: str | None,
                                timeout: float | None) -> Any:
        """The root of a scatter whose rows do not fit its blocks (see `_root_data`)."""
        return self._root_data("scatter", template, x, out, head, shape, math.prod(shape),
                               root, algorithm, timeout)

    def _root_data(self, call: str, template: Any, x: np.ndarray, out: Any, head: np.ndarray,
                   shape: tuple[int, ...], count: int, root: int, algorithm: str | None,
                   timeout: float | None) -> Any:
        """The root of a bcast or scatter whose data does not fit the envelope: the envelope
        (headers only), then the data phase from its prepared runner, as the general path
        runs them; `_SLOW` until a general call has prepared that phase, or for an ``out``
        that is wrong or overlaps ``x`` (the general path copies or raises)."""
        spec = _bcast_spec(self.size, x.dtype, count, root, call)
        data = self._data_phase_runner(spec, algorithm)
        if data is None:
            return _SLOW
        own = x.reshape(self.size, -1)[self.rank] if call == "scatter" else x
        if out is None:
            result = np.empty(shape, x.dtype)
        elif out.size == count and (out.dtype is x.dtype or out.dtype == x.dtype) and (
                _same_bytes(out, own) or not np.may_share_memory(out, x)):
            result = out
        else:
            return _SLOW
        if template.head is not head:  # only the fast paths write the root's envelope
            if call == "scatter":
                template.send.reshape(self.size, -1)[:, :_DATA_AT] = head
            else:
                template.scratch[:_DATA_AT] = head
            template.head = head
        seq, timeout = self._next_call(timeout, call)
        template.runner(template.send, template.recv, seq, timeout)
        data[0](x.reshape(-1), result.reshape(-1), seq, timeout, 1)
        self.last_algorithm = data[1]
        return result if result.shape == shape else result.reshape(shape)

    def _fast_scatter(self, x: Any, root: Any, out: Any, algorithm: str | None,
                      timeout: float | None) -> Any:
        """A blocking scatter whose envelope carries the data, from a cached template.

        The envelope is a scatter of one block of bytes per rank — each block a header (dtype,
        this rank's shape) and, when it fits, the rank's rows — in one direct call. As for
        `_fast_bcast`, the envelope phase is the general path's (`_scatter`), so each rank may
        take this path or that one on its own; anything unusual returns `_SLOW`.
        """
        template = self._fast_envelope("scatter", x, root, out, algorithm)
        if template is None:
            return _SLOW
        is_root = self.rank == root
        if is_root:
            dt = x.dtype
            entry = template.views.get((dt, x.shape), _SLOW)
            if entry is _SLOW:
                entry = template.views.put((dt, x.shape), self._scatter_entry(template, x))
            if entry is None:
                return _SLOW
            head, blocks, shape, own = entry
            if blocks is None:
                return self._fast_scatter_root_data(template, x, out, head, shape, root,
                                                    algorithm, timeout)
            if out is not None and not (out.size == own.size
                                        and (out.dtype is dt or out.dtype == dt)):
                return _SLOW  # the general path raises, naming ``out``
            if algorithm is None and template.compiled is not None:
                self._bind_bcast(template, root, dt, shape, own.nbytes, head, "scatter",
                                 x.shape)
            if template.head is not head:  # only this path writes the root's envelope
                template.send.reshape(self.size, -1)[:, :_DATA_AT] = head
                template.head = head
            blocks[...] = x.reshape(blocks.shape)
        return self._envelope_call("scatter", template, template.send if is_root else None,
                                   template.recv, own if is_root else None,
                                   shape if is_root else (), out, root, algorithm, timeout)

    def _fast_envelope(self, call: str, x: Any, root: Any, out: Any, algorithm: str | None
                       ) -> Any:
        """The envelope template of a fast bcast or scatter (`_envelope_for`), or None when
        ``out`` (any rank's) or ``x`` (the root's) is not a contiguous array the fast path
        takes as it is."""
        template = self._envelope_for(call, root, algorithm)
        if template is None:
            return None
        if out is not None and (type(out) is not np.ndarray
                                or not (out.flags.c_contiguous and out.flags.writeable)):
            return None
        if self.rank == root and (type(x) is not np.ndarray or not x.flags.c_contiguous):
            return None
        return template

    def _envelope_for(self, collective: str, root: Any, algorithm: str | None) -> Any:
        """The prepared envelope template of a fast bcast or scatter (None: go the general
        way, which also says what is wrong with an unhashable ``root``)."""
        if type(root) is not int and not isinstance(root, np.integer):
            return None  # 0.0 would find root 0's template: the general path rejects it
        if self._generation != _cfg.generation:
            self._new_generation()
        try:
            template = self._cache.get(("envelope", collective, root, algorithm))
        except TypeError:
            return None
        if template is None or template.runner is None:
            template = self._envelope_template(collective, root, algorithm)
        return template

    def _envelope_call(self, collective: str, template: Any, send: np.ndarray | None,
                       recv: np.ndarray, mine: np.ndarray | None, shape: tuple[int, ...],
                       out: Any, root: int, algorithm: str | None,
                       timeout: float | None) -> Any:
        """Run a fast bcast's or scatter's envelope call; the root's result is ``mine``."""
        seq, timeout = self._next_call(timeout, collective)
        self.last_algorithm = template.alg_name
        template.runner(send, recv, seq, timeout)
        if mine is None:
            return self._received(collective, template, out, root, seq, algorithm, timeout)
        # the root's result comes from its envelope, which ``out`` cannot overlap
        if out is None:
            return mine.copy()
        if out.shape == shape:
            out[...] = mine
            return out
        result = out.reshape(shape)
        result[...] = mine
        return result

    def _scatter_entry(self, template: _Template, x: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, tuple[int, ...], np.ndarray] | None:
        """``(header, blocks, shape, own)`` of a root's scatter of ``x`` through ``template``'s
        envelope — ``blocks``: the data of every block as one ``(size, *shape)`` view, ``own``:
        the root's — or None when the rows do not travel inline (or anything is unusual)."""
        p = self.size
        dt = x.dtype
        if x.ndim == 0 or x.ndim > 8 or dt.kind not in _FAST_KINDS or x.shape[0] % p:
            return None
        shape = (x.shape[0] // p, *x.shape[1:])
        block = template.shape[0]
        if math.prod(shape) * dt.itemsize > block - _DATA_AT:  # the rows follow in phase 1
            head = _bcast_head(dt, shape, False)
            return None if head is None else (head, None, shape, None)  # type: ignore[return-value]
        head = _bcast_head(dt, shape, True)
        if head is None:
            return None
        assert template.scratch is not None
        blocks = _blocks_view(template.scratch, p, block, dt, shape)
        return head, blocks, shape, blocks[self.rank]

    def _template(self, collective: str, x: np.ndarray, op: Any, root: int) -> _Template | None:
        """The template of a call, or None when the call does not fit the fast path."""
        try:
            if collective == "barrier":
                return _Template(make_spec("barrier", self.size, np.uint8), None, (), False)
            check_dtype(x.dtype, collective, "x", self.rank)  # what the general path checks
            p, dt = self.size, x.dtype
            if collective in ("allreduce", "reduce", "scan", "exscan"):
                resolved = self._op(collective, op, dt)
                root = self._check_root(collective, root) if collective == "reduce" else 0
                spec = make_spec(collective, p, dt, count=x.size, root=root, op=resolved)
                receives = collective != "reduce" or self.rank == root
                return _Template(spec, (spec.count, spec.counts, resolved.name), x.shape,
                                 receives, collective == "exscan" and self.rank == 0)
            if collective in ("allgather", "gather"):
                root = self._check_root(collective, root) if collective == "gather" else 0
                spec = make_spec(collective, p, dt, count=x.size, root=root)
                shape = (p,) if x.ndim == 0 else (p * x.shape[0], *x.shape[1:])
                return _Template(spec, None, shape, collective == "allgather" or
                                 self.rank == root)
            if collective == "reduce_scatter_block":
                if x.ndim == 0 or x.shape[0] % p:
                    return None
                resolved = self._op(collective, op, dt)
                rows = x.shape[0] // p
                elem = rows * _row_size(x)
                spec = make_spec(collective, p, dt, count=elem, counts=[elem] * p, op=resolved)
                return _Template(spec, (spec.count, spec.counts, resolved.name),
                                 (rows, *x.shape[1:]), True)
            if collective == "alltoall":
                if x.ndim == 0 or x.shape[0] % p:
                    return None
                spec = make_spec("alltoall", p, dt, count=x.size // p)
                return _Template(spec, (spec.count,), x.shape, True)
        except CollopsError:
            return None
        return None
