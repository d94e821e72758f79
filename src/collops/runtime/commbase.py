"""The machinery under `Comm`: sequence numbers, argument checks, and starting a call's chosen
algorithm (prepared once per signature) on concrete buffers."""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import config as _cfg
from ..algorithms import fingerprint as fp
from ..algorithms import selection
from ..algorithms.native import NativeCall
from ..algorithms.registry import Algorithm, check_call_params
from ..algorithms.spec import CallSpec
from ..datatypes import address_of, as_array
from ..errors import ArgumentError
from ..ops import Op, as_op
from ..topology.machine import detect_machine
from ..transport.base import Transport
from ..transport.placement import binding_of_job
from .abandon import abandon_call
from .arguments import checked_displs, checked_int, checked_ints, checked_timeout, writeable_buffer
from .cache import SHARED, BoundedCache
from .context_ids import ContextIds
from .engine import CallInfo, Execution, Plan, Progress
from .envelope import ENVELOPE
from .network import declared_network
from .prepared import BoundEntry, BoundKey, PreparedCall
from .request import Phases, Request

if TYPE_CHECKING:
    from ..sim.network_cost import NetworkCost


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two contiguous arrays are exactly the same memory (an in-place call)."""
    return (a.nbytes == b.nbytes and a.flags.c_contiguous and b.flags.c_contiguous
            and address_of(a) == address_of(b))


def _own_rows(out: np.ndarray, rows: int, row_counts: Sequence[int], rank: int,
              row_displs: Sequence[int] | None = None) -> np.ndarray:
    """The rows of ``out`` (a gather's output of ``rows`` rows: blocks in rank order, or at
    ``row_displs``) that are ``rank``'s."""
    start = sum(row_counts[:rank]) if row_displs is None else row_displs[rank]
    return out.reshape(rows, -1)[start:start + row_counts[rank]]


def _plan_for(alg: Algorithm, params: dict[str, Any], rank: int, spec: CallSpec) -> Plan:
    """The compiled plan of ``alg``'s schedule for ``rank`` (shared by communicators)."""
    key = ("plan", alg.collective, alg.name, tuple(sorted(params.items())), rank, spec)
    plan = SHARED.get(key)
    if plan is None:
        plan = SHARED.put(key, Plan(alg.builder(rank, spec, params), spec.itemsize))
    return plan  # type: ignore[no-any-return]


_SLOW: Any = object()  # a fast path declines the call (typed Any: it stands in for a result)


def binding_facts(cpus: Sequence[int | None]) -> dict[str, str]:
    """``binding.machine``/``binding.mapping`` for ranks bound to ``cpus`` (empty when one is
    not bound, or its CPU is not one the machine's description knows)."""
    if not cpus or any(c is None for c in cpus):
        return {}
    machine, thread_of = detect_machine()
    if any(c not in thread_of for c in cpus):
        return {}
    return {"binding.machine": "x".join(map(str, machine.shape)),
            "binding.mapping": ",".join(str(thread_of[int(c)]) for c in cpus if c is not None)}


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
        contexts: ContextIds | None = None,
        timeout: float | None = None,
        name: str = "world",
    ) -> None:
        self.transport = transport
        self._group = list(range(transport.size)) if group is None else list(group)
        #: every world rank's CPU as the launcher bound it (None: not bound, or not known)
        self._job_binding = binding_of_job(transport.size)
        self._facts: dict[str, str] | None = None
        self.size = len(self._group)
        self.rank = self._group.index(transport.rank)
        self.context = context
        self._progress = progress or Progress(transport)
        #: the communicator ids free on this rank (shared by the communicators it makes)
        self._contexts = contexts or ContextIds()
        #: this communicator's requests (what `free` lets complete first)
        self._pending: weakref.WeakSet[Request] = weakref.WeakSet()
        #: the call numbers of the communicator-making calls begun on it and not yet done, in
        #: the calls' order: each makes its communicator only when first (`Communicators._split`)
        self._making: list[int] = []
        #: the next call number, in a buffer this communicator owns and shares with the
        #: compiled runners it binds: they read it and advance it when they take a call
        #: (the transport's, so other ranks may see it: `collops.transport.stall`)
        self._calls = transport.call_counter(context)
        self._call_number = self._calls.data
        #: how many phase generators of this communicator are running a step now: a request
        #: made inside one belongs to that call (`Request`)
        self._stepping = 0
        self._overrides: dict[str, str] = {}
        self._params: dict[str, dict[str, Any]] = {}
        self.timeout = checked_timeout("Comm", timeout, self.rank)
        self.name = name
        self.last_algorithm: str | None = None
        #: the object collectives' reused slot buffers (`objects.Slots`), made on first use
        self._object_slots: Any = None
        #: signature -> its `PreparedCall`: (spec, algorithm, params, counts signature) for a
        #: phase of any call; (collective, dtype, shape, op, root, algorithm) for a blocking
        #: call's arguments (None: they do not fit `FastPaths._fast`); (collective,
        #: "envelope", root, algorithm) for a blocking bcast's or scatter's envelope
        self._cache = BoundedCache(_cfg.settings.call_cache)
        #: ``(call number, phase)`` of the phase `_execute` started last
        self._last_started: tuple[int, int] | None = None
        #: the prepared call a persistent request kept for the first phase of the call it
        #: starts now (`PersistentRequest.start`), used instead of the cache's
        self._pinned: PreparedCall | None = None
        #: collective -> ``(op, root, call, algorithm name, prepared)``: the compiled whole
        #: call bound to the signature this rank last ran through `_fast`
        #: (see `_bind_call`, `_bind_bcast`; bcast and scatter have no op)
        self._bound_calls: dict[BoundKey, BoundEntry] = {}
        #: a blocking call's phase is starting (see `NativeAlgorithm.blocking_only`)
        self.blocking_phase = False
        #: the settings generation the prepared calls were made under (dropped when it
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
        """The algorithm for ``spec`` and its parameters: the caller's, the communicator's,
        then what the runtime supplies (`supplied_facts`), then the defaults."""
        coll = spec.collective
        merged = {**self._params.get(coll, {}), **params} if not algorithm else params
        choice = selection.select(
            spec, requested=algorithm, comm_override=self._overrides.get(coll),
            env_override=_cfg.settings.algorithms.get(coll),
            tuning_file=_cfg.settings.tuning_file,
            resources=self._resources, params=merged, rank=self.rank,
            network=self.declared_network())
        wanted = {p.name: p.supplied for p in choice.algorithm.params
                  if p.supplied and p.name not in merged}
        facts = self.supplied_facts() if wanted else {}
        supplied = {name: facts[fact] for name, fact in wanted.items() if fact in facts}
        if supplied:
            choice = replace(choice, params={**choice.params, **supplied})
        return choice

    def declared_network(self) -> NetworkCost | None:
        """This communicator's network as its user declared it (``COLLOPS_TOPOLOGY``; None:
        not declared), the cost term of selection (`collops.runtime.network`)."""
        settings = _cfg.settings
        return declared_network(settings.topology, settings.placement, self.transport.size,
                                self._group)

    def supplied_facts(self) -> dict[str, str]:
        """What the runtime knows of this communicator's ranks and supplies to algorithms that
        ask (`Param.supplied`): ``binding.machine`` and ``binding.mapping`` — the real
        machine's shape and each rank's hardware thread — when every rank is bound to a CPU;
        ``network.shape`` when the ranks fill a declared torus (`declared_network`)."""
        if self._generation != _cfg.generation:
            self._new_generation()
        if self._facts is None:
            network = self.declared_network()
            self._facts = {**binding_facts([self._job_binding[w] for w in self._group]),
                           **(network.facts() if network is not None else {})}
        return dict(self._facts)

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
        """Start phase ``phase`` of call ``seq`` on ``send`` / ``recv`` from the prepared call
        of its signature (`PreparedCall.start`: ``in_place`` and ``agree`` are its) — for the
        first phase of a persistent request's start, the one it kept (`_pinned`)."""
        call = self._pinned
        if call is None or phase or call.spec != spec:
            call = self._prepared(spec, algorithm, params, counts_signature)
        else:
            self._pinned = None
        started = call.start(self, send, recv, seq, phase,
                             self._timeout(timeout, spec.collective), in_place, agree)
        self._last_started = (seq, phase)  # read by the request that yields it (`Request`)
        return started

    def _prepared(self, spec: CallSpec, algorithm: str | None, params: dict[str, Any],
                  counts_signature: object = None) -> PreparedCall:
        """The prepared call of a signature, prepared on first use (`_prepare`)."""
        if self._generation != _cfg.generation:
            self._new_generation()
        if params:
            try:
                key = (spec, algorithm, tuple(sorted(params.items())), counts_signature)
                call = self._cache.get(key)
            except TypeError:
                call = None
            if call is None:
                check_call_params(spec.collective, params, self.rank)
        else:
            key = (spec, algorithm, (), counts_signature)
            call = self._cache.get(key)
        if call is None:
            call = self._cache.put(key, self._prepare(spec, algorithm, params,
                                                      counts_signature))
        return call  # type: ignore[no-any-return]

    def _known(self, spec: CallSpec, algorithm: str | None,
               counts_signature: object = None) -> PreparedCall | None:
        """The prepared call of a signature without parameters, if a call prepared it."""
        if self._generation != _cfg.generation:
            self._new_generation()
        return self._cache.get((spec, algorithm, (), counts_signature))  # type: ignore[no-any-return]

    def _new_generation(self) -> None:
        """The settings changed: drop what was prepared under the old ones."""
        self._cache.clear()
        self._bound_calls.clear()
        self._facts = None  # a declared network (COLLOPS_TOPOLOGY) may have changed
        self._generation = _cfg.generation

    def _native_call(self, spec: CallSpec, params: dict[str, Any]) -> NativeCall:
        """What a native algorithm may know of a call of ``spec`` on this communicator."""
        return NativeCall(spec, self.rank, tuple(self._group), self.context, self.transport,
                          params, self._progress)

    def _prepare(self, spec: CallSpec, algorithm: str | None, params: dict[str, Any],
                 counts_signature: object) -> PreparedCall:
        """Choose the algorithm and compile its plan for a call signature."""
        choice = self._choose(spec, algorithm, params)
        alg = choice.algorithm
        resolved = dict(choice.params)
        plan = None if alg.native is not None else _plan_for(alg, resolved, self.rank, spec)
        signature = counts_signature if counts_signature is not None else (
            spec.count, spec.counts)
        fprint = fp.fingerprint(spec.collective, alg.name, spec.root, spec.dtype, signature,
                                spec.op)
        info = CallInfo(spec.collective, alg.name, self.rank, fprint, fp.describe)
        return PreparedCall(spec, counts_signature, alg, plan, info, resolved)

    def _timeout(self, timeout: float | None, call: str) -> float | None:
        """A call's timeout: its own (checked), else the communicator's, else the settings'."""
        if timeout is None:
            timeout = self.timeout
            if timeout is None:
                timeout = _cfg.settings.timeout
            return timeout
        return checked_timeout(call, timeout, self.rank)

    def _next_call(self, timeout: float | None, call: str) -> tuple[int, float | None]:
        """The next call's sequence number and its timeout (`_timeout`: a bad one gives the call
        up, `abandon_call`)."""
        seq: int = self._call_number[0]
        self._call_number[0] = seq + 1
        try:
            return seq, self._timeout(timeout, call)
        except ArgumentError as exc:  # only this rank may see it: its peers are told
            abandon_call(self, exc, seq)
            raise

    def _start(self, phases: Phases, blocking: bool) -> Any:
        req = Request(self, phases, blocking)
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
             source: np.ndarray | None = None, zeros: bool = False) -> np.ndarray:
        """``out`` checked to hold a result of ``shape`` and ``dtype``, or a new array (of
        zeros when ``zeros``: a result with gaps between its blocks)."""
        if out is None:
            return np.zeros(shape, dtype) if zeros else np.empty(shape, dtype)
        out = writeable_buffer(call, out, self.rank)
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

    def _send_blocks(self, call: str, data: np.ndarray, counts: Any, displs: Any,
                     names: tuple[str, str] = ("counts", "displs")) -> tuple[list[int], list[int]]:
        """The rows (``counts``) and first rows (``displs``) of the blocks of ``data`` (axis
        0) sent to each rank, checked: each block lies within ``data``; blocks may overlap
        and leave gaps, as MPI's send buffers may."""
        if data.ndim == 0:
            raise ArgumentError(call, "x", data.shape, "needs at least one dimension", self.rank)
        row_counts = self._counts(call, names[0], counts)
        row_displs = checked_displs(call, names[1], displs, row_counts, self.rank, receive=False)
        for j, (d, c) in enumerate(zip(row_displs, row_counts, strict=True)):
            if c and d + c > data.shape[0]:
                raise ArgumentError(call, names[1], displs, f"block {j} [{d}:{d + c}] runs "
                                    f"past the {data.shape[0]} rows of x", self.rank)
        return row_counts, row_displs

    def _op(self, call: str, op: Any, dtype: np.dtype) -> Op:
        resolved = as_op(op, call, self.rank)
        resolved.check(dtype, call, self.rank)
        return resolved
