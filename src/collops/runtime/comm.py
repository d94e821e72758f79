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

from types import BuiltinMethodType
from typing import Any

import numpy as np

from .. import config as _cfg
from ..algorithms import selection
from ..algorithms.native import LengthsLearned
from ..algorithms.registry import get_algorithm
from ..algorithms.spec import CallSpec, make_spec
from ..datatypes import as_array
from ..errors import ArgumentError, CollopsError
from . import objects
from .commbase import _SLOW, _row_size
from .communicators import Communicators
from .p2p import P2P
from .request import Phases, Request, wait_all
from .variants import nonblocking, persistent
from .vector_calls import fast_scatterv, guessing_key, learned_result, vector_key

_BARRIER_TOKEN = np.empty(0, np.uint8)


class Comm(Communicators, P2P):
    """A group of ranks with its own message space; collectives are its methods."""

    # -- settings -------------------------------------------------------------------------
    def set_algorithm(self, collective: str, name: str | None, **params: Any) -> None:
        """Use algorithm ``name`` for every ``collective`` on this communicator (None: auto)."""
        self._bound_calls.clear()
        self._cache.clear()
        if name is None:
            self._overrides.pop(collective, None)
            self._params.pop(collective, None)
            return
        alg = get_algorithm(collective, name, self.rank, "set_algorithm")
        alg.resolve(params, self.rank)
        self._overrides[collective] = name
        self._params[collective] = dict(params)

    def offered_algorithms(self, collective: str) -> list[str]:
        """The algorithms of ``collective`` this communicator's transport can run (each may
        still be ineligible for a particular call: see `explain`)."""
        return [a.name for a in selection.offered(collective, self._resources)]

    def explain(self, collective: str, x: Any = None, **kwargs: Any) -> str:
        """The selection table for a call of ``collective`` on ``x`` (see `selection.explain`);
        ``op``, ``root``, ``counts``, ``sendcounts`` and ``recvcounts`` (rows, as in the call)
        are those of the call; ``algorithm`` explains that one. The last line gives the chosen
        algorithm's parameters, marking those supplied from the ranks' binding."""
        arr = np.zeros(1) if x is None else as_array(x, collective, "x", self.rank)
        count = arr.size
        per_row = _row_size(arr) if arr.ndim else 1
        op = kwargs.pop("op", None)
        algorithm = kwargs.pop("algorithm", None)
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

        text = selection.explain(
            spec, self._resources, protocols=self.transport.protocol_settings(),
            requested=algorithm, comm_override=self._overrides.get(collective),
            env_override=_cfg.settings.algorithms.get(collective),
            tuning_file=_cfg.settings.tuning_file, network=self.declared_network())
        choice = self._choose(spec, algorithm, {})
        if not choice.params:
            return text
        supplied = {p.name for p in choice.algorithm.params
                    if p.supplied and p.supplied in self.supplied_facts()}
        shown = ", ".join(f"{k}={v!r}" + (" (the ranks' binding)" if k in supplied else "")
                          for k, v in choice.params.items())
        return f"{text}\nparameters of {choice.algorithm.name}: {shown}"

    def prepared_calls(self) -> list[tuple[str, str]]:
        """``(kind, collective)`` of each `PreparedCall` this communicator holds (at most
        `CACHE_LIMIT`): "phase" (a phase of a call: algorithm chosen, plan made), "blocking"
        (also a blocking call's, knowing its result's shape; its runner bound), "envelope" (a
        blocking bcast's or scatter's envelope)."""
        calls = {id(call): call for call in self._cache.values() if call is not None}
        return [("envelope" if call.scratch is not None else
                 "blocking" if call.blocking else "phase", call.spec.collective)
                for call in calls.values()]

    def bound_calls(self) -> dict[str, str | None]:
        """collective -> algorithm of the compiled whole call bound to the signature this
        rank last ran of it (a repeated call of that signature runs in one compiled call);
        calls that ask for an algorithm by name have their own (not listed)."""
        return {collective: entry[3] for collective, entry in self._bound_calls.items()
                if type(collective) is str}

    def bound_route(self, collective: str, algorithm: str | None = None) -> str | None:
        """How a repeated call of ``collective`` runs once bound to the signature this rank
        last ran of it — chosen by the selection, or asking for ``algorithm`` by name:
        ``"compiled"`` (one compiled call), ``"python"`` (a bound Python runner), or None
        (nothing bound)."""
        entry = self._bound_calls.get(collective if algorithm is None
                                      else (collective, algorithm))
        if entry is None:
            return None
        return "compiled" if isinstance(entry[2], BuiltinMethodType) else "python"

    # -- barrier ---------------------------------------------------------------------------
    def barrier(self, *, algorithm: str | None = None, timeout: float | None = None,
                **params: Any) -> None:
        """Block until every rank has called barrier."""
        # the compiled barrier bound to this communicator, called from here rather than
        # through `_fast`: a barrier costs nothing but its overhead
        bound = self._bound_calls.get("barrier")
        if (bound is not None and self._plain(algorithm, timeout, params)
                and bound[2](_BARRIER_TOKEN, None, _cfg.settings.timeout) is None):
            self.last_algorithm = bound[3]
            return None
        if not params:
            got = self._fast("barrier", _BARRIER_TOKEN, None, 0, None, algorithm, timeout)
            if got is not _SLOW:
                return None
        return self._start(self._barrier(algorithm, timeout, params), True)


    # -- bcast -------------------------------------------------------------------------------
    def _plain(self, algorithm: str | None, timeout: float | None, params: dict[str, Any]
               ) -> bool:
        """Whether this call asks for nothing of its own (no algorithm, timeout or
        parameters, none on the communicator, settings unchanged since a call was bound):
        what `barrier` and `bcast` test before calling the compiled call bound to them (a
        call that finds none bound, a large bcast's, needs not ask)."""
        return (algorithm is None and timeout is None and not params
                and self.timeout is None and self._generation == _cfg.generation)

    def bcast(self, x: Any, root: int = 0, *, out: Any = None, algorithm: str | None = None,
              timeout: float | None = None, **params: Any) -> np.ndarray:
        """The root's array on every rank (non-roots may pass None: shape and dtype travel)."""
        # the compiled bcast bound to the last signature, as `barrier` calls its own
        bound = self._bound_calls.get("bcast")
        if (bound is not None and type(root) is int and root == bound[1]
                and self._plain(algorithm, timeout, params)):
            got = bound[2](x, out, _cfg.settings.timeout)
            if got is not _SLOW:
                self.last_algorithm = bound[3]
                if got is None:  # the root sent another signature: parse its envelope
                    return self._received("bcast", bound[4], out, root,
                                          self._call_number[0] - 1, None, _cfg.settings.timeout)
                return got  # type: ignore[no-any-return]
        if not params:
            got = self._fast("bcast", x, None, root, out, algorithm, timeout)
            if got is not _SLOW:
                return got  # type: ignore[no-any-return]
        return self._start(self._bcast(x, root, out, algorithm, timeout, params), True)


    # -- scatter -------------------------------------------------------------------------------
    def scatter(self, x: Any, root: int = 0, *, out: Any = None, algorithm: str | None = None,
                timeout: float | None = None, **params: Any) -> np.ndarray:
        """This rank's block of the root's ``x`` split into ``size`` equal blocks along axis 0."""
        if not params:
            got = self._fast("scatter", x, None, root, out, algorithm, timeout)
            if got is not _SLOW:
                return got  # type: ignore[no-any-return]
        return self._start(self._scatter(x, root, out, algorithm, timeout, params), True)


    def scatterv(self, x: Any, counts: Any = None, root: int = 0, *, displs: Any = None,
                 out: Any = None, algorithm: str | None = None, timeout: float | None = None,
                 **params: Any) -> np.ndarray:
        """This rank's block of the root's ``x``: ``counts[rank]`` rows from row
        ``displs[rank]`` (both given at the root; blocks back to back if ``displs`` is None)."""
        if self.rank == root and counts is None:
            raise ArgumentError("scatterv", "counts", None, "required at the root", self.rank)
        if not params:
            key = vector_key(counts, displs) if self.rank == root else ()
            if key is not None:
                got = fast_scatterv(self, x, key, root, out, algorithm, timeout)
                if got is not _SLOW:
                    return got  # type: ignore[no-any-return]
        return self._start(self._scatterv("scatterv", x, counts if self.rank == root else 0,
                                          root, out, algorithm, timeout, params, displs), True)


    # -- gather / allgather ------------------------------------------------------------------
    def gather(self, x: Any, root: int = 0, *, out: Any = None, algorithm: str | None = None,
               timeout: float | None = None, **params: Any) -> np.ndarray | None:
        """The ranks' arrays concatenated along axis 0 on the root; None elsewhere."""
        if not params:
            got = self._fast("gather", x, None, root, out, algorithm, timeout)
            if got is not _SLOW:
                return got  # type: ignore[no-any-return]
        return self._start(self._gatherv("gather", x, root, None, False, out, algorithm, timeout,
                                         params), True)


    def gatherv(self, x: Any, root: int = 0, counts: Any = None, *, displs: Any = None,
                out: Any = None, algorithm: str | None = None, timeout: float | None = None,
                **params: Any) -> np.ndarray | None:
        """Arrays of different lengths on the root, rank j's from row ``displs[j]`` (back to
        back if None; counts in rows, exchanged if None)."""
        if not params and (algorithm is None or algorithm == "shm_direct"):
            # see `vector_gatherv`; a root given no counts guesses (`guessing_key`)
            key = (vector_key(counts, displs if self.rank == root else None)
                   if counts is not None or self.rank != root
                   else guessing_key(self, x, root, displs))
            if key is not None:
                try:
                    got = self._fast("gatherv", x, key, root, out, algorithm, timeout)
                except LengthsLearned as exc:
                    return learned_result(self, exc, x, out)
                if got is not _SLOW:
                    return got  # type: ignore[no-any-return]
        return self._start(self._gatherv("gatherv", x, root, counts, True, out, algorithm,
                                         timeout, params, displs), True)


    def allgather(self, x: Any, *, out: Any = None, algorithm: str | None = None,
                  timeout: float | None = None, **params: Any) -> np.ndarray:
        """The ranks' arrays concatenated along axis 0 in rank order, on every rank."""
        if not params:
            got = self._fast("allgather", x, None, 0, out, algorithm, timeout)
            if got is not _SLOW:
                return got  # type: ignore[no-any-return]
        return self._start(self._gatherv("allgather", x, None, None, False, out, algorithm,
                                         timeout, params), True)


    def allgatherv(self, x: Any, counts: Any = None, *, displs: Any = None, out: Any = None,
                   algorithm: str | None = None, timeout: float | None = None,
                   **params: Any) -> np.ndarray:
        """`allgather` for arrays of different lengths, rank j's from row ``displs[j]`` (back
        to back if None; counts in rows, exchanged if None)."""
        if not params and counts is not None:
            key = vector_key(counts, displs)
            if key is not None:
                got = self._fast("allgatherv", x, key, 0, out, algorithm, timeout)
                if got is not _SLOW:
                    return got  # type: ignore[no-any-return]
        return self._start(self._gatherv("allgatherv", x, None, counts, True, out, algorithm,
                                         timeout, params, displs), True)


    # -- alltoall ------------------------------------------------------------------------------
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
                  rdispls: Any = None, out: Any = None, algorithm: str | None = None,
                  timeout: float | None = None, **params: Any) -> np.ndarray:
        """Segments of ``x`` (rows from ``sdispls``) to each rank; the segment from rank j
        lands at row ``rdispls[j]`` (back to back in rank order if None)."""
        if not params and recvcounts is not None:
            key = vector_key(sendcounts, sdispls, recvcounts, rdispls)
            if key is not None:
                got = self._fast("alltoallv", x, key, 0, out, algorithm, timeout)
                if got is not _SLOW:
                    return got  # type: ignore[no-any-return]
        return self._start(self._alltoallv("alltoallv", x, sendcounts, sdispls, recvcounts,
                                           True, out, algorithm, timeout, params, rdispls), True)


    # -- reductions ----------------------------------------------------------------------------
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
        if not params and counts is not None:
            key = vector_key(counts)
            if key is not None:
                got = self._fast("reduce_scatter", x, (op, key[0]), 0, out, algorithm,
                                 timeout)
                if got is not _SLOW:
                    return got  # type: ignore[no-any-return]
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

    def _run_phase(self, spec: CallSpec, send: np.ndarray | None, recv: np.ndarray | None,
                   signature: object, timeout: float | None = None) -> None:
        """Run one schedule to completion with library-chosen algorithm (internal helper)."""
        seq = self._reserve()

        def one() -> Phases:
            yield self._execute(spec, send, recv, seq, 0, None, {}, timeout,
                                counts_signature=signature)

        Request(self, one(), True).wait()

    # -- objects -----------------------------------------------------------------------------
    # the object collectives (`objects`) are this class's methods as they are, one call less
    bcast_object = objects.bcast_object
    gather_object = objects.gather_object
    allgather_object = objects.allgather_object
    scatter_object = objects.scatter_object
    alltoall_object = objects.alltoall_object
    reduce_object = objects.reduce_object
    allreduce_object = objects.allreduce_object
    scan_object = objects.scan_object
    exscan_object = objects.exscan_object


__all__ = ["Comm", "Request", "wait_all", "CollopsError"]
