"""The phase generators: every collective written once, as a generator of phases, each phase a
schedule run (`Execution`) on concrete buffers (see `Comm`)."""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence
from typing import Any

import numpy as np

from .. import config as _cfg
from ..algorithms.spec import CallSpec, make_spec, prefix
from ..datatypes import dtype_from_token, dtype_token
from ..errors import ArgumentError
from .abandon import abandoned_header, give_up, raise_if_abandoned_meta
from .agreement import Agreed
from .arguments import checked_displs, displaced_signature, rows_spanned
from .commbase import CommBase, _own_rows, _row_size, _rows, _same_bytes
from .engine import Execution
from .envelope import (
    _DATA_AT,
    _ENVELOPE_DTYPE,
    _NBYTES_AT,
    DIRECT_BCAST_INLINE,
    DIRECT_SCATTER_ENVELOPE,
    ENVELOPE,
    _bcast_envelope,
    _bcast_head,
    _bcast_header,
    _bcast_out,
    _bcast_spec,
    _blocks_view,
)
from .request import Phases, Request
from .vector_gatherv import by_headers, exchanged_counts, headed


def _counts_fit(block: int, p: int) -> bool:
    """Whether a scatterv envelope's ``block`` bytes hold the ``p`` ranks' counts after the
    header (the same answer on every rank: the block's size and ``p`` are agreed)."""
    return block - _DATA_AT >= 8 * p


def _counting_head(head: np.ndarray, p: int) -> np.ndarray:
    """``head`` (a header saying the data follows) saying its block holds ``p`` counts, so
    the bound runners copy them (`_NBYTES_AT`: the bytes in use after the header)."""
    counting = head.copy()
    counting[_NBYTES_AT: _NBYTES_AT + 8] = np.array([8 * p], "<u8").view(np.uint8)
    return counting


class PhaseGenerators(CommBase):
    """The general path of every collective: generators of phases."""

    def _envelope_size(self, collective: str, algorithm: str | None) -> int:
        """The envelope bytes of a ``collective`` (bcast or scatter, all blocks together) made
        with ``algorithm``: when the call may go through a direct area, up to a direct slot
        (`DIRECT_BCAST_INLINE`, `DIRECT_SCATTER_ENVELOPE`), else `ENVELOPE`. Depends only on
        what every member agrees on (the segment's layout, the communicator's resources, the
        algorithm requested, overridden or set)."""
        slot = self._direct_envelope
        if slot:
            chosen = (algorithm or self._overrides.get(collective)
                      or _cfg.settings.algorithms.get(collective))
            if chosen is None or chosen == "shm_direct":
                return max(ENVELOPE, min(slot, DIRECT_BCAST_INLINE + _DATA_AT
                                         if collective == "bcast" else DIRECT_SCATTER_ENVELOPE))
        return ENVELOPE

    def _scatter_block(self, algorithm: str | None, collective: str = "scatter") -> int:
        """The bytes of each rank's block of a scatter's (or scatterv's) envelope (header and
        inline data)."""
        size = self._envelope_size(collective, algorithm)
        if size > ENVELOPE:
            block = (size // self.size) & ~7
            if block >= _DATA_AT + 8:
                return block
        return ENVELOPE

    def _data_phase(self, call: str, dtype: np.dtype, shape: tuple[int, ...], out: Any,
                    root: int, seq: int, algorithm: str | None, params: dict,
                    timeout: float | None) -> np.ndarray:
        """Phase 1 of a bcast or scatter on a non-root whose envelope did not carry the data,
        run to completion. A wrong ``out`` is reported after taking part in the phase with a
        buffer of its own, so the root and the other ranks are not left waiting for this rank.
        """
        return Request(self, self._data_phase_gen(  # type: ignore[no-any-return]
            call, dtype, shape, out, root, seq, algorithm, params, timeout), True).wait()

    def _barrier(self, algorithm: str | None, timeout: float | None, params: dict) -> Phases:
        spec = make_spec("barrier", self.size, np.uint8)
        timeout = self._timeout(timeout, "barrier")
        yield self._execute(spec, None, None, self._reserve(), 0, algorithm, params, timeout)

    def _bcast(self, x: Any, root: int, out: Any, algorithm: str | None,
               timeout: float | None, params: dict) -> Phases:
        """Two phases: a 256-byte envelope (dtype, shape, and the data when it fits), then
        the data. The data phase starts before the envelope wherever its buffer is known then —
        on the root, and on a rank that passed a fitting ``out`` — so its messages flow while
        the envelope is read (the envelope is still checked before the call returns). Only a
        schedule may start early, once an earlier call has shown the data phase runs one: a
        native algorithm (MPI's own, shm_direct) must see the phases in order on every rank.
        """
        call = "bcast"
        root = self._check_root(call, root)
        timeout = self._timeout(timeout, call)
        size = self._envelope_size(call, algorithm)
        data: np.ndarray | None = None
        early: Execution | None = None
        early_spec: CallSpec | None = None
        result: np.ndarray | None = None
        if self.rank == root:
            try:  # a mistake only the root sees: its peers are told (`abandon`)
                data = self._array(call, x)
                env, inline = _bcast_envelope(data, self.rank, size)
                if inline:  # a wrong ``out`` raises before the data leaves in the envelope
                    result = self._out(call, out, data.shape, data.dtype)
                else:
                    result = _bcast_out(out, data.shape, data.dtype)
                    if result is None:
                        result = self._out(call, out, data.shape, data.dtype)
            except ArgumentError as exc:
                env = abandoned_header(str(exc), size)
                return (yield from give_up(exc, lambda: self._execute(
                    _bcast_spec(self.size, _ENVELOPE_DTYPE, size, root), env, env,
                    self._reserve(), 0, algorithm, params, timeout,
                    counts_signature="envelope", agree=True)))
            if not inline:
                assert result is not None
                if _same_bytes(data, result):
                    data = result  # in place, as MPI's root buffer: nothing to copy
                elif np.shares_memory(data, result):
                    data = data.copy()
                early_spec = _bcast_spec(self.size, data.dtype, data.size, root)
        else:
            env = np.empty(size, np.uint8)
            if (type(out) is np.ndarray and out.nbytes > size - _DATA_AT and out.flags.c_contiguous
                    and out.flags.writeable and out.dtype.kind in "biufcV"
                    and not out.dtype.hasobject):
                early_spec = _bcast_spec(self.size, out.dtype, out.size, root)
                result = out
        seq = self._reserve()  # after the root's checks: a call that raised took no number
        first = self._execute(_bcast_spec(self.size, _ENVELOPE_DTYPE, size, root),
                              env if self.rank == root else None, env, seq, 0, algorithm,
                              params, timeout, counts_signature="envelope", agree=True)
        # no data leaves before the members have agreed on the call (`agreement`)
        if early_spec is not None and not isinstance(first, Agreed):
            prepared = self._cache.get((early_spec, algorithm,
                                        tuple(sorted(params.items())) if params else (), None))
            if prepared is not None and prepared.algorithm.native is None:
                early = self._execute(early_spec, data, result, seq, 1, algorithm, params,
                                      timeout)
        data_algorithm = self.last_algorithm
        yield first
        inline, dtype, shape, nbytes = _bcast_header(env)
        if data is not None:
            if inline:
                assert result is not None
                result.reshape(-1)[...] = data.reshape(-1)
                return result.reshape(shape)
        elif early is not None:
            if _bcast_out(out, shape, dtype) is None:
                self._out(call, out, shape, dtype)  # raises: the guess from ``out`` was wrong
        elif not inline:  # a wrong ``out`` is reported after taking part (`_data_phase_gen`)
            return (yield from self._data_phase_gen(call, dtype, shape, out, root, seq,
                                                    algorithm, params, timeout))
        else:
            result = self._out(call, out, shape, dtype)
            result.reshape(-1).view(np.uint8)[...] = env[_DATA_AT: _DATA_AT + nbytes]
            return result.reshape(shape)
        assert result is not None
        if early is None:
            early = self._execute(_bcast_spec(self.size, dtype, result.size, root), data,
                                  result, seq, 1, algorithm, params, timeout)
        else:
            self.last_algorithm = data_algorithm  # not the envelope's, which ran after
        yield early
        return result.reshape(shape)

    def _meta_bcast(self, call: str, seq: int, phase: int, root: int, dtype: np.dtype | None,
                    trailing: tuple[int, ...], extra: Sequence[int], algorithm: str | None,
                    timeout: float | None, params: dict) -> Generator[Execution, None, Any]:
        """Broadcast dtype, trailing shape and a few integers from the root (one phase)."""
        words = 11 + len(extra)  # token[2], ndim, trailing[8], extra…
        meta = np.zeros(words, np.int64)
        n_extra = len(extra)
        if self.rank == root:
            assert dtype is not None
            token = dtype_token(dtype).encode()
            raw = np.zeros(16, np.uint8)
            raw[: len(token)] = np.frombuffer(token, np.uint8)
            meta[:2] = raw.view(np.int64)
            meta[2] = len(trailing)
            meta[3: 3 + len(trailing)] = trailing
            meta[11:] = list(extra)
        spec = make_spec("bcast", self.size, np.int64, count=words, root=root)
        yield self._execute(spec, meta if self.rank == root else None, meta, seq, phase,
                            None, {}, timeout, counts_signature=(call, "meta", n_extra),
                            agree=True)
        raise_if_abandoned_meta(meta)
        token_bytes = meta[:2].view(np.uint8).tobytes().rstrip(b"\0")
        got_dtype = dtype_from_token(token_bytes.decode())
        got_trailing = tuple(int(v) for v in meta[3: 3 + int(meta[2])])
        return got_dtype, got_trailing, [int(v) for v in meta[11:]]

    def _scatterv(self, call: str, x: Any, counts: Any, root: int, out: Any,
                  algorithm: str | None, timeout: float | None, params: dict,
                  displs: Any = None) -> Phases:
        """Like `_scatter`: an envelope scattered from the root, one block of bytes per rank
        holding that rank's header (dtype, its shape) and, when every rank's rows fit, the
        rows — one phase. When they do not fit, each block holds the counts instead (when
        they fit it; else they follow, a broadcast in phase 1), and the data follows.
        ``displs`` (rows of the root's ``x``; significant at the root only, as in MPI) reach
        only the root's schedule: the other ranks' parts depend on the counts alone."""
        root = self._check_root(call, root)
        timeout = self._timeout(timeout, call)
        p, me = self.size, self.rank
        block = self._scatter_block(algorithm, call)
        spec0 = _bcast_spec(p, _ENVELOPE_DTYPE, block, root, "scatter")
        signature = (call, "envelope")
        if me != root:
            seq = self._reserve()
            env = np.empty(block, np.uint8)
            yield self._execute(spec0, None, env, seq, 0, algorithm, params, timeout,
                                counts_signature=signature, agree=True)
            inline, dtype, shape, nbytes = _bcast_header(env)
            if inline:
                result = self._out(call, out, shape, dtype)
                result.reshape(-1).view(np.uint8)[...] = env[_DATA_AT: _DATA_AT + nbytes]
                return result.reshape(shape)
            return (yield from self._scatterv_received(call, env, dtype, shape, out, root, seq,
                                                       algorithm, params, timeout))
        try:  # a mistake only the root sees: its peers are told (`abandon`)
            data = self._array(call, x)
            if displs is None:
                rows = self._split_rows(call, data, counts)
                row_displs = list(prefix(tuple(rows)))
            else:
                rows, row_displs = self._send_blocks(call, data, counts, displs)
            trailing, dtype = data.shape[1:], data.dtype
            sizes = [r * _row_size(data) * dtype.itemsize for r in rows]
            inline = max(sizes) <= block - _DATA_AT
            heads = [_bcast_head(dtype, (r, *trailing), inline) for r in rows]
            if not inline and _counts_fit(block, p):  # a block holds the counts instead
                heads = [None if h is None else _counting_head(h, p) for h in heads]
            if any(head is None for head in heads):
                raise ArgumentError(call, "x", data.shape, "at most 8 dimensions", me)
            result = self._out(call, out, (rows[me], *trailing), dtype)
        except ArgumentError as exc:
            env = np.tile(abandoned_header(str(exc), block), p + 1)  # every rank's block
            return (yield from give_up(exc, lambda: self._execute(
                spec0, env[: p * block], env[p * block:], self._reserve(), 0, algorithm, params,
                timeout, counts_signature=signature, agree=True)))
        seq = self._reserve()
        env = np.empty((p + 1) * block, np.uint8)
        blocks = env[: p * block].reshape(p, block)
        for j, (head, d, r) in enumerate(zip(heads, row_displs, rows, strict=True)):
            assert head is not None  # checked above
            blocks[j, :_DATA_AT] = head
            if inline:
                rows_j = np.ascontiguousarray(data[d: d + r]).reshape(-1)
                blocks[j, _DATA_AT: _DATA_AT + sizes[j]] = rows_j.view(np.uint8)
            elif _counts_fit(block, p):
                blocks[j, _DATA_AT: _DATA_AT + 8 * p] = np.asarray(rows, "<i8").view(np.uint8)
        yield self._execute(spec0, env[: p * block], env[p * block:], seq, 0, algorithm, params,
                            timeout, counts_signature=signature, agree=True)
        if inline:
            result.reshape((rows[me], *trailing))[...] = data[row_displs[me]:
                                                                row_displs[me] + rows[me]]
            return result.reshape((rows[me], *trailing))
        phase = 1
        if not _counts_fit(block, p):
            yield from self._meta_bcast(call, seq, 1, root, dtype, trailing, rows, None,
                                        timeout, {})
            phase = 2
        if np.may_share_memory(result, data):
            data = data.copy()
        return (yield from self._scatterv_data(call, data, rows, row_displs, dtype, trailing,
                                               result, root, seq, phase, algorithm, params,
                                               timeout))

    def _scatterv_received(self, call: str, env: np.ndarray, dtype: np.dtype,
                           shape: tuple[int, ...], out: Any, root: int, seq: int,
                           algorithm: str | None, params: dict, timeout: float | None
                           ) -> Phases:
        """The rest of a non-root's scatterv whose rows did not fit its envelope block
        ``env``: the counts from the block (or from a broadcast of them), then the data."""
        p = self.size
        if _counts_fit(len(env), p):
            rows = env[_DATA_AT: _DATA_AT + 8 * p].view("<i8").tolist()
            trailing, phase = shape[1:], 1
        else:
            _, trailing, rows = yield from self._meta_bcast(
                call, seq, 1, root, None, (), [0] * p, None, timeout, {})
            phase = 2
        return (yield from self._scatterv_data(call, None, rows, None, dtype, trailing, out,
                                               root, seq, phase, algorithm, params, timeout))

    def _scatterv_data(self, call: str, data: np.ndarray | None, rows: list[int],
                       row_displs: list[int] | None, dtype: np.dtype, trailing: tuple[int, ...],
                       out: Any, root: int, seq: int, phase: int, algorithm: str | None,
                       params: dict, timeout: float | None) -> Phases:
        """The data phase of a scatterv whose rows did not fit its envelope. A non-root's
        wrong ``out`` is reported after taking part, so the others are not left waiting."""
        per_row = math.prod(trailing)
        shape = (rows[self.rank], *trailing)
        error: ArgumentError | None = None
        try:
            result = self._out(call, out, shape, dtype)
        except ArgumentError as exc:
            error, result = exc, np.empty(shape, dtype)
        spec = make_spec("scatterv", self.size, dtype, counts=[r * per_row for r in rows],
                         root=root, displs=None if row_displs is None
                         else [d * per_row for d in row_displs])
        yield self._execute(spec, data, result, seq, phase, algorithm, params, timeout)
        if error is not None:
            raise error
        return result.reshape(shape)

    def _scatter(self, x: Any, root: int, out: Any, algorithm: str | None,
                 timeout: float | None, params: dict) -> Phases:
        """Two phases, like `_bcast`: an envelope scattered from the root — one block of bytes
        per rank, each a header (dtype, this rank's shape) and, when they fit, the rank's rows
        — then, when they did not fit, the data. The root's arguments, ``out`` included, are
        checked before the call takes its sequence number; a non-root learns dtype and shape
        from its block (and checks ``out`` then)."""
        call = "scatter"
        root = self._check_root(call, root)
        timeout = self._timeout(timeout, call)
        p, me = self.size, self.rank
        block = self._scatter_block(algorithm)
        spec0 = _bcast_spec(p, _ENVELOPE_DTYPE, block, root, call)
        if me != root:
            seq = self._reserve()
            env = np.empty(block, np.uint8)
            yield self._execute(spec0, None, env, seq, 0, algorithm, params, timeout,
                                counts_signature="envelope", agree=True)
            inline, dtype, shape, nbytes = _bcast_header(env)
            if not inline:
                return (yield from self._data_phase_gen(call, dtype, shape, out, root, seq,
                                                        algorithm, params, timeout))
            result = self._out(call, out, shape, dtype)
            result.reshape(-1).view(np.uint8)[...] = env[_DATA_AT: _DATA_AT + nbytes]
            return result.reshape(shape)
        try:  # a mistake only the root sees: its peers are told (`abandon`)
            data = self._array(call, x)
            if data.ndim == 0:
                raise ArgumentError(call, "x", data.shape, "needs at least one dimension", me)
            if data.shape[0] % p:
                raise ArgumentError(call, "x", data.shape, f"axis 0 ({data.shape[0]}) is not "
                                    f"divisible by the {p} ranks", me)
            shape = (data.shape[0] // p, *data.shape[1:])
            inline = data.nbytes // p <= block - _DATA_AT
            head = _bcast_head(data.dtype, shape, inline)
            if head is None:
                raise ArgumentError(call, "x", data.shape, "at most 8 dimensions", me)
            result = self._out(call, out, shape, data.dtype)
        except ArgumentError as exc:
            env = np.tile(abandoned_header(str(exc), block), p + 1)  # every rank's block
            return (yield from give_up(exc, lambda: self._execute(
                spec0, env[: p * block], env[p * block:], self._reserve(), 0, algorithm, params,
                timeout, counts_signature="envelope", agree=True)))
        seq = self._reserve()
        env = np.empty((p + 1) * block, np.uint8)
        env[: p * block].reshape(p, block)[:, :_DATA_AT] = head
        if inline:
            _blocks_view(env, p, block, data.dtype, shape)[...] = data.reshape((p, *shape))
        yield self._execute(spec0, env[: p * block], env[p * block:], seq, 0, algorithm, params,
                            timeout, counts_signature="envelope", agree=True)
        if inline:
            result.reshape(shape)[...] = data[me * shape[0]: (me + 1) * shape[0]]
            return result.reshape(shape)
        if np.may_share_memory(result, data):
            data = data.copy()
        spec = _bcast_spec(p, data.dtype, result.size, root, call)
        yield self._execute(spec, data, result, seq, 1, algorithm, params, timeout)
        return result.reshape(shape)

    def _data_phase_gen(self, call: str, dtype: np.dtype, shape: tuple[int, ...], out: Any,
                        root: int, seq: int, algorithm: str | None, params: dict,
                        timeout: float | None) -> Phases:
        """`_data_phase` as a phase of a general (generator) call."""
        error: ArgumentError | None = None
        try:
            result = self._out(call, out, shape, dtype)
        except ArgumentError as exc:  # reported once this rank has taken part
            error, result = exc, np.empty(shape, dtype)
        spec = _bcast_spec(self.size, dtype, result.size, root, call)
        yield self._execute(spec, None, result, seq, 1, algorithm, params, timeout)
        if error is not None:
            raise error
        return result.reshape(shape)

    def _allgather_ints(self, call: str, values: Sequence[int], seq: int, phase: int,
                        timeout: float | None, algorithm: str | None = None
                        ) -> Generator[Execution, None, np.ndarray]:
        mine = np.asarray(values, np.int64)
        result = np.empty(self.size * len(mine), np.int64)
        spec = make_spec("allgather", self.size, np.int64, count=len(mine))
        yield self._execute(spec, mine, result, seq, phase, algorithm, {}, timeout,
                            counts_signature=(call, "counts"))
        return result.reshape(self.size, len(mine))

    def _gatherv(self, call: str, x: Any, root: int | None, counts: Any, vector: bool,
                 out: Any, algorithm: str | None, timeout: float | None, params: dict,
                 displs: Any = None) -> Phases:
        """One phase, after one that exchanges the counts where they were not given;
        ``displs`` (rows of the result; significant where a rank receives) place the blocks,
        which must not overlap, and a new result holds zeros between them."""
        collective = ("all" if root is None else "") + ("gatherv" if vector else "gather")
        if root is not None:
            root = self._check_root(call, root)
        timeout = self._timeout(timeout, call)
        data = self._array(call, x)
        seq = -1  # taken before the first message, after every check made before it
        rows = _rows(data)
        per_row = _row_size(data)
        trailing = data.shape[1:] if data.ndim else ()
        phase = 0
        if root is not None and vector and headed(self, root, data.dtype, algorithm):
            return (yield from by_headers(self, call, data, root, counts, displs, out,
                                          algorithm, params, timeout))
        if displs is not None and (root is None or self.rank == root):  # before any message
            checked_displs(call, "displs", displs, [0] * self.size, self.rank, False)
        mismatched = None
        if vector and root is not None:  # no rank can tell whether the others have counts
            seq = self._reserve()
            row_counts, mismatched = yield from exchanged_counts(self, call, data, counts, seq,
                                                                 timeout)
            phase = 1
        elif vector and counts is None:
            seq = self._reserve()
            got = yield from self._allgather_ints(call, [rows, per_row], seq, 0, timeout)
            row_counts = got[:, 0].tolist()
            if any(int(v) != per_row for v in got[:, 1]) and any(got[:, 0]):
                bad = [r for r in range(self.size) if got[r, 1] != per_row and got[r, 0]]
                raise ArgumentError(call, "x", data.shape, f"trailing shape differs from rank "
                                    f"{bad[0]}'s", self.rank)
            phase = 1
        elif vector:
            row_counts = self._counts(call, "counts", counts)
            if row_counts[self.rank] != rows:
                raise ArgumentError(call, "counts", counts, f"entry {self.rank} is "
                                    f"{row_counts[self.rank]} but x has {rows} rows", self.rank)
        else:
            row_counts = [rows] * self.size
        elem_counts = [r * per_row for r in row_counts]
        if vector:
            spec = make_spec(collective, self.size, data.dtype, counts=elem_counts,
                             root=root or 0)
        else:
            spec = make_spec(collective, self.size, data.dtype, count=elem_counts[0],
                             root=root or 0)
        total_rows = sum(row_counts)
        receives = root is None or self.rank == root
        row_displs = None
        if displs is not None and receives:
            row_displs = checked_displs(call, "displs", displs, row_counts, self.rank, True)
            total_rows = rows_spanned(row_displs, row_counts)
            spec = spec.with_(displs=tuple(d * per_row for d in row_displs))
        if data.ndim == 0:
            shape: tuple[int, ...] = (total_rows,)
        else:
            shape = (total_rows, *trailing)
        result = self._out(call, out, shape, data.dtype,
                           zeros=row_displs is not None) if receives else None
        if result is not None and np.shares_memory(result, data) and not _same_bytes(
                data, _own_rows(result, total_rows, row_counts, self.rank, row_displs)):
            data = data.copy()  # only x exactly its own block of out is in place (MPI_IN_PLACE)
        if seq < 0:
            seq = self._reserve()
        yield self._execute(spec, data, result, seq, phase, algorithm, params, timeout,
                            counts_signature=displaced_signature(spec), agree=root is not None)
        if mismatched is not None:
            raise mismatched
        return None if result is None else result.reshape(shape)

    def _alltoallv(self, call: str, x: Any, sendcounts: Any, sdispls: Any, recvcounts: Any,
                   vector: bool, out: Any, algorithm: str | None, timeout: float | None,
                   params: dict, rdispls: Any = None) -> Phases:
        """One phase, after one that exchanges the counts when ``recvcounts`` is None; send
        blocks at ``sdispls`` (rows of ``x``) may overlap, received ones at ``rdispls`` (rows
        of the result; a new result holds zeros between them) may not."""
        timeout = self._timeout(timeout, call)
        data = self._array(call, x)
        if data.ndim == 0:
            raise ArgumentError(call, "x", data.shape, "needs at least one dimension", self.rank)
        seq = -1  # taken before the first message, after every check made before it
        per_row = _row_size(data)
        trailing = data.shape[1:]
        phase = 0
        if not vector:
            if data.shape[0] % self.size:
                raise ArgumentError(call, "x", data.shape, f"axis 0 ({data.shape[0]}) is not "
                                    f"divisible by the {self.size} ranks", self.rank)
            block = data.shape[0] // self.size
            scounts = [block] * self.size
            rcounts = list(scounts)
            sdis = prefix(tuple(scounts))
        else:
            if sdispls is None:
                scounts = self._counts(call, "sendcounts", sendcounts)
                sdis = prefix(tuple(scounts))
                if sum(scounts) > data.shape[0]:
                    raise ArgumentError(call, "sendcounts", sendcounts, f"sum {sum(scounts)} "
                                        f"is more than the {data.shape[0]} rows of x", self.rank)
            else:
                scounts, sent_from = self._send_blocks(call, data, sendcounts, sdispls,
                                                       ("sendcounts", "sdispls"))
                sdis = tuple(sent_from)
            if rdispls is not None:  # checked before any message; overlaps once counts known
                checked_displs(call, "rdispls", rdispls, [0] * self.size, self.rank, False)
            if recvcounts is None:
                mine = np.asarray(scounts, np.int64)
                got = np.empty(self.size, np.int64)
                spec0 = make_spec("alltoall", self.size, np.int64, count=1)
                seq = self._reserve()
                yield self._execute(spec0, mine, got, seq, 0, None, {}, timeout,
                                    counts_signature=(call, "counts"))
                rcounts = got.tolist()
                phase = 1
            else:
                rcounts = self._counts(call, "recvcounts", recvcounts)
                me = self.rank  # what a rank sends itself is what it receives from itself
                if rcounts[me] != scounts[me]:
                    raise ArgumentError(call, "recvcounts", recvcounts, f"recvcounts[{me}]="
                                        f"{rcounts[me]} differs from sendcounts[{me}]="
                                        f"{scounts[me]} (this rank's block to itself)", me)
        rdis = None if not vector or rdispls is None else checked_displs(
            call, "rdispls", rdispls, rcounts, self.rank, True)
        spec = make_spec(
            "alltoallv" if vector else "alltoall", self.size, data.dtype,
            count=scounts[0] * per_row if not vector else 0,
            sendcounts=[c * per_row for c in scounts], sdispls=[d * per_row for d in sdis],
            recvcounts=[c * per_row for c in rcounts],
            rdispls=None if rdis is None else [d * per_row for d in rdis])
        shape = (sum(rcounts) if rdis is None else rows_spanned(rdis, rcounts), *trailing)
        result = self._out(call, out, shape, data.dtype, zeros=rdis is not None)
        if np.shares_memory(result, data):
            data = data.copy()
        signature = ("v", per_row) if vector else (scounts[0] * per_row,)
        if seq < 0:
            seq = self._reserve()
        yield self._execute(spec, data, result, seq, phase, algorithm, params, timeout,
                            counts_signature=signature)
        return result.reshape(shape)

    def _reduction(self, collective: str, x: Any, op: Any, root: int | None, counts: Any,
                   out: Any, algorithm: str | None, timeout: float | None,
                   params: dict) -> Phases:
        call = collective
        timeout = self._timeout(timeout, call)
        data = self._array(call, x)
        resolved = self._op(call, op, data.dtype)
        if root is not None:
            root = self._check_root(call, root)
        shape: tuple[int, ...] = data.shape
        if collective in ("reduce_scatter", "reduce_scatter_block"):
            rows = self._split_rows(call, data, counts)
            per_row = _row_size(data)
            elem = [r * per_row for r in rows]
            if collective == "reduce_scatter_block" or counts is None:
                spec = make_spec("reduce_scatter_block" if collective.endswith("block")
                                 else "reduce_scatter", self.size, data.dtype,
                                 count=elem[0], counts=elem, op=resolved)
            else:
                spec = make_spec("reduce_scatter", self.size, data.dtype, counts=elem,
                                 op=resolved)
            shape = (rows[self.rank], *data.shape[1:])
        else:
            spec = make_spec(collective, self.size, data.dtype, count=data.size,
                             root=root or 0, op=resolved)
        receives = collective != "reduce" or self.rank == root
        result = self._out(call, out, shape, data.dtype) if receives else None
        in_place = collective in ("allreduce", "reduce") and result is not None and _same_bytes(
            result, data)  # x is out (MPI_IN_PLACE): copied only for the algorithms that need it
        if result is not None and not in_place and np.shares_memory(result, data):
            data = data.copy()
        signature = (spec.count, spec.counts, resolved.name)
        seq = self._reserve()  # after the local checks: a call that raised took no number
        yield self._execute(spec, data, result, seq, 0, algorithm, params, timeout,
                            counts_signature=signature, in_place=in_place,
                            agree=collective == "reduce")
        if collective == "exscan" and self.rank == 0:
            return None
        return None if result is None else result.reshape(shape)
