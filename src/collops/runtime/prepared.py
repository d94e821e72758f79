"""One prepared call per signature: validated once, its algorithm chosen once, its runner
bound once, serving blocking, non-blocking and persistent calls alike (see `Comm`)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..algorithms.registry import Algorithm
from ..algorithms.spec import CallSpec
from ..errors import ArgumentError
from ..transport.tags import make_tag_base
from .agreement import Agreed
from .cache import SHARED, BoundedCache
from .engine import CallInfo, Execution, Plan
from .envelope import VIEWS_LIMIT

if TYPE_CHECKING:
    from .commbase import CommBase

#: a compiled whole call bound to one signature: (op, root, call, algorithm name, prepared)
BoundEntry = tuple[Any, int, Callable[..., Any], "str | None", "PreparedCall"]
#: what `Comm._bound_calls` files a bound call under: its collective, or (collective, the
#: algorithm the calls ask for by name)
BoundKey = str | tuple[str, str]

_UNBOUND: Any = object()  # a runner not asked for yet


def _empty(dtype: np.dtype) -> np.ndarray:
    """A shared zero-length array of ``dtype``."""
    arr = SHARED.get(("empty", dtype))
    if arr is None:
        arr = SHARED.put(("empty", dtype), np.empty(0, dtype))
    return arr  # type: ignore[no-any-return]


class _Ran:
    """A phase its blocking runner has run already, as an execution (complete)."""

    left = 0
    deadline = None

    def poll(self) -> bool:
        """Complete."""
        return True


_RAN = _Ran()


class PreparedCall:
    """Everything a call signature needs, worked out once: the spec, the chosen algorithm
    with its plan, call info and parameters, the blocking runner bound to it, and — for the
    blocking call the signature came from — the result's shape and the envelope it reuses.

    `start` begins one phase of a call (what a non-blocking or persistent call yields),
    `run_blocking` runs one to completion by the route chosen when the runner was bound: the
    algorithm's own blocking runner (compiled where it can be), else its schedule.
    """

    __slots__ = ("spec", "signature", "algorithm", "plan", "info", "params", "name",
                 "agree", "length_prefix", "runner", "compiled", "hot", "blocking", "shape",
                 "receives",
                 "n_out", "none_on_this_rank", "zeros", "scratch", "send", "recv", "header", "head",
                 "views", "copied", "native_call")

    def __init__(self, spec: CallSpec, signature: object, algorithm: Algorithm,
                 plan: Plan | None, info: CallInfo, params: dict[str, Any]) -> None:
        self.spec = spec
        self.signature = signature
        self.algorithm = algorithm
        self.plan = plan
        self.info = info
        self.params = params
        self.name = algorithm.name
        #: a rooted first phase: the members agree on the call before it starts (`agreement`)
        self.agree = False
        #: an envelope's header layout for the bound runner (`NativeAlgorithm.bind`)
        self.length_prefix: tuple[int, int] | None = None
        #: the blocking runner (None: the schedule runs; `_UNBOUND`: not asked for yet), the
        #: compiled runner behind it when it can run whole calls, and its `Comm._bound_calls`
        #: entry
        self.runner: Callable[..., None] | None = _UNBOUND
        self.compiled: Any = None
        self.hot: BoundEntry | None = None
        #: whether a blocking call of some arguments uses it, and that call's result: its
        #: shape, whether this rank gets one, its elements
        self.blocking = False
        self.shape: tuple[int, ...] = ()
        self.receives = False
        self.n_out = 0
        self.none_on_this_rank = False
        #: whether a result the call allocates starts as zeros (gaps no block fills)
        self.zeros = False
        #: an envelope the call reuses (bcast, scatter), the parts of it sent and received,
        #: the header last written into it and typed views into it
        self.scratch: np.ndarray | None = None
        self.send: np.ndarray | None = None
        self.recv: np.ndarray | None = None
        self.header: np.ndarray | None = None
        self.head: np.ndarray | None = None
        self.views = BoundedCache(VIEWS_LIMIT)
        #: a blocking in-place call's copy of its ``x`` (`own_send`), for an algorithm not
        #: right with ``x`` as ``out``
        self.copied: np.ndarray | None = None
        #: what a native algorithm knows of the call (`CommBase._native_call`), made once
        self.native_call: Any = None

    def own_send(self, x: np.ndarray) -> np.ndarray:
        """``x`` copied into this call's own send buffer (made once, then reused: a blocking
        call completes before the next begins), for an in-place call whose algorithm needs
        its input apart from its output."""
        copied = self.copied
        if copied is None or copied.shape != x.shape or copied.dtype != x.dtype:
            copied = self.copied = np.empty_like(x, order="C")
        copied[...] = x
        return copied

    @property
    def checks_root(self) -> bool:
        """Whether the algorithm checks a rooted call's root itself as it runs (a native one
        that `agrees_on_root`): no phase before it needs to."""
        return self.algorithm.native is not None and self.algorithm.agrees_on_root

    def for_blocking(self, shape: tuple[int, ...], receives: bool,
                     none_on_this_rank: bool = False, agree: bool = False,
                     zeros: bool = False) -> PreparedCall:
        """This call, prepared for the blocking calls of one argument signature as well: it
        learns its result's ``shape`` (and binds its runner anew). A signature whose spec
        already serves another (an array of another shape and as many elements) gets a copy
        of its own, since a bound runner is bound to one shape."""
        call = copy.copy(self) if self.blocking else self
        call.runner, call.compiled, call.hot = _UNBOUND, None, None
        call.blocking, call.shape, call.receives, call.agree = True, shape, receives, agree
        call.n_out = int(np.prod(shape, dtype=np.int64)) if receives else 0
        call.none_on_this_rank = none_on_this_rank
        call.zeros = zeros
        call.views = BoundedCache(VIEWS_LIMIT)
        call.copied = None
        return call

    def bind(self, comm: CommBase) -> Callable[..., None] | None:
        """The blocking runner, bound on first use: the algorithm's own (native algorithms
        with one, unless the call needs a root agreement the algorithm does not make), else
        None (the schedule runs)."""
        if self.runner is _UNBOUND:
            alg = self.algorithm
            bind = None if alg.native is None else alg.native.bind
            if bind is None or (self.agree and not alg.agrees_on_root):
                self.runner = None
            else:
                native = comm._native_call(self.spec, self.params)
                if alg.native is not None and alg.native.reported_as is not None:
                    self.name = alg.native.reported_as(self.spec, comm.rank)
                self.runner = (bind(native) if self.length_prefix is None
                               else bind(native, length_prefix=self.length_prefix))
                owner = getattr(self.runner, "__self__", None)
                self.compiled = owner if hasattr(owner, "bind_call") else None
        return self.runner

    def begin(self, comm: CommBase, send: np.ndarray | None, recv: np.ndarray | None,
              seq: int, phase: int, timeout: float | None) -> Execution:
        """Start the algorithm on ``send`` / ``recv`` as phase ``phase`` of call ``seq``."""
        alg = self.algorithm
        if alg.native is not None:
            native = self.native_call
            if native is None:  # a call is prepared on one communicator: made once
                native = self.native_call = comm._native_call(self.spec, self.params)
            return alg.native.start(  # type: ignore[return-value]
                native, send, recv, seq, phase, timeout)
        plan = self.plan
        assert plan is not None
        sched = plan.schedule
        dt = self.spec.dtype
        send_area = send.reshape(-1) if send is not None else _empty(dt)
        recv_area = recv.reshape(-1) if recv is not None else _empty(dt)
        if send_area.size < sched.send_count or recv_area.size < sched.recv_count:
            raise ArgumentError(self.spec.collective, "buffer",
                                (send_area.size, recv_area.size),
                                f"too small for the schedule ({sched.send_count}, "
                                f"{sched.recv_count})", comm.rank)
        tmp = np.empty(sched.tmp_count, dt) if sched.tmp_count else _empty(dt)
        return Execution(plan, (send_area, recv_area, tmp), comm.transport,
                         make_tag_base(comm.context, seq, phase), self.info, self.spec.op,
                         timeout, comm._group)

    def start(self, comm: CommBase, send: np.ndarray | None, recv: np.ndarray | None,
              seq: int, phase: int, timeout: float | None, in_place: bool = False,
              agree: bool = False) -> Execution:
        """Begin phase ``phase`` of call ``seq``; ``in_place``: ``send`` is ``recv``, copied
        first unless the algorithm needs no copy; ``agree``: the first rooted phase of a call,
        which starts once the members have agreed on the call (`agreement`) unless the
        algorithm checks that itself."""
        alg = self.algorithm
        comm.last_algorithm = self.name
        if in_place and not alg.in_place and send is not None:
            send = send.copy()
        if comm.blocking_phase and alg.native is not None and alg.native.blocking_only:
            runner = self.runner if self.runner is not _UNBOUND else self.bind(comm)
            assert runner is not None
            runner(send, recv, seq, timeout, phase)
            return _RAN  # type: ignore[return-value]
        # a native algorithm starts at once: its protocol orders the calls by when they start
        if agree and not alg.agrees_on_root and alg.native is None and comm.size > 1:
            return Agreed(comm, self.info, seq, phase, timeout,  # type: ignore[return-value]
                          lambda: self.begin(comm, send, recv, seq, phase, timeout))
        return self.begin(comm, send, recv, seq, phase, timeout)

    def run_blocking(self, comm: CommBase, send: np.ndarray | None, recv: np.ndarray | None,
                     seq: int, timeout: float | None, phase: int = 0, confirm: bool = True
                     ) -> None:
        """Run phase ``phase`` of call ``seq`` to completion (``recv`` flat, or None);
        ``confirm`` false: a bound runner's root need not confirm its readers found the call
        (a bcast's or scatter's envelope whose data phase checks the root itself)."""
        runner = self.runner
        if runner is _UNBOUND:
            runner = self.bind(comm)
        comm.last_algorithm = self.name
        if runner is not None:
            if confirm:
                runner(send, recv, seq, timeout, phase)
            else:
                runner(send, recv, seq, timeout, phase, False)
            return
        ex = self.start(comm, send, recv, seq, phase, timeout, agree=self.agree)
        if not ex.poll():
            comm._progress.wait(ex)
