"""Blocking bcast and scatter through their prepared envelope call: the root packs dtype,
shape and (when they fit) the data into the envelope, a reader reads it; data too large for
the envelope follows in a phase of its own — or, where every rank knows the data and the
envelope's runner can tell (`run_known`: ``mpi_native`` on a node's board), goes alone in one.
The route `FastPaths` takes for them (`_through_envelope`)."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from .. import config as _cfg
from .commbase import _SLOW, _same_bytes
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
from .overlap import may_overlap
from .phases import PhaseGenerators
from .prepared import PreparedCall


class EnvelopedCalls(PhaseGenerators):
    """The fast route of blocking bcast and scatter (`FastPaths._fast`'s ``_ENVELOPED``)."""

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

    def _root_data(self, call: str, envelope: PreparedCall, x: np.ndarray, out: Any,
                   entry: tuple[Any, ...], root: int, algorithm: str | None,
                   timeout: float | None, signature: int | None = None) -> Any:
        """The root of a bcast or scatter whose data does not fit the envelope (its view
        ``entry``, `_root_entry`): the envelope (headers only), then the data phase from its
        prepared runner, as the general path runs them; `_SLOW` until a general call has
        prepared that phase, or for an ``out`` that is wrong or overlaps ``x`` (the general
        path copies or raises). ``signature``: the data's (`_known_signature`) when the call
        comes bound by `_bind_known`, which then needs no binding again."""
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
                out is own or _same_bytes(out, own) or not may_overlap(out, x)):
            result = out
        else:
            return _SLOW
        if envelope.head is not head:
            self._write_head(envelope, head)
        seq, timeout = self._next_call(timeout, call)
        one, bound = None, signature is not None
        if signature is None and call == "bcast" and _knows_signatures(envelope):
            signature = _known_signature(x.dtype, shape, envelope.shape[0])
        if signature:  # one phase when every rank knows the data's signature (`run_known`)
            one = envelope.compiled.run_known(signature, envelope.send, envelope.recv, x, seq,
                                              timeout)
        if one is None:
            envelope.run_blocking(self, envelope.send, envelope.recv, seq, timeout,
                                  confirm=confirm)
        self._root_result(data, x, result, bool(one), seq, timeout)
        if one and not bound:
            self._bind_known(envelope, root, x.dtype, shape, algorithm, (head, None, shape, known))
        return result if result.shape == shape else result.reshape(shape)

    def _root_result(self, data: PreparedCall, x: np.ndarray, result: np.ndarray, one: bool,
                     seq: int, timeout: float | None) -> None:
        """The root's ``result`` of a bcast or scatter call ``seq`` past the envelope: its own
        data when the call went in one phase (``one``: MPI broadcast ``x`` itself), else the
        data phase's (`_root_data` and a compiled known bcast's rest, `_bind_known`)."""
        if not one:
            data.run_blocking(self, x.reshape(-1), result.reshape(-1), seq, timeout, 1)
        elif result is not x and not _same_bytes(result, x):
            result.reshape(-1)[...] = x.reshape(-1)

    def _known_reader(self, envelope: PreparedCall, signature: int, out: np.ndarray,
                      root: int, algorithm: str | None, timeout: float | None,
                      bound: bool = False) -> Any:
        """A bcast's non-root that passed ``out``, whose data cannot go in the envelope: in one
        phase when every rank knows the data's ``signature`` (`run_known`), else the envelope
        and the data phase as `_received` runs them. ``bound``: the call came bound by
        `_bind_known`, which then needs no binding again."""
        seq, timeout = self._next_call(timeout, "bcast")
        one = envelope.compiled.run_known(signature, None, envelope.recv, out, seq, timeout)
        if one:
            if not bound:
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
            compiled = envelope.compiled
            if root == self.rank:
                signature = _known_signature(dtype, shape, envelope.shape[0])
                head, _, _, (data, _, _) = known

                def run(x: Any, out: Any, timeout: float | None) -> Any:
                    if not _takes_as_is(out, x) or x.shape != shape or x.dtype != dtype:
                        return _SLOW
                    return self._root_data("bcast", envelope, x, out, known, root,
                                           algorithm, timeout, signature)

                def rest(seq: int, ended: int, x: Any, out: Any,
                         timeout: float | None) -> Any:
                    """The compiled call's rest (`known_call`) where not every rank
                    posted the signature: as `_root_data` goes on."""
                    if envelope.head is not head:
                        self._write_head(envelope, head)
                    result = np.empty(shape, dtype) if out is None else out
                    self._root_result(data, x, result, compiled.after_known(
                        signature, envelope.send, envelope.recv, x, seq, ended == 0), seq,
                        timeout)
                    return result
            else:
                signature = known

                def run(x: Any, out: Any, timeout: float | None) -> Any:
                    if out is None or not _takes_as_is(out) or out.shape != shape \
                            or out.dtype != dtype:
                        return _SLOW
                    return self._known_reader(envelope, known, out, root, algorithm, timeout,
                                              True)

                def rest(seq: int, ended: int, x: Any, out: Any,
                         timeout: float | None) -> Any:
                    """The compiled call's rest (`known_call`) where not every rank
                    posted the signature: as `_known_reader` goes on."""
                    if compiled.after_known(signature, None, envelope.recv, out, seq,
                                            ended == 0):
                        return out
                    return self._received("bcast", envelope, out, root, seq, algorithm,
                                          timeout)
            whole = compiled.bind_known(self._calls, dtype, shape, signature, _SLOW,
                                        functools.partial(np.empty, shape, dtype), rest)
            bound = envelope.views.put(key, (None, root, run if whole is None else whole,
                                             envelope.name, envelope))
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
        if not (_takes_as_is(out, x) if self.rank == root else _takes_as_is(out)):
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


def _knows_signatures(envelope: PreparedCall) -> bool:
    """Whether a bcast envelope's bound runner can run a call whose data every rank knows in
    one phase (`run_known`: ``mpi_native`` on a node's board)."""
    return bool(getattr(envelope.compiled, "knows_signatures", False))


def _takes_as_is(out: Any, *x: Any) -> bool:
    """Whether a fast bcast or scatter takes ``out`` (None: none given) and, at its root,
    ``x`` as they are: contiguous arrays, ``out`` writeable."""
    if out is not None and (type(out) is not np.ndarray
                            or not (out.flags.c_contiguous and out.flags.writeable)):
        return False
    for a in x:
        if type(a) is not np.ndarray or not a.flags.c_contiguous:
            return False
    return True
