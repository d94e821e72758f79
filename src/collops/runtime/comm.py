"""Communicators: the objects users hold, and the Pythonic collective API.

Every collective is written once, as a generator of *phases*: each phase is a schedule run
(`Execution`) on concrete buffers; between phases the generator may read what arrived (shape
and dtype of a broadcast, counts of a v-collective). The blocking call drives the generator
to the end; the ``i``-prefixed call returns a `Request` that drives it on `test`/`wait`, and
the ``_init`` call a `PersistentRequest` that runs it again at each `start` (both forms are
generated from the blocking methods, see `variants`).

A call reserves its sequence number when it is made, so the tags of all its phases are fixed
then, and concurrent non-blocking collectives on one communicator match correctly whatever
order they complete in. Arguments are checked locally before any message is sent; errors
derive from `CollopsError` and name the call, the argument and the rank.
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Callable, Generator, Sequence
from typing import Any

import numpy as np

from .. import config as _cfg
from ..algorithms import fingerprint as fp
from ..algorithms import selection
from ..algorithms.native import Bind, NativeCall
from ..algorithms.registry import Algorithm, get_algorithm
from ..algorithms.spec import CallSpec, make_spec, prefix
from ..datatypes import address_of, as_array, check_dtype, dtype_from_token, dtype_token
from ..errors import ArgumentError, CollopsError
from ..ops import Op, as_op
from ..transport.base import Transport
from ..transport.tags import make_tag_base
from .agreement import Agreed
from .agreement import agree as agree_first
from .engine import CallInfo, Execution, Plan, Progress
from .request import Phases, Request, wait_all
from .variants import nonblocking, persistent

# -- envelopes: dtype, shape and (when they fit) the data, for calls whose non-roots do not
# know them (bcast, scatter). An envelope (a scatter's: each rank's block of it) starts with a
# `_DATA_AT`-byte header — inline flag, ndim, token length, nbytes, shape[8], the dtype token —
# followed by the data when it fits.
#: bytes of an envelope sent by messages (a scatter's: of each rank's block)
ENVELOPE = 256
#: on a communicator with direct areas (within a direct slot): the data a broadcast's envelope
#: carries (every non-root copies the whole envelope, so it stays small) and the bytes of all
#: blocks of a scatter's envelope together (each non-root copies its own block only)
DIRECT_BCAST_INLINE = 1024
DIRECT_SCATTER_ENVELOPE = 4096
_HEADER = struct.Struct("<B B H Q 8q")  # inline flag, ndim, token length, nbytes, shape[8]
#: where the data starts (8-byte aligned, so typed views of it are aligned too)
_DATA_AT = 128
#: byte offset in `_HEADER` of ``nbytes`` (the data bytes that follow the header)
_NBYTES_AT = struct.calcsize("<B B H")
_TOKEN_MAX = _DATA_AT - _HEADER.size
#: what the fast paths of bcast and scatter move (anything else goes the general way)
_FAST_KINDS = frozenset("biufc")

_ZEROS = (0,) * 8
_NO_HEAD = np.zeros(0, np.uint8)
_PLAN_CACHE: dict[tuple[Any, ...], Plan] = {}
_TOKENS: dict[np.dtype, bytes] = {}
_DTYPES: dict[bytes, np.dtype] = {}

#: (dtype, shape, inline) -> the envelope header of such an array (None: the header cannot
#: describe it)
_BCAST_HEADS: dict[tuple[np.dtype, tuple[int, ...], bool], np.ndarray | None] = {}


def _envelope_view(env: np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """The inline data of ``env`` (an envelope or one block of one) as ``dtype`` and ``shape``."""
    n = math.prod(shape) * dtype.itemsize
    return env[_DATA_AT: _DATA_AT + n].view(dtype).reshape(shape)


def _blocks_view(env: np.ndarray, p: int, block: int, dtype: np.dtype,
                 shape: tuple[int, ...]) -> np.ndarray:
    """The inline data of the ``p`` blocks of ``block`` bytes of a scatter envelope ``env``, as
    one array of ``dtype`` and shape ``(p, *shape)`` (a view: block j's data is ``[j]``)."""
    strides = [dtype.itemsize] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return np.ndarray((p, *shape), dtype, env, _DATA_AT, (block, *strides))


def _token_bytes(dtype: np.dtype) -> bytes:
    """``dtype_token(dtype)`` encoded, cached."""
    token = _TOKENS.get(dtype)
    if token is None:
        token = _TOKENS[dtype] = dtype_token(dtype).encode()
    return token


def _dtype_of(token: bytes) -> np.dtype:
    """The dtype an envelope's token names, cached."""
    dtype = _DTYPES.get(token)
    if dtype is None:
        dtype = _DTYPES[token] = dtype_from_token(token.decode())
    return dtype


# -- broadcast envelopes and specs, cached by call signature (see `Comm._bcast`) --------------
_ENVELOPE_DTYPE = np.dtype(np.uint8)
_BCAST_CACHE_LIMIT = 256
#: (dtype, shape, envelope bytes) -> the root's envelope of a broadcast too large to travel
#: inline
_BCAST_ENVELOPES: dict[tuple[np.dtype, tuple[int, ...], int], np.ndarray] = {}
#: envelope header bytes -> (inline, dtype, shape, nbytes)
_BCAST_HEADERS: dict[bytes, tuple[bool, np.dtype, tuple[int, ...], int]] = {}
_BCAST_SPECS: dict[tuple[str, int, np.dtype, int, int], CallSpec] = {}


def _bcast_spec(size: int, dtype: np.dtype, count: int, root: int,
                collective: str = "bcast") -> CallSpec:
    """``make_spec(collective, ...)`` of a rooted call with one count (bcast, scatter), cached."""
    key = (collective, size, dtype, count, root)
    spec = _BCAST_SPECS.get(key)
    if spec is None:
        if len(_BCAST_SPECS) >= _BCAST_CACHE_LIMIT:
            _BCAST_SPECS.clear()
        spec = _BCAST_SPECS[key] = make_spec(collective, size, dtype, count=count, root=root)
    return spec


def _bcast_head(dtype: np.dtype, shape: tuple[int, ...], inline: bool) -> np.ndarray | None:
    """The first `_DATA_AT` bytes of an envelope (or of each block of a scatter's) of an array
    of ``shape`` and ``dtype`` (cached); None when the header cannot hold them (a long dtype
    token, > 8 dimensions)."""
    key = (dtype, shape, inline)
    head = _BCAST_HEADS.get(key, _NO_HEAD)
    if head is _NO_HEAD:
        token = _token_bytes(dtype)
        head = None
        if len(token) <= _TOKEN_MAX and len(shape) <= 8:
            head = np.zeros(_DATA_AT, np.uint8)
            _HEADER.pack_into(head, 0, int(inline), len(shape),  # type: ignore[arg-type]
                              len(token), math.prod(shape) * dtype.itemsize, *shape,
                              *_ZEROS[len(shape):])
            head[_HEADER.size: _HEADER.size + len(token)] = np.frombuffer(token, np.uint8)
        if len(_BCAST_HEADS) >= _BCAST_CACHE_LIMIT:
            _BCAST_HEADS.clear()
        _BCAST_HEADS[key] = head
    return head


def _bcast_envelope(data: np.ndarray, rank: int, size: int) -> tuple[np.ndarray, bool]:
    """The root's envelope of ``size`` bytes for ``data`` and whether the data travels in it."""
    inline = data.nbytes <= size - _DATA_AT
    key = (data.dtype, data.shape, size)
    if not inline:
        env = _BCAST_ENVELOPES.get(key)
        if env is not None:
            return env, False
    head = _bcast_head(data.dtype, data.shape, inline)
    if head is None:
        raise ArgumentError("bcast", "x", data.shape, "at most 8 dimensions", rank)
    env = np.zeros(size, np.uint8)
    env[:_DATA_AT] = head
    if inline:
        env[_DATA_AT: _DATA_AT + data.nbytes] = data.reshape(-1).view(np.uint8)
    else:
        if len(_BCAST_ENVELOPES) >= _BCAST_CACHE_LIMIT:
            _BCAST_ENVELOPES.clear()
        _BCAST_ENVELOPES[key] = env  # only ever sent (and copied onto itself) from now on
    return env, inline


def _bcast_out(out: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
    """``out`` when it can take a broadcast of ``shape`` and ``dtype`` as it is, else None."""
    if (type(out) is np.ndarray and out.dtype == dtype and out.size == math.prod(shape)
            and out.flags.c_contiguous and out.flags.writeable):
        return out
    return None


def _bcast_header(env: np.ndarray) -> tuple[bool, np.dtype, tuple[int, ...], int]:
    """``(inline, dtype, shape, nbytes)`` of a received envelope or scatter block."""
    return _parse_header(env[:_DATA_AT].tobytes())


def _parse_header(key: bytes) -> tuple[bool, np.dtype, tuple[int, ...], int]:
    """``(inline, dtype, shape, nbytes)`` of the `_DATA_AT` header bytes ``key`` (cached)."""
    known = _BCAST_HEADERS.get(key)
    if known is None:
        inline, ndim, tlen, nbytes, *dims = _HEADER.unpack_from(key, 0)
        if ndim > 8 or tlen > _TOKEN_MAX:
            raise CollopsError(f"a corrupt envelope header: {key[:16]!r}")
        dtype = _dtype_of(key[_HEADER.size: _HEADER.size + tlen])
        known = (bool(inline), dtype, tuple(dims[:ndim]), nbytes)
        if len(_BCAST_HEADERS) >= _BCAST_CACHE_LIMIT:
            _BCAST_HEADERS.clear()
        _BCAST_HEADERS[key] = known
    return known


_EMPTY: dict[np.dtype, np.ndarray] = {}


def _empty(dtype: np.dtype) -> np.ndarray:
    """A shared zero-length array of ``dtype``."""
    arr = _EMPTY.get(dtype)
    if arr is None:
        arr = _EMPTY[dtype] = np.empty(0, dtype)
    return arr


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two contiguous arrays are exactly the same memory (an in-place call)."""
    return (a.nbytes == b.nbytes and a.flags.c_contiguous and b.flags.c_contiguous
            and address_of(a) == address_of(b))


def _own_rows(out: np.ndarray, row_counts: Sequence[int], rank: int) -> np.ndarray:
    """The rows of ``out`` (a gather's output, rows in rank order) that are ``rank``'s."""
    start = sum(row_counts[:rank])
    return out.reshape(sum(row_counts), -1)[start:start + row_counts[rank]]


def _settings_generation() -> int:
    return _cfg.generation
_PLAN_CACHE_LIMIT = 4096


def _bind_of(alg: Algorithm) -> Bind | None:
    """How to bind ``alg``'s blocking runner (None: a schedule, or a native without one)."""
    return None if alg.native is None else alg.native.bind


def _plan_for(alg: Algorithm, params: dict[str, Any], rank: int, spec: CallSpec) -> Plan:
    key = (alg.collective, alg.name, tuple(sorted(params.items())), rank, spec)
    plan = _PLAN_CACHE.get(key)
    if plan is None:
        if len(_PLAN_CACHE) >= _PLAN_CACHE_LIMIT:
            _PLAN_CACHE.clear()
        plan = Plan(alg.builder(rank, spec, params), spec.itemsize)
        _PLAN_CACHE[key] = plan
    return plan


class _Contexts:
    """Per-transport counter of communicator contexts (each comm has its own message space)."""

    def __init__(self) -> None:
        self.next = 1


_SLOW: Any = object()  # typed Any: it stands in for a template or a result
_BARRIER_TOKEN = np.empty(0, np.uint8)


class _Template:
    """What a blocking single-phase call needs, worked out once per call signature."""

    __slots__ = ("spec", "signature", "shape", "receives", "n_out", "none_on_this_rank",
                 "prepared", "runner", "alg_name", "scratch", "send", "recv", "header", "head",
                 "views", "compiled", "hot")

    def __init__(self, spec: CallSpec, signature: object, shape: tuple[int, ...],
                 receives: bool, none_on_this_rank: bool = False) -> None:
        self.spec = spec
        self.signature = signature
        self.shape = shape
        self.receives = receives
        self.n_out = int(np.prod(shape, dtype=np.int64)) if receives else 0
        self.none_on_this_rank = none_on_this_rank
        self.prepared: tuple[Algorithm, Plan | None, CallInfo, dict] | None = None
        #: the algorithm's blocking fast path for this signature (native algorithms with `run`)
        self.runner: Callable[..., None] | None = None
        #: the name of the prepared algorithm (for `Comm.last_algorithm`)
        self.alg_name: str | None = None
        #: an envelope the call reuses (bcast, scatter), the parts of it sent and received,
        #: the header last written into it and typed views into it
        self.scratch: np.ndarray | None = None
        self.send: np.ndarray | None = None
        self.recv: np.ndarray | None = None
        self.header: np.ndarray | None = None
        self.head: np.ndarray | None = None
        self.views: dict[Any, Any] = {}
        #: the compiled runner behind ``runner``, when it can run whole calls of this
        #: signature (`Comm._bind_call`, `Comm._bind_bcast`), and the entry of `Comm._hot`
        #: that calls it
        self.compiled: Any = None
        self.hot: tuple[Any, int, Callable[..., Any]] | None = None


def _rows(arr: np.ndarray) -> int:
    return arr.shape[0] if arr.ndim else 1


def _row_size(arr: np.ndarray) -> int:
    return math.prod(arr.shape[1:]) if arr.ndim > 1 else 1


class Comm:
    """A group of ranks with its own message space; collectives are its methods."""

    def __init__(
        self,
        transport: Transport,
        group: Sequence[int] | None = None,
        context: int = 0,
        *,
        progress: Progress | None = None,
        contexts: _Contexts | None = None,
        timeout: float | None = None,
        name: str = "world",
    ) -> None:
        self.transport = transport
        self._group = list(range(transport.size)) if group is None else list(group)
        self.size = len(self._group)
        self.rank = self._group.index(transport.rank)
        self.context = context
        self._progress = progress or Progress(transport)
        self._contexts = contexts or _Contexts()
        self._call_seq = 0
        self._overrides: dict[str, str] = {}
        self._params: dict[str, dict[str, Any]] = {}
        self.timeout = timeout
        self.name = name
        self.last_algorithm: str | None = None
        self._prepared: dict[tuple[Any, ...], tuple[Algorithm, Plan | None, CallInfo, dict]] = {}
        self._templates: dict[tuple[Any, ...], _Template | None] = {}
        #: data phases of bcast and scatter, once prepared: (runner, algorithm name)
        self._data_runners: dict[tuple[Any, ...], tuple[Callable[..., None], str]] = {}
        #: collective -> ``(op, root, run)``: the compiled whole call bound to the signature
        #: this rank last ran through `_fast`, `_fast_bcast` or `_fast_scatter` (see
        #: `_bind_call`, `_bind_bcast`; bcast and scatter have no op: None)
        self._hot: dict[str, tuple[Any, int, Callable[..., Any]]] = {}
        #: the settings generation the templates were made under (they are dropped when it
        #: changes, so it need not be part of their keys)
        self._generation = _cfg.generation
        caps = transport.capabilities()
        self._resources = transport.comm_resources(context, tuple(self._group)) | (
            {"in_network_reduction"} if caps.in_network_reduction else frozenset())
        #: the bytes of a direct slot, which bound the envelopes of calls that may go through
        #: a direct area (0: no direct area); every member has the same segment layout
        direct = int(getattr(transport, "direct_bytes", 0) or 0) & ~7
        self._direct_envelope = direct if ("shm_direct" in self._resources
                                           and direct > ENVELOPE) else 0

    def __repr__(self) -> str:
        return f"<Comm {self.name} rank {self.rank} of {self.size} over {self.transport_name}>"

    @property
    def transport_name(self) -> str:
        """Name of the transport underneath."""
        return self.transport.capabilities().name

    # -- settings -------------------------------------------------------------------------
    def set_algorithm(self, collective: str, name: str | None, **params: Any) -> None:
        """Use algorithm ``name`` for every ``collective`` on this communicator (None: auto)."""
        self._hot.clear()
        if name is None:
            self._prepared.clear()
            self._templates.clear()
            self._overrides.pop(collective, None)
            self._params.pop(collective, None)
            return
        self._prepared.clear()
        self._templates.clear()
        alg = get_algorithm(collective, name, self.rank)
        alg.resolve(params, self.rank)
        self._overrides[collective] = name
        self._params[collective] = dict(params)

    def explain(self, collective: str, x: Any = None, **kwargs: Any) -> str:
        """The selection table for a call of ``collective`` on ``x`` (see `selection.explain`);
        ``op``, ``root``, ``counts``, ``sendcounts`` and ``recvcounts`` (rows, as in the call)
        are those of the call."""
        arr = np.zeros(1) if x is None else as_array(x, collective, "x", self.rank)
        count = arr.size
        per_row = _row_size(arr) if arr.ndim else 1
        op = kwargs.pop("op", None)
        reducing = collective in ("reduce", "allreduce", "reduce_scatter",
                                  "reduce_scatter_block", "scan", "exscan")
        given = {name: [c * per_row for c in self._counts(collective, name, kwargs.pop(name))]
                 for name in ("counts", "sendcounts", "recvcounts") if kwargs.get(name) is not None}
        spec = make_spec(collective, self.size, arr.dtype, count=count,
                         counts=given.get("counts", [count] * self.size),
                         sendcounts=given.get("sendcounts", [count] * self.size),
                         recvcounts=given.get("recvcounts", given.get("sendcounts",
                                                                      [count] * self.size)),
                         root=self._check_root(collective, kwargs.pop("root", 0)),
                         op=self._op(collective, op, arr.dtype) if reducing or op is not None
                         else None)

        return selection.explain(
            spec, self._resources, protocols=self.transport.protocol_settings(),
            comm_override=self._overrides.get(collective),
            env_override=_cfg.settings.algorithms.get(collective),
            tuning_file=_cfg.settings.tuning_file)

    # -- machinery -----------------------------------------------------------------------
    def _reserve(self) -> int:
        seq = self._call_seq
        self._call_seq += 1
        return seq

    def _choose(self, spec: CallSpec, algorithm: str | None, params: dict[str, Any]) -> Any:

        coll = spec.collective
        merged = {**self._params.get(coll, {}), **params} if not algorithm else params
        choice = selection.select(
            spec, requested=algorithm, comm_override=self._overrides.get(coll),
            env_override=_cfg.settings.algorithms.get(coll),
            tuning_file=_cfg.settings.tuning_file,
            resources=self._resources, params=merged, rank=self.rank)
        return choice

    def _execute(
        self,
        spec: CallSpec,
        send: np.ndarray | None,
        recv: np.ndarray | None,
        seq: int,
        phase: int,
        algorithm: str | None,
        params: dict[str, Any],
        timeout: float | None,
        counts_signature: object = None,
        in_place: bool = False,
        agree: bool = False,
    ) -> Execution:
        """Start the chosen algorithm on ``send`` / ``recv``; ``in_place``: they are one array
        (``x`` is ``out``), copied first unless the algorithm says it needs no copy;
        ``agree``: the first rooted phase of a call, which starts once the members have
        agreed on the call (`agreement`) unless the algorithm checks that itself."""
        key = (spec, algorithm, tuple(sorted(params.items())) if params else (),
               counts_signature, _settings_generation())
        prepared = self._prepared.get(key)
        if prepared is None:
            prepared = self._prepare(spec, algorithm, params, counts_signature)
            if len(self._prepared) > _PLAN_CACHE_LIMIT:
                self._prepared.clear()
            self._prepared[key] = prepared
        alg, plan, info, resolved = prepared
        self.last_algorithm = alg.name
        timeout = self._timeout(timeout)
        if in_place and not alg.in_place and send is not None:
            send = send.copy()
        # a native algorithm starts at once: its protocol orders the calls by when they start
        if agree and not alg.agrees_on_root and alg.native is None and self.size > 1:
            return agree_first(self, info, seq, phase, timeout,  # type: ignore[return-value]
                               lambda: self._begin(prepared, spec, send, recv, seq, phase,
                                                   timeout))
        return self._begin(prepared, spec, send, recv, seq, phase, timeout)

    def _begin(self, prepared: tuple[Algorithm, Plan | None, CallInfo, dict], spec: CallSpec,
               send: np.ndarray | None, recv: np.ndarray | None, seq: int, phase: int,
               timeout: float | None) -> Execution:
        """Start the prepared algorithm of ``spec`` on ``send`` / ``recv``."""
        alg, plan, info, resolved = prepared
        if alg.native is not None:
            return alg.native.start(  # type: ignore[return-value]
                self._native_call(spec, resolved), send, recv, seq, phase, timeout)
        assert plan is not None
        sched = plan.schedule
        dt = spec.dtype
        send_area = send.reshape(-1) if send is not None else _empty(dt)
        recv_area = recv.reshape(-1) if recv is not None else _empty(dt)
        if send_area.size < sched.send_count or recv_area.size < sched.recv_count:
            raise ArgumentError(spec.collective, "buffer", (send_area.size, recv_area.size),
                                f"too small for the schedule ({sched.send_count}, "
                                f"{sched.recv_count})", self.rank)
        tmp = np.empty(sched.tmp_count, dt) if sched.tmp_count else _empty(dt)
        return Execution(plan, (send_area, recv_area, tmp), self.transport,
                         make_tag_base(self.context, seq, phase), info, spec.op, timeout,
                         self._group)

    def _native_call(self, spec: CallSpec, params: dict[str, Any]) -> NativeCall:
        """What a native algorithm may know of a call of ``spec`` on this communicator."""
        return NativeCall(spec, self.rank, tuple(self._group), self.context, self.transport,
                          params, self._progress)

    def _prepare(self, spec: CallSpec, algorithm: str | None, params: dict[str, Any],
                 counts_signature: object) -> tuple[Algorithm, Plan | None, CallInfo, dict]:
        """Choose the algorithm and compile its plan for a call signature (cached)."""
        choice = self._choose(spec, algorithm, params)
        alg = choice.algorithm
        resolved = dict(choice.params)
        plan = None if alg.native is not None else _plan_for(alg, resolved, self.rank, spec)
        signature = counts_signature if counts_signature is not None else (
            spec.count, spec.counts)
        fprint = fp.fingerprint(spec.collective, alg.name, spec.root, spec.dtype, signature)
        info = CallInfo(spec.collective, alg.name, self.rank, fprint, fp.describe)
        return alg, plan, info, resolved

    def _new_generation(self) -> None:
        """The settings changed: drop the templates made under the old ones."""
        self._templates.clear()
        self._data_runners.clear()
        self._hot.clear()
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
            got = bound(self, x, out, self._timeout(timeout))
            if got is not _SLOW:
                return got
        if type(x) is not np.ndarray:
            return _SLOW
        if self._generation != _cfg.generation:
            self._new_generation()
        dt = x.dtype
        key = (collective, dt, x.shape, op, root, algorithm)
        try:
            template = self._templates.get(key, _SLOW)
        except TypeError:  # an unhashable op or root: the general path says what is wrong
            return _SLOW
        if template is _SLOW:
            self._templates[key] = self._template(collective, x, op, root)
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
        seq, timeout = self._next_call(timeout)
        runner = template.runner
        if runner is not None:  # a native blocking fast path, prepared by an earlier call
            self.last_algorithm = template.alg_name
            runner(x, recv, seq, timeout)
            if template.compiled is not None and algorithm is None and (
                    template.hot is None or self._hot.get(collective) is not template.hot):
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
                x.dtype, x.dtype.itemsize, x.shape, template.shape if template.receives else None,
                _SLOW, functools.partial(np.empty, template.shape, x.dtype), template.alg_name)
            hot = template.hot = (op, root, template.compiled.call)
        self._hot[collective] = hot

    def _run_template(self, template: _Template, x: np.ndarray | None, result: np.ndarray | None,
                      seq: int, algorithm: str | None, timeout: float | None) -> None:
        """Run phase 0 of call ``seq`` from ``template`` to completion."""
        spec = template.spec
        prepared = template.prepared
        timeout = self._timeout(timeout)
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
            template.prepared = self._prepared.get(
                (spec, algorithm, (), template.signature, _cfg.generation))
        else:
            alg, plan, info, _ = prepared
            assert plan is not None
            self.last_algorithm = alg.name
            dt = spec.dtype
            tmp_count = plan.schedule.tmp_count
            ex = Execution(plan, (_empty(dt) if x is None else x.reshape(-1),
                                  _empty(dt) if result is None else
                                  result.reshape(-1),
                                  np.empty(tmp_count, dt) if tmp_count else _empty(dt)),
                           self.transport, make_tag_base(self.context, seq, 0), info, spec.op,
                           timeout, self._group)
        if not ex.poll():
            self._progress.wait(ex)

    def _data_phase_runner(self, spec: CallSpec, algorithm: str | None
                           ) -> Callable[..., None] | None:
        """A blocking ``fn(send, recv, seq, timeout, phase)`` for a bcast's or scatter's data
        phase of ``spec``, once a general call has prepared it (else None): the algorithm's
        own fast path where it has one, else its plan run by an `Execution`."""
        key = (spec, algorithm)
        known = self._data_runners.get(key)
        if known is not None:
            return known[0]
        prepared = self._prepared.get((spec, algorithm, (), None, _cfg.generation))
        if prepared is None:
            return None
        alg, plan, info, resolved = prepared
        bind = _bind_of(alg)
        if bind is not None:
            fn: Callable[..., None] = bind(self._native_call(spec, resolved))
        elif plan is not None:
            def fn(send: np.ndarray | None, recv: np.ndarray | None, seq: int,
                   timeout: float | None, phase: int) -> None:
                dt = spec.dtype
                tmp_count = plan.schedule.tmp_count
                ex = Execution(plan, (_empty(dt) if send is None else send.reshape(-1),
                                      _empty(dt) if recv is None else recv.reshape(-1),
                                      np.empty(tmp_count, dt) if tmp_count else _empty(dt)),
                               self.transport, make_tag_base(self.context, seq, phase), info,
                               spec.op, timeout, self._group)
                if not ex.poll():
                    self._progress.wait(ex)
        else:
            return None
        if len(self._data_runners) >= _BCAST_CACHE_LIMIT:
            self._data_runners.clear()
        self._data_runners[key] = (fn, alg.name)
        return fn

    # -- envelopes: bcast and scatter in one phase when the data fits ---------------------------
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

    def _scatter_block(self, algorithm: str | None) -> int:
        """The bytes of each rank's block of a scatter envelope (header and inline data)."""
        size = self._envelope_size("scatter", algorithm)
        if size > ENVELOPE:
            block = (size // self.size) & ~7
            if block >= _DATA_AT + 8:
                return block
        return ENVELOPE

    def _envelope_template(self, collective: str, root: Any, algorithm: str | None
                           ) -> _Template | None:
        """The template of a bcast's or a scatter's envelope phase, when it is prepared with
        a blocking fast path (only an envelope algorithm with one, ``shm_direct``, is worth
        it); else None, making the template on a first call, which goes the general way and
        so prepares the envelope's algorithm."""
        if type(root) is not int or not 0 <= root < self.size:
            return None
        key = (collective, root, algorithm)
        template = self._templates.get(key, _SLOW)
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
            self._templates[key] = t
            return None
        if template is None:
            return None
        if template.runner is None:
            prepared = template.prepared
            if prepared is None:
                prepared = template.prepared = self._prepared.get(
                    (template.spec, algorithm, (), "envelope", _cfg.generation))
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
            if len(views) >= _BCAST_CACHE_LIMIT:
                views.clear()
            got = views[raw] = (inline, dtype, shape, _envelope_view(template.recv, dtype, shape)
                                if inline else None)
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
                data(None, result.reshape(-1), seq, timeout, 1)
                self.last_algorithm = self._data_runners[(spec, algorithm)][1]
                return result
        return self._data_phase(call, dtype, shape, out, root, seq, algorithm, {}, timeout)

    def _data_phase(self, call: str, dtype: np.dtype, shape: tuple[int, ...], out: Any,
                    root: int, seq: int, algorithm: str | None, params: dict,
                    timeout: float | None) -> np.ndarray:
        """Phase 1 of a bcast or scatter on a non-root whose envelope did not carry the data,
        run to completion. A wrong ``out`` is reported after taking part in the phase with a
        buffer of its own, so the root and the other ranks are not left waiting for this rank.
        """
        return Request(self, self._data_phase_gen(  # type: ignore[no-any-return]
            call, dtype, shape, out, root, seq, algorithm, params, timeout)).wait()

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
                if len(template.views) >= _BCAST_CACHE_LIMIT:
                    template.views.clear()
                entry = template.views[(dt, shape)] = None if head is None else (
                    head, _envelope_view(env, dt, shape) if fits else None)
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
                seq, timeout = self._next_call(timeout)
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
        template.compiled.bind_bcast(template.recv, dtype, x_shape or shape, nbytes, head, _SLOW,
                                     functools.partial(np.empty, shape, dtype),
                                     template.alg_name, shape, max(blocks, 1), block, own)
        self._hot[call] = (None, root, template.compiled.bcast)

    def _envelope_fast(self, call: str, x: Any, root: Any, out: Any, algorithm: str | None,
                       timeout: float | None, params: dict) -> Any:
        """A blocking bcast or scatter by its bound compiled call, else by `_fast_bcast` or
        `_fast_scatter`; `_SLOW` when neither can take it."""
        if params:
            return _SLOW
        bound = self._bound(call, None, root, algorithm)
        if bound is not None:
            timeout = self._timeout(timeout)
            got = bound(self, x, out, timeout)
            if got is None:  # the root sent another signature: parse its envelope
                template = self._templates[(call, root, None)]
                assert template is not None
                return self._received(call, template, out, root, self._call_seq - 1, None,
                                      timeout)
            if got is not _SLOW:
                return got
        fast = self._fast_bcast if call == "bcast" else self._fast_scatter
        return fast(x, root, out, algorithm, timeout)

    def _bound(self, collective: str, op: Any, root: Any, algorithm: str | None
               ) -> Callable[..., Any] | None:
        """The compiled whole call bound to ``collective`` with ``op`` and ``root`` (None:
        nothing bound, or an algorithm asked for, or the settings changed since)."""
        hot = self._hot.get(collective)
        if (hot is not None and hot[0] is op and type(root) is int and root == hot[1]
                and algorithm is None and self._generation == _cfg.generation):
            return hot[2]
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
        seq, timeout = self._next_call(timeout)
        template.runner(template.send, template.recv, seq, timeout)
        data(x.reshape(-1), result.reshape(-1), seq, timeout, 1)
        self.last_algorithm = self._data_runners[(spec, algorithm)][1]
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
                if len(template.views) >= _BCAST_CACHE_LIMIT:
                    template.views.clear()
                entry = template.views[(dt, x.shape)] = self._scatter_entry(template, x)
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
        if self._generation != _cfg.generation:
            self._new_generation()
        try:
            template = self._templates.get((collective, root, algorithm))
        except TypeError:
            return None
        if template is None or template.runner is None:
            template = self._envelope_template(collective, root, algorithm)
        return template

    def _timeout(self, timeout: float | None) -> float | None:
        """A call's timeout: its own, else the communicator's, else the settings'."""
        if timeout is None:
            timeout = self.timeout
            if timeout is None:
                timeout = _cfg.settings.timeout
        return timeout

    def _next_call(self, timeout: float | None) -> tuple[int, float | None]:
        """The next call's sequence number and its timeout (`_timeout`)."""
        seq = self._call_seq
        self._call_seq = seq + 1
        return seq, self._timeout(timeout)

    def _envelope_call(self, collective: str, template: Any, send: np.ndarray | None,
                       recv: np.ndarray, mine: np.ndarray | None, shape: tuple[int, ...],
                       out: Any, root: int, algorithm: str | None,
                       timeout: float | None) -> Any:
        """Run a fast bcast's or scatter's envelope call; the root's result is ``mine``."""
        seq, timeout = self._next_call(timeout)
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

    def _start(self, phases: Phases, blocking: bool) -> Any:
        req = Request(self, phases)
        return req.wait() if blocking else req

    def _check_root(self, call: str, root: int) -> int:
        if not isinstance(root, (int, np.integer)) or not 0 <= root < self.size:
            raise ArgumentError(call, "root", root, f"must be a rank in [0, {self.size})",
                                self.rank)
        return int(root)

    def _array(self, call: str, x: Any, name: str = "x") -> np.ndarray:
        if x is None:
            raise ArgumentError(call, name, x, "an array is required on this rank", self.rank)
        return as_array(x, call, name, self.rank)

    def _out(self, call: str, out: Any, shape: tuple[int, ...], dtype: np.dtype,
             source: np.ndarray | None = None) -> np.ndarray:
        if out is None:
            return np.empty(shape, dtype)
        if not isinstance(out, np.ndarray):
            try:
                out = np.asarray(memoryview(out))
            except TypeError:
                raise ArgumentError(call, "out", type(out).__name__, "must be an array or "
                                    "another writeable buffer", self.rank) from None
        if out.dtype != dtype:
            raise ArgumentError(call, "out", out.dtype, f"dtype differs from the data's {dtype} "
                                "(send/receive dtype mismatch)", self.rank)
        need = math.prod(shape)
        if out.size != need or not out.flags.c_contiguous or not out.flags.writeable:
            raise ArgumentError(call, "out", out.shape, f"must be a writeable contiguous array "
                                f"of {need} elements (shape {shape})", self.rank)
        return out

    def _counts(self, call: str, name: str, counts: Any, expect: int | None = None) -> list[int]:
        try:
            values = [int(c) for c in counts]
        except TypeError as exc:
            raise ArgumentError(call, name, counts, "must be a sequence of integers",
                                self.rank) from exc
        if len(values) != self.size:
            raise ArgumentError(call, name, counts, f"needs one entry per rank ({self.size})",
                                self.rank)
        if any(v < 0 for v in values):
            raise ArgumentError(call, name, counts, "counts must not be negative", self.rank)
        if expect is not None and sum(values) != expect:
            raise ArgumentError(call, name, counts, f"sum {sum(values)} differs from the "
                                f"{expect} rows given", self.rank)
        return values

    def _op(self, call: str, op: Any, dtype: np.dtype) -> Op:
        resolved = as_op(op, call, self.rank)
        resolved.check(dtype, call, self.rank)
        return resolved

    # -- barrier ---------------------------------------------------------------------------
    def _barrier(self, algorithm: str | None, timeout: float | None, params: dict) -> Phases:
        spec = make_spec("barrier", self.size, np.uint8)
        yield self._execute(spec, None, None, self._reserve(), 0, algorithm, params, timeout)

    def barrier(self, *, algorithm: str | None = None, timeout: float | None = None,
                **params: Any) -> None:
        """Block until every rank has called barrier."""
        if not params:
            got = self._fast("barrier", _BARRIER_TOKEN, None, 0, None, algorithm, timeout)
            if got is not _SLOW:
                return None
        return self._start(self._barrier(algorithm, timeout, params), True)


    # -- bcast -------------------------------------------------------------------------------
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
        size = self._envelope_size(call, algorithm)
        data: np.ndarray | None = None
        early: Execution | None = None
        early_spec: CallSpec | None = None
        result: np.ndarray | None = None
        if self.rank == root:
            data = self._array(call, x)
            env, inline = _bcast_envelope(data, self.rank, size)
            if inline:  # a wrong ``out`` raises before the data leaves in the envelope
                result = self._out(call, out, data.shape, data.dtype)
            else:
                result = _bcast_out(out, data.shape, data.dtype)
                if result is None:
                    result = self._out(call, out, data.shape, data.dtype)
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
            prepared = self._prepared.get((early_spec, algorithm, tuple(sorted(params.items()))
                                           if params else (), None, _settings_generation()))
            if prepared is not None and prepared[0].native is None:
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

    def bcast(self, x: Any, root: int = 0, *, out: Any = None, algorithm: str | None = None,
              timeout: float | None = None, **params: Any) -> np.ndarray:
        """The root's array on every rank (non-roots may pass None: shape and dtype travel)."""
        got = self._envelope_fast("bcast", x, root, out, algorithm, timeout, params)
        if got is not _SLOW:
            return got  # type: ignore[no-any-return]
        return self._start(self._bcast(x, root, out, algorithm, timeout, params), True)


    # -- scatter -------------------------------------------------------------------------------
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
        token_bytes = meta[:2].view(np.uint8).tobytes().rstrip(b"\0")
        got_dtype = dtype_from_token(token_bytes.decode())
        got_trailing = tuple(int(v) for v in meta[3: 3 + int(meta[2])])
        return got_dtype, got_trailing, [int(v) for v in meta[11:]]

    def _scatterv(self, call: str, x: Any, counts: Any, root: int, out: Any,
                  algorithm: str | None, timeout: float | None, params: dict) -> Phases:
        root = self._check_root(call, root)
        seq = self._reserve()
        data = None
        row_counts: list[int] = [0] * self.size
        if self.rank == root:
            data = self._array(call, x)
            if data.ndim == 0:
                raise ArgumentError(call, "x", data.shape, "needs at least one dimension",
                                    self.rank)
            if counts is None:
                if data.shape[0] % self.size:
                    raise ArgumentError(call, "x", data.shape, f"axis 0 ({data.shape[0]}) is not "
                                        f"divisible by the {self.size} ranks", self.rank)
                row_counts = [data.shape[0] // self.size] * self.size
            else:
                row_counts = self._counts(call, "counts", counts, data.shape[0])
        dtype, trailing, got = yield from self._meta_bcast(
            call, seq, 0, root, None if data is None else data.dtype,
            () if data is None else data.shape[1:],
            row_counts if counts is not None else row_counts[:1],
            algorithm, timeout, params)
        per_row = math.prod(trailing)
        rows = got if counts is not None else got * self.size
        elem_counts = [r * per_row for r in rows]
        if counts is None:
            spec = make_spec("scatter", self.size, dtype, count=elem_counts[0], root=root)
        else:
            spec = make_spec("scatterv", self.size, dtype, counts=elem_counts, root=root)
        shape = (rows[self.rank], *trailing)
        result = self._out(call, out, shape, dtype)
        yield self._execute(spec, data, result, seq, 1, algorithm, params, timeout)
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

    def scatter(self, x: Any, root: int = 0, *, out: Any = None, algorithm: str | None = None,
                timeout: float | None = None, **params: Any) -> np.ndarray:
        """This rank's block of the root's ``x`` split into ``size`` equal blocks along axis 0."""
        got = self._envelope_fast("scatter", x, root, out, algorithm, timeout, params)
        if got is not _SLOW:
            return got  # type: ignore[no-any-return]
        return self._start(self._scatter(x, root, out, algorithm, timeout, params), True)


    def scatterv(self, x: Any, counts: Any = None, root: int = 0, *, out: Any = None,
                 algorithm: str | None = None, timeout: float | None = None,
                 **params: Any) -> np.ndarray:
        """This rank's block of the root's ``x`` split by ``counts`` (rows, given at the root)."""
        if self.rank == root and counts is None:
            raise ArgumentError("scatterv", "counts", None, "required at the root", self.rank)
        return self._start(self._scatterv("scatterv", x, counts if self.rank == root else 0,
                                          root, out, algorithm, timeout, params), True)


    # -- counts exchange -------------------------------------------------------------------
    def _allgather_ints(self, call: str, values: Sequence[int], seq: int, phase: int,
                        timeout: float | None) -> Generator[Execution, None, np.ndarray]:
        mine = np.asarray(values, np.int64)
        result = np.empty(self.size * len(mine), np.int64)
        spec = make_spec("allgather", self.size, np.int64, count=len(mine))
        yield self._execute(spec, mine, result, seq, phase, None, {}, timeout,
                            counts_signature=(call, "counts"))
        return result.reshape(self.size, len(mine))

    # -- gather / allgather ------------------------------------------------------------------
    def _gatherv(self, call: str, x: Any, root: int | None, counts: Any, vector: bool,
                 out: Any, algorithm: str | None, timeout: float | None, params: dict) -> Phases:
        collective = ("all" if root is None else "") + ("gatherv" if vector else "gather")
        if root is not None:
            root = self._check_root(call, root)
        data = self._array(call, x)
        seq = self._reserve()
        rows = _rows(data)
        per_row = _row_size(data)
        trailing = data.shape[1:] if data.ndim else ()
        phase = 0
        if vector and counts is None:
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
        if data.ndim == 0:
            shape: tuple[int, ...] = (self.size,)
        else:
            shape = (total_rows, *trailing)
        result = self._out(call, out, shape, data.dtype) if receives else None
        if result is not None and np.shares_memory(result, data) and not _same_bytes(
                data, _own_rows(result, row_counts, self.rank)):
            data = data.copy()  # only x exactly its own block of out is in place (MPI_IN_PLACE)
        yield self._execute(spec, data, result, seq, phase, algorithm, params, timeout,
                            agree=root is not None)
        return None if result is None else result.reshape(shape)

    def gather(self, x: Any, root: int = 0, *, out: Any = None, algorithm: str | None = None,
               timeout: float | None = None, **params: Any) -> np.ndarray | None:
        """The ranks' arrays concatenated along axis 0 on the root; None elsewhere."""
        if not params:
            got = self._fast("gather", x, None, root, out, algorithm, timeout)
            if got is not _SLOW:
                return got  # type: ignore[no-any-return]
        return self._start(self._gatherv("gather", x, root, None, False, out, algorithm, timeout,
                                         params), True)


    def gatherv(self, x: Any, root: int = 0, counts: Any = None, *, out: Any = None,
                algorithm: str | None = None, timeout: float | None = None,
                **params: Any) -> np.ndarray | None:
        """Arrays of different lengths concatenated on the root (counts exchanged if None)."""
        return self._start(self._gatherv("gatherv", x, root, counts, True, out, algorithm,
                                         timeout, params), True)


    def allgather(self, x: Any, *, out: Any = None, algorithm: str | None = None,
                  timeout: float | None = None, **params: Any) -> np.ndarray:
        """The ranks' arrays concatenated along axis 0 in rank order, on every rank."""
        if not params:
            got = self._fast("allgather", x, None, 0, out, algorithm, timeout)
            if got is not _SLOW:
                return got  # type: ignore[no-any-return]
        return self._start(self._gatherv("allgather", x, None, None, False, out, algorithm,
                                         timeout, params), True)


    def allgatherv(self, x: Any, counts: Any = None, *, out: Any = None,
                   algorithm: str | None = None, timeout: float | None = None,
                   **params: Any) -> np.ndarray:
        """`allgather` for arrays of different lengths (counts in rows; exchanged if None)."""
        return self._start(self._gatherv("allgatherv", x, None, counts, True, out, algorithm,
                                         timeout, params), True)


    # -- alltoall ------------------------------------------------------------------------------
    def _alltoallv(self, call: str, x: Any, sendcounts: Any, sdispls: Any, recvcounts: Any,
                   vector: bool, out: Any, algorithm: str | None, timeout: float | None,
                   params: dict) -> Phases:
        data = self._array(call, x)
        if data.ndim == 0:
            raise ArgumentError(call, "x", data.shape, "needs at least one dimension", self.rank)
        seq = self._reserve()
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
            scounts = self._counts(call, "sendcounts", sendcounts)
            if sdispls is None:
                sdis = prefix(tuple(scounts))
            else:
                sdis = tuple(self._counts(call, "sdispls", sdispls))
            for j, (d, c) in enumerate(zip(sdis, scounts, strict=True)):
                if c and d + c > data.shape[0]:
                    raise ArgumentError(call, "sdispls", sdispls, f"segment {j} [{d}:{d + c}] "
                                        f"runs past the {data.shape[0]} rows of x", self.rank)
            if recvcounts is None:
                mine = np.asarray(scounts, np.int64)
                got = np.empty(self.size, np.int64)
                spec0 = make_spec("alltoall", self.size, np.int64, count=1)
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
        spec = make_spec(
            "alltoallv" if vector else "alltoall", self.size, data.dtype,
            count=scounts[0] * per_row if not vector else 0,
            sendcounts=[c * per_row for c in scounts], sdispls=[d * per_row for d in sdis],
            recvcounts=[c * per_row for c in rcounts])
        shape = (sum(rcounts), *trailing)
        result = self._out(call, out, shape, data.dtype)
        if np.shares_memory(result, data):
            data = data.copy()
        signature = ("v", per_row) if vector else (scounts[0] * per_row,)
        yield self._execute(spec, data, result, seq, phase, algorithm, params, timeout,
                            counts_signature=signature)
        return result.reshape(shape)

    def alltoall(self, x: Any, *, out: Any = None, algorithm: str | None = None,
                 timeout: float | None = None, **params: Any) -> np.ndarray:
        """Block j of ``x`` (split into ``size`` blocks along axis 0) goes to rank j."""
        if not params:
            got = self._fast("alltoall", x, None, 0, out, algorithm, timeout)
            if got is not _SLOW:
                return got  # type: ignore[no-any-return]
        return self._start(self._alltoallv("alltoall", x, None, None, None, False, out,
                                           algorithm, timeout, params), True)


    def alltoallv(self, x: Any, sendcounts: Any, sdispls: Any = None, recvcounts: Any = None, *,
                  out: Any = None, algorithm: str | None = None, timeout: float | None = None,
                  **params: Any) -> np.ndarray:
        """Segments of ``x`` (rows) to each rank; received segments concatenated in rank order."""
        return self._start(self._alltoallv("alltoallv", x, sendcounts, sdispls, recvcounts,
                                           True, out, algorithm, timeout, params), True)


    # -- reductions ----------------------------------------------------------------------------
    def _reduction(self, collective: str, x: Any, op: Any, root: int | None, counts: Any,
                   out: Any, algorithm: str | None, timeout: float | None,
                   params: dict) -> Phases:
        call = collective
        data = self._array(call, x)
        resolved = self._op(call, op, data.dtype)
        if root is not None:
            root = self._check_root(call, root)
        seq = self._reserve()
        shape: tuple[int, ...] = data.shape
        if collective in ("reduce_scatter", "reduce_scatter_block"):
            if data.ndim == 0:
                raise ArgumentError(call, "x", data.shape, "needs at least one dimension",
                                    self.rank)
            per_row = _row_size(data)
            if counts is None:
                if data.shape[0] % self.size:
                    raise ArgumentError(call, "x", data.shape, f"axis 0 ({data.shape[0]}) is "
                                        f"not divisible by the {self.size} ranks", self.rank)
                rows = [data.shape[0] // self.size] * self.size
            else:
                rows = self._counts(call, "counts", counts, data.shape[0])
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
        yield self._execute(spec, data, result, seq, 0, algorithm, params, timeout,
                            counts_signature=signature, in_place=in_place,
                            agree=collective == "reduce")
        if collective == "exscan" and self.rank == 0:
            return None
        return None if result is None else result.reshape(shape)

    def reduce(self, x: Any, op: Any = None, root: int = 0, *, out: Any = None,
               algorithm: str | None = None, timeout: float | None = None,
               **params: Any) -> np.ndarray | None:
        """``x0 ∘ x1 ∘ … ∘ x(p−1)`` element-wise on the root; None elsewhere."""
        if not params:
            got = self._fast("reduce", x, op, root, out, algorithm, timeout)
            if got is not _SLOW:
                return got  # type: ignore[no-any-return]
        return self._start(self._reduction("reduce", x, op, root, None, out, algorithm, timeout,
                                           params), True)


    def allreduce(self, x: Any, op: Any = None, *, out: Any = None, algorithm: str | None = None,
                  timeout: float | None = None, **params: Any) -> np.ndarray:
        """The reduction of every rank's ``x``, on every rank."""
        if not params:
            got = self._fast("allreduce", x, op, 0, out, algorithm, timeout)
            if got is not _SLOW:
                return got  # type: ignore[no-any-return]
        return self._start(self._reduction("allreduce", x, op, None, None, out, algorithm,
                                           timeout, params), True)


    def reduce_scatter(self, x: Any, op: Any = None, counts: Any = None, *, out: Any = None,
                       algorithm: str | None = None, timeout: float | None = None,
                       **params: Any) -> np.ndarray:
        """Block ``rank`` (rows per ``counts``; equal blocks if None) of the reduction."""
        return self._start(self._reduction("reduce_scatter", x, op, None, counts, out,
                                           algorithm, timeout, params), True)


    def reduce_scatter_block(self, x: Any, op: Any = None, *, out: Any = None,
                             algorithm: str | None = None, timeout: float | None = None,
                             **params: Any) -> np.ndarray:
        """Block ``rank`` of the reduction, ``x`` split into ``size`` equal blocks."""
        if not params:
            got = self._fast("reduce_scatter_block", x, op, 0, out, algorithm, timeout)
            if got is not _SLOW:
                return got  # type: ignore[no-any-return]
        return self._start(self._reduction("reduce_scatter_block", x, op, None, None, out,
                                           algorithm, timeout, params), True)


    def scan(self, x: Any, op: Any = None, *, out: Any = None, algorithm: str | None = None,
             timeout: float | None = None, **params: Any) -> np.ndarray:
        """Inclusive prefix reduction: ``x0 ∘ … ∘ x(rank)``."""
        if not params:
            got = self._fast("scan", x, op, 0, out, algorithm, timeout)
            if got is not _SLOW:
                return got  # type: ignore[no-any-return]
        return self._start(self._reduction("scan", x, op, None, None, out, algorithm, timeout,
                                           params), True)


    def exscan(self, x: Any, op: Any = None, *, out: Any = None, algorithm: str | None = None,
               timeout: float | None = None, **params: Any) -> np.ndarray | None:
        """Exclusive prefix reduction ``x0 ∘ … ∘ x(rank−1)``; None on rank 0."""
        if not params:
            got = self._fast("exscan", x, op, 0, out, algorithm, timeout)
            if got is not _SLOW:
                return got  # type: ignore[no-any-return]
        return self._start(self._reduction("exscan", x, op, None, None, out, algorithm, timeout,
                                           params), True)


    # -- the non-blocking and persistent forms, generated from the blocking calls ---------
    ibarrier = nonblocking(barrier)
    barrier_init = persistent(barrier)
    ibcast = nonblocking(bcast)
    bcast_init = persistent(bcast)
    iscatter = nonblocking(scatter)
    scatter_init = persistent(scatter)
    iscatterv = nonblocking(scatterv)
    scatterv_init = persistent(scatterv)
    igather = nonblocking(gather)
    gather_init = persistent(gather)
    igatherv = nonblocking(gatherv)
    gatherv_init = persistent(gatherv)
    iallgather = nonblocking(allgather)
    allgather_init = persistent(allgather)
    iallgatherv = nonblocking(allgatherv)
    allgatherv_init = persistent(allgatherv)
    ialltoall = nonblocking(alltoall)
    alltoall_init = persistent(alltoall)
    ialltoallv = nonblocking(alltoallv)
    alltoallv_init = persistent(alltoallv)
    ireduce = nonblocking(reduce)
    reduce_init = persistent(reduce)
    iallreduce = nonblocking(allreduce)
    allreduce_init = persistent(allreduce)
    ireduce_scatter = nonblocking(reduce_scatter)
    reduce_scatter_init = persistent(reduce_scatter)
    ireduce_scatter_block = nonblocking(reduce_scatter_block)
    reduce_scatter_block_init = persistent(reduce_scatter_block)
    iscan = nonblocking(scan)
    scan_init = persistent(scan)
    iexscan = nonblocking(exscan)
    exscan_init = persistent(exscan)

    # -- communicators ---------------------------------------------------------------------
    def split(self, color: int | None, key: int = 0) -> Comm | None:
        """Ranks with equal ``color`` form a new communicator, ordered by ``(key, rank)``.

        A rank passing ``color=None`` takes part but gets None back (MPI_UNDEFINED).
        """
        seq = self._reserve()
        flag = 0 if color is None else 1
        mine = [flag, int(color or 0), int(key), self._contexts.next]
        table = Request(self, self._allgather_ints("split", mine, seq, 0, None)).wait()
        context = int(table[:, 3].max())
        self._contexts.next = context + 1
        if color is None:
            return None
        members = [r for r in range(self.size) if table[r, 0] and table[r, 1] == color]
        members.sort(key=lambda r: (int(table[r, 2]), r))
        group = [self._group[r] for r in members]
        return Comm(self.transport, group, context, progress=self._progress,
                    contexts=self._contexts, timeout=self.timeout,
                    name=f"{self.name}.split({color})")

    def dup(self) -> Comm:
        """The same group with its own message space."""
        new = self.split(0, self.rank)
        assert new is not None
        new.name = f"{self.name}.dup"
        new._overrides = dict(self._overrides)
        new._params = {k: dict(v) for k, v in self._params.items()}
        return new

    def _run_phase(self, spec: CallSpec, send: np.ndarray | None, recv: np.ndarray | None,
                   signature: object) -> None:
        """Run one schedule to completion with library-chosen algorithm (internal helper)."""
        seq = self._reserve()

        def one() -> Phases:
            yield self._execute(spec, send, recv, seq, 0, None, {}, None,
                                counts_signature=signature)

        Request(self, one()).wait()

    # -- objects -----------------------------------------------------------------------------
    def bcast_object(self, obj: Any, root: int = 0) -> Any:
        """Broadcast any picklable object (pickle 5, large buffers out of band)."""
        from .objects import bcast_object
        return bcast_object(self, obj, root)

    def gather_object(self, obj: Any, root: int = 0) -> list[Any] | None:
        """Every rank's object in a list on the root; None elsewhere."""
        from .objects import gather_object
        return gather_object(self, obj, root)

    def allgather_object(self, obj: Any) -> list[Any]:
        """Every rank's object in a list on every rank."""
        from .objects import allgather_object
        return allgather_object(self, obj)

    def scatter_object(self, objs: Sequence[Any] | None, root: int = 0) -> Any:
        """Object ``objs[rank]`` of the root's list, on each rank."""
        from .objects import scatter_object
        return scatter_object(self, objs, root)

    def alltoall_object(self, objs: Sequence[Any]) -> list[Any]:
        """``objs[j]`` goes to rank j; returns the objects received, in rank order."""
        from .objects import alltoall_object
        return alltoall_object(self, objs)

    def reduce_object(self, obj: Any, fn: Callable[[Any, Any], Any], root: int = 0) -> Any:
        """``fn`` folded over the ranks' objects in rank order, on the root; None elsewhere."""
        from .objects import reduce_object
        return reduce_object(self, obj, fn, root)

    def allreduce_object(self, obj: Any, fn: Callable[[Any, Any], Any]) -> Any:
        """`reduce_object` with the result on every rank."""
        from .objects import allreduce_object
        return allreduce_object(self, obj, fn)


__all__ = ["Comm", "Request", "wait_all", "CollopsError"]
