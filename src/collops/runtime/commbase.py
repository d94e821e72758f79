"""The machinery under `Comm`: sequence numbers, argument checks, and starting a call's chosen
algorithm (prepared once per signature) on concrete buffers."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import config as _cfg
from ..algorithms import fingerprint as fp
from ..algorithms import selection
from ..algorithms.native import Bind, NativeCall
from ..algorithms.registry import Algorithm
from ..algorithms.spec import CallSpec
from ..datatypes import address_of, as_array
from ..errors import ArgumentError
from ..ops import Op, as_op
from ..transport.base import Transport
from ..transport.tags import make_tag_base
from .agreement import Agreed
from .arguments import checked_int, checked_ints, checked_timeout
from .cache import SHARED, BoundedCache
from .engine import CallInfo, Execution, Plan, Progress
from .envelope import ENVELOPE
from .prepared import BoundEntry
from .request import Phases, Request


def _empty(dtype: np.dtype) -> np.ndarray:
    """A shared zero-length array of ``dtype``."""
    arr = SHARED.get(("empty", dtype))
    if arr is None:
        arr = SHARED.put(("empty", dtype), np.empty(0, dtype))
    return arr  # type: ignore[no-any-return]


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


def _bind_of(alg: Algorithm) -> Bind | None:
    """How to bind ``alg``'s blocking runner (None: a schedule, or a native without one)."""
    return None if alg.native is None else alg.native.bind


def _plan_for(alg: Algorithm, params: dict[str, Any], rank: int, spec: CallSpec) -> Plan:
    """The compiled plan of ``alg``'s schedule for ``rank`` (shared by communicators)."""
    key = ("plan", alg.collective, alg.name, tuple(sorted(params.items())), rank, spec)
    plan = SHARED.get(key)
    if plan is None:
        plan = SHARED.put(key, Plan(alg.builder(rank, spec, params), spec.itemsize))
    return plan  # type: ignore[no-any-return]


class _Contexts:
    """Per-transport counter of communicator contexts (each comm has its own message space)."""

    def __init__(self) -> None:
        self.next = 1


_SLOW: Any = object()  # typed Any: it stands in for a template or a result


def _rows(arr: np.ndarray) -> int:
    return arr.shape[0] if arr.ndim else 1


def _row_size(arr: np.ndarray) -> int:
    return math.prod(arr.shape[1:]) if arr.ndim > 1 else 1


class CommBase:
    """What every collective of a `Comm` is built on (see `Comm`)."""

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
        #: the next call number, in a buffer this communicator owns and shares with the
        #: compiled runners it binds: they read it and advance it when they take a call
        self._calls = np.zeros(1, np.int64)
        self._call_number = self._calls.data
        self._overrides: dict[str, str] = {}
        self._params: dict[str, dict[str, Any]] = {}
        self.timeout = checked_timeout("Comm", timeout, self.rank)
        self.name = name
        self.last_algorithm: str | None = None
        #: what this communicator's calls worked out once per signature, keyed by kind:
        #: ("prepared", spec, algorithm, params, counts signature, settings generation) ->
        #: (algorithm, plan, call info, resolved params); ("template", collective, dtype,
        #: shape, op, root, algorithm) and ("envelope", collective, root, algorithm) -> the
        #: `_Template` of a blocking call or of a bcast's or scatter's envelope (None: none
        #: fits); ("data", spec, algorithm) -> (runner, algorithm name) of a data phase
        self._cache = BoundedCache()
        #: collective -> ``(op, root, call, algorithm name, template)``: the compiled whole
        #: call bound to the signature this rank last ran through `_fast`, `_fast_bcast` or
        #: `_fast_scatter` (see `_bind_call`, `_bind_bcast`; bcast and scatter have no op)
        self._bound_calls: dict[str, BoundEntry] = {}
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

    def _reserve(self) -> int:
        seq: int = self._call_number[0]
        self._call_number[0] = seq + 1
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
        key = ("prepared", spec, algorithm, tuple(sorted(params.items())) if params else (),
               counts_signature, _settings_generation())
        prepared = self._cache.get(key)
        if prepared is None:
            prepared = self._cache.put(key, self._prepare(spec, algorithm, params,
                                                          counts_signature))
        alg, plan, info, resolved = prepared
        self.last_algorithm = alg.name
        timeout = self._timeout(timeout, spec.collective)
        if in_place and not alg.in_place and send is not None:
            send = send.copy()
        # a native algorithm starts at once: its protocol orders the calls by when they start
        if agree and not alg.agrees_on_root and alg.native is None and self.size > 1:
            return Agreed(self, info, seq, phase, timeout,  # type: ignore[return-value]
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
        fprint = fp.fingerprint(spec.collective, alg.name, spec.root, spec.dtype, signature,
                                spec.op)
        info = CallInfo(spec.collective, alg.name, self.rank, fprint, fp.describe)
        return alg, plan, info, resolved

    def _timeout(self, timeout: float | None, call: str) -> float | None:
        """A call's timeout: its own (checked), else the communicator's, else the settings'."""
        if timeout is None:
            timeout = self.timeout
            if timeout is None:
                timeout = _cfg.settings.timeout
            return timeout
        return checked_timeout(call, timeout, self.rank)

    def _next_call(self, timeout: float | None, call: str) -> tuple[int, float | None]:
        """The next call's sequence number and its timeout (`_timeout`)."""
        timeout = self._timeout(timeout, call)  # checked before the call takes a number
        seq: int = self._call_number[0]
        self._call_number[0] = seq + 1
        return seq, timeout

    def _start(self, phases: Phases, blocking: bool) -> Any:
        req = Request(self, phases)
        return req.wait() if blocking else req

    def _check_root(self, call: str, root: int) -> int:
        root = checked_int(call, "root", root, self.rank)
        if not 0 <= root < self.size:
            raise ArgumentError(call, "root", root, f"must be a rank in [0, {self.size})",
                                self.rank)
        return root

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
        values = checked_ints(call, name, counts, self.rank)
        if len(values) != self.size:
            raise ArgumentError(call, name, counts, f"needs one entry per rank ({self.size})",
                                self.rank)
        if any(v < 0 for v in values):
            raise ArgumentError(call, name, counts, "counts must not be negative", self.rank)
        if expect is not None and sum(values) != expect:
            raise ArgumentError(call, name, counts, f"sum {sum(values)} differs from the "
                                f"{expect} rows given", self.rank)
        return values

    def _split_rows(self, call: str, data: np.ndarray, counts: Any) -> list[int]:
        """The rows of ``data`` (axis 0) each rank's block has: ``counts`` (checked), or equal
        blocks when it is None."""
        if data.ndim == 0:
            raise ArgumentError(call, "x", data.shape, "needs at least one dimension", self.rank)
        if counts is not None:
            return self._counts(call, "counts", counts, data.shape[0])
        if data.shape[0] % self.size:
            raise ArgumentError(call, "x", data.shape, f"axis 0 ({data.shape[0]}) is not "
                                f"divisible by the {self.size} ranks", self.rank)
        return [data.shape[0] // self.size] * self.size

    def _op(self, call: str, op: Any, dtype: np.dtype) -> Op:
        resolved = as_op(op, call, self.rank)
        resolved.check(dtype, call, self.rank)
        return resolved
