"""``mpi_native``: the MPI library's own collectives, offered beside collops' schedules.

Not a schedule: a record of this kind carries a `NativeAlgorithm` whose ``start`` posts MPI's
non-blocking collective (``MPI_Ibcast``, ``MPI_Iallreduce``, ``MPI_Ialltoallv``, …) and
returns an object the progress engine polls like an `Execution`. The records need the "mpi"
resource, so only the MPI transport offers them; they are registered when `collops.mpi` is
imported (`register`), which neither imports mpi4py nor starts MPI. Their cost is 0.9 × the
cheapest schedule's α-β estimate, so automatic selection prefers the vendor's collective
over MPI and users can compare or force either.

Data movement goes as bytes (counts and displacements scaled by the item size), so every
dtype moves. Reductions use MPI's built-in operators on MPI's built-in types where both fit
the dtype exactly — MINLOC/MAXLOC on (value, index) pairs only where the pair's layout is
that of an MPI pair type — and otherwise a user-defined ``MPI.Op`` running the collops `Op`
on numpy views (non-commutative operators are declared so, and MPI keeps rank order).

MPI cannot tell mismatched calls apart: a rank calling allreduce while another calls bcast
is undefined behaviour. So by default (parameter ``check=1``) the ranks first agree on the
call's fingerprint — on a node's `Board`, across nodes by `spanning.SpanningAgreement` — and
raise `CollectiveMismatch` if they differ, before the data collective is posted; ``check=0``
skips it. A timeout raises `CollectiveTimeout`; MPI does not say which ranks are missing.
An error MPI returns while a call starts or runs is a `TransportError` naming the call, the
MPI function, the rank and MPI's message; a rank of this node that died while the call waited
is `PeerFailed` (the transport's `check_peers`).

Ordering. MPI matches collectives on a communicator by the order they start on each rank, and
a call's later operations start lazily (its data collective once the agreement is in, a
broadcast's data once its envelope has told a non-root the size), at moments that differ
between ranks. So every operation of call ``seq`` goes on one MPI communicator of a small pool,
slot ``seq % COLLECTIVE_SLOTS`` (its phases and their agreements start in the call's own order,
the same on every rank), and a call starts nothing on its slot while an earlier call of the
same collops communicator that maps to that slot is still running on this rank — it waits,
polled like any execution, and the earlier call finishes without it. So the start order on
every MPI communicator is the calls' order on every rank, whatever the number of calls in
flight and whatever order they are waited in (`_earlier_holder`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import numpy as np

from ..algorithms import fingerprint as fp
from ..algorithms.native import NativeAlgorithm, NativeCall
from ..algorithms.registry import Algorithm, CostModel, Param, add_algorithm, algorithms
from ..algorithms.selection import rank_independent
from ..algorithms.spec import COLLECTIVES, CallSpec
from ..errors import CollectiveMismatch, CollectiveTimeout, ScheduleError
from ..ops import BUILTIN_OPS, Op
from ..schedule import Schedule
from ..transport.tags import CALL_BITS, CONTEXT_BITS, call_of_tag_base
from .board import Board, call_key
from .spanning import SpanningAgreement
from .transport import COLLECTIVE_SLOTS, MpiTransport, mpi_error

NAME = "mpi_native"
#: how much cheaper than the best schedule estimate MPI's own collective is assumed to be
NATIVE_DISCOUNT = 0.9
CHECK = Param("check", 1, "agree on the call's fingerprint first (on the node's board, or "
              "in log2(p) small messages across nodes), so mismatched calls raise instead of "
              "hanging; 0 skips it", minimum=0)


def mpi_function(collective: str) -> str:
    """The MPI function behind ``collective`` (``"allreduce"`` -> ``"MPI_Allreduce"``)."""
    return "MPI_" + collective.capitalize()


def register() -> None:
    """Add an ``mpi_native`` record to every collective."""
    from .blocking import bind  # it builds on this module
    native = NativeAlgorithm(start, bind, blocking_only=True)
    for collective in COLLECTIVES:
        add_algorithm(Algorithm(
            collective, NAME, f"the MPI library's own {mpi_function(collective)}", _no_schedule,
            params=(CHECK,), cost=native_cost, needs=frozenset({"mpi"}), native=native,
            transports=("mpi",),
            in_place=collective in ("allreduce", "reduce"),  # as MPI_IN_PLACE
            agrees_on_root=True))  # its fingerprint check (check=1) includes the root


def _no_schedule(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    raise ScheduleError(
        f"{spec.collective}[{NAME}] is the MPI library's own {mpi_function(spec.collective)}, "
        "not a schedule: it runs only over the MPI transport and cannot be built, validated, "
        "simulated or costed step by step")


def native_cost(spec: CallSpec, model: CostModel) -> float:
    """``NATIVE_DISCOUNT`` × the cheapest α-β estimate among the schedule algorithms."""
    best = min((a.estimate(spec, model) for a in algorithms(spec.collective)
                if not a.needs and a.eligible(spec)), default=float("inf"))
    return NATIVE_DISCOUNT * best


# -- datatypes and operators -------------------------------------------------------------------
_SCALAR_TYPES = {
    "b1": "C_BOOL", "i1": "INT8_T", "i2": "INT16_T", "i4": "INT32_T", "i8": "INT64_T",
    "u1": "UINT8_T", "u2": "UINT16_T", "u4": "UINT32_T", "u8": "UINT64_T", "f4": "FLOAT",
    "f8": "DOUBLE", "c8": "C_FLOAT_COMPLEX", "c16": "C_DOUBLE_COMPLEX",
}
#: dtype kinds MPI defines each built-in operator on (MPI 4.1, §6.9.2)
_OP_KINDS = {"SUM": "iufc", "PROD": "iufc", "MIN": "iuf", "MAX": "iuf", "LAND": "iub",
             "LOR": "iub", "LXOR": "iub", "BAND": "iub", "BOR": "iub", "BXOR": "iub"}
#: MPI's (value, int) pair types, by the value's dtype
_PAIR_TYPES = {"f4": "FLOAT_INT", "f8": "DOUBLE_INT", "i4": "TWOINT", "i2": "SHORT_INT"}
_REDUCTIONS: dict[tuple[int, np.dtype], tuple[Any, Any, Op]] = {}


def _builtin_type(MPI: Any, dtype: np.dtype, op_name: str) -> Any:
    """MPI's built-in datatype for ``dtype`` under built-in ``op_name``, or None."""
    if not dtype.isnative:
        return None
    if op_name in ("MINLOC", "MAXLOC"):
        return _pair_type(MPI, dtype)
    if dtype.kind not in _OP_KINDS[op_name]:
        return None
    if dtype.kind == "b" and op_name.startswith("B"):
        return MPI.BYTE  # MPI's bitwise operators take bytes, not C bools
    name = _SCALAR_TYPES.get(f"{dtype.kind}{dtype.itemsize}")
    return None if name is None else getattr(MPI, name)


def _pair_type(MPI: Any, dtype: np.dtype) -> Any:
    """MPI's pair type with exactly ``dtype``'s layout (value, then a C int index), or None."""
    if dtype.names != ("value", "index"):
        return None
    value, index = dtype.fields["value"], dtype.fields["index"]  # type: ignore[index]
    name = _PAIR_TYPES.get(f"{value[0].kind}{value[0].itemsize}")
    if name is None or index[0] != np.dtype(np.int32) or value[1] != 0:
        return None
    mpi_type = getattr(MPI, name)
    offset = max(value[0].itemsize, 4)
    if index[1] != offset or mpi_type.Get_extent()[1] != dtype.itemsize:
        return None
    return mpi_type


def mpi_reduction(MPI: Any, op: Op, dtype: np.dtype) -> tuple[Any, Any]:
    """(MPI datatype, MPI operator) computing ``op`` on ``dtype`` (cached)."""
    key = (id(op), dtype)
    cached = _REDUCTIONS.get(key)
    if cached is not None:
        return cached[0], cached[1]
    mpi_type = None
    if BUILTIN_OPS.get(op.name) is op:
        mpi_type = _builtin_type(MPI, dtype, op.name)
    if mpi_type is not None:
        mpi_op = getattr(MPI, op.name)
    else:
        mpi_type = MPI.BYTE.Create_contiguous(dtype.itemsize).Commit()
        mpi_op = MPI.Op.Create(_user_function(op, dtype), commute=op.commutative)
    _REDUCTIONS[key] = (mpi_type, mpi_op, op)
    return mpi_type, mpi_op


def _user_function(op: Op, dtype: np.dtype) -> Any:
    """MPI's user-function signature around ``op``: ``inout = in ∘ inout``."""
    def combine(inbuf: Any, inoutbuf: Any, datatype: Any) -> None:
        left = np.frombuffer(inbuf, dtype)
        into = np.frombuffer(inoutbuf, dtype)
        into[...] = op.fn(left, into)
    return combine


# -- MPI's collective for one call signature ------------------------------------------------
#: an MPI collective bound to one signature: ``operation(mc, send, recv)`` runs it on the MPI
#: communicator ``mc`` with this call's flat buffers (``send`` may be ``MPI.IN_PLACE``, either
#: may be None where the rank has none); blocking, it returns None, else MPI's request
Operation = Callable[[Any, Any, Any], Any]


def in_place(MPI: Any, send: np.ndarray | None, recv: np.ndarray | None) -> Any:
    """``send``, or MPI_IN_PLACE where it lies in ``recv``: MPI forbids a send buffer aliased
    with the receive buffer, and the only overlaps `Comm` passes on are in-place calls (``x``
    is ``out`` for the reductions that declare `Algorithm.in_place`, ``x`` exactly its own
    block of ``out`` for allgather and gather, the root's ``x`` its ``out`` for bcast)."""
    if send is not None and recv is not None and send.size and recv.size and (
            send is recv or np.may_share_memory(send, recv)):
        return MPI.IN_PLACE
    return send


def mpi_operation(MPI: Any, spec: CallSpec, rank: int, blocking: bool) -> Operation:
    """MPI's collective for ``spec`` on ``rank`` (``MPI_Allreduce``, or ``MPI_Iallreduce``
    when not ``blocking``), its counts, datatype and operator worked out once."""
    c = spec.collective
    name = mpi_function(c)[4:]
    if c in _REDUCING:
        return _reduction(MPI, spec, rank, name, blocking)
    return _movement(MPI, spec, rank, name, blocking)


def _method(name: str, blocking: bool) -> Callable[[Any], Any]:
    """``method(mc)``: MPI's collective ``name`` (its non-blocking ``I…`` form unless
    ``blocking``) of the MPI communicator ``mc``."""
    return attrgetter(name if blocking else "I" + name.lower())


def _movement(MPI: Any, spec: CallSpec, rank: int, name: str, blocking: bool) -> Operation:
    """Data movement, in bytes (every dtype moves)."""
    c, size, root, byte, skip = spec.collective, spec.itemsize, spec.root, MPI.BYTE, MPI.IN_PLACE
    counts = [n * size for n in spec.counts]
    displs = [d * size for d in spec.displs]
    method = _method(name, blocking)
    if c == "barrier":
        return lambda mc, s, r: method(mc)()
    if c == "bcast":
        n = spec.count * size
        is_root = rank == root

        def bcast(mc: Any, s: Any, r: Any) -> Any:
            if is_root and s is not None and s is not skip:
                r[: s.size] = s  # the root's data, unless it was given in place
            return method(mc)([r, n, byte], root)
        return bcast
    if c in ("scatter", "scatterv"):
        scatterv = _method("Scatterv", blocking)
        return lambda mc, s, r: scatterv(mc)(
            [s, counts, displs, byte] if rank == root else None, [r, counts[rank], byte], root)
    if c in ("gather", "gatherv", "allgather", "allgatherv"):
        mine = counts[rank] if counts else 0
        if c in ("allgather", "allgatherv"):
            if c == "allgather":
                allgather = _method("Allgather", blocking)
                return lambda mc, s, r: allgather(mc)(
                    s if s is skip else [s, mine, byte], [r, mine, byte])
            allgatherv = _method("Allgatherv", blocking)
            return lambda mc, s, r: allgatherv(mc)(
                s if s is skip else [s, mine, byte], [r, counts, displs, byte])
        gatherv = _method("Gatherv", blocking)
        return lambda mc, s, r: gatherv(mc)(
            s if s is skip else [s, mine, byte],
            [r, counts, displs, byte] if rank == root else None, root)
    if c == "alltoall":
        each = spec.sendcounts[0] * size if spec.sendcounts else 0
        alltoall = _method("Alltoall", blocking)
        return lambda mc, s, r: alltoall(mc)([s, each, byte], [r, each, byte])
    if c == "alltoallv":
        send_side = ([n * size for n in spec.sendcounts], [d * size for d in spec.sdispls])
        recv_side = ([n * size for n in spec.recvcounts], [d * size for d in spec.rdispls])
        alltoallv = _method("Alltoallv", blocking)
        return lambda mc, s, r: alltoallv(mc)(
            [s, *send_side, byte], [r, *recv_side, byte])
    raise ValueError(f"{c} is not a data-movement collective")


def _reduction(MPI: Any, spec: CallSpec, rank: int, name: str, blocking: bool) -> Operation:
    """A reducing collective with a matching datatype and operator."""
    assert spec.op is not None
    c, skip = spec.collective, MPI.IN_PLACE
    mpi_type, mpi_op = mpi_reduction(MPI, spec.op, spec.dtype)
    n = spec.count
    method = _method(name, blocking)
    if c == "reduce":
        root = spec.root
        if rank == root:
            return lambda mc, s, r: method(mc)(
                s if s is skip else [s, n, mpi_type], [r, n, mpi_type], mpi_op, root)
        return lambda mc, s, r: method(mc)([s, n, mpi_type], None, mpi_op, root)
    if c in ("allreduce", "scan", "exscan"):
        return lambda mc, s, r: method(mc)(
            s if s is skip else [s, n, mpi_type], [r, n, mpi_type], mpi_op)
    if c == "reduce_scatter_block":
        # mpi4py states the send side per block, as MPI's own recvcount
        return lambda mc, s, r: method(mc)([s, n, mpi_type], [r, n, mpi_type], mpi_op)
    if c == "reduce_scatter":
        total, mine, counts = spec.total, spec.counts[rank], list(spec.counts)
        return lambda mc, s, r: method(mc)(
            [s, total, mpi_type], [r, mine, mpi_type], counts, mpi_op)
    raise ValueError(f"{c} is not a reducing collective")


_REDUCING = frozenset({"reduce", "allreduce", "reduce_scatter", "reduce_scatter_block", "scan",
                       "exscan"})
_OPERATIONS: dict[tuple[CallSpec, int, bool], Operation] = {}


@dataclass(frozen=True)
class Flavour:
    """A kind of MPI-library collective: its algorithm's name (in fingerprints and errors)
    and ``operation(MPI, call, blocking)``, the `Operation` running a call of its signature
    (non-blocking, it returns MPI's request, or a list of steps that each start one)."""

    name: str
    operation: Callable[[Any, NativeCall, bool], Operation]
    #: ``ready(call, mc)``: whether a non-blocking call's operation may be made on ``mc`` now
    #: (what it needs besides ``mc`` is made, begun by the first call that asks); None: always
    ready: Callable[[NativeCall, Any], bool] | None = None


def _native_operation(MPI: Any, call: NativeCall, blocking: bool) -> Operation:
    return cached_operation(MPI, call.spec, call.rank, blocking)


MPI_NATIVE = Flavour(NAME, _native_operation)


def cached_operation(MPI: Any, spec: CallSpec, rank: int, blocking: bool) -> Operation:
    """`mpi_operation`, made once per signature."""
    key = (spec, rank, blocking)
    operation = _OPERATIONS.get(key)
    if operation is None:
        if len(_OPERATIONS) >= 1024:
            _OPERATIONS.clear()
        operation = _OPERATIONS[key] = mpi_operation(MPI, spec, rank, blocking)
    return operation


def call_fingerprint(spec: CallSpec, name: str = NAME) -> int:
    """The fingerprint of a call of algorithm ``name``, from what every rank agrees on."""
    agreed = rank_independent(spec)
    signature = (agreed.count, agreed.counts, spec.op.name if spec.op else None)
    return fp.fingerprint(spec.collective, name, spec.root, spec.dtype, signature, spec.op)


class NativeExecution:
    """MPI's non-blocking collective, polled like an `Execution` (``poll``, ``left``).

    Its MPI operations go on ``mc``, the MPI communicator of slot ``seq % COLLECTIVE_SLOTS``;
    they start only once no earlier call on that slot is running here (`_earlier_holder`),
    so until then ``request`` is None and `poll` tries again.
    """

    __slots__ = ("transport", "mc", "spec", "rank", "send", "recv", "request", "left",
                 "deadline", "timeout", "fingerprint", "agreement", "check", "call", "seq",
                 "context", "waiting_for", "failed", "board", "key", "posted",
                 "waking", "flavour", "steps", "what", "phase", "comms_made")

    def __init__(self, transport: MpiTransport, mc: Any, spec: CallSpec, rank: int,
                 send: np.ndarray | None, recv: np.ndarray | None, check: bool,
                 timeout: float | None, call: NativeCall | None = None, seq: int = 0,
                 phase: int = 0, board: Board | None = None,
                 flavour: Flavour = MPI_NATIVE) -> None:
        self.transport = transport
        self.mc = mc
        self.spec = spec
        self.rank = rank
        self.send = send
        self.recv = recv
        self.left = 1
        self.timeout = timeout
        self.deadline = None if timeout is None else time.monotonic() + timeout
        if flavour.ready is not None and call is not None and \
                transport.due(call.group, call.context):
            # an idup's communicator before its first blocking call (`made_due`): what the
            # flavour needs is not made, MPI's own collective over all ranks does its work
            # (decided here, where every rank starts the call, not when it posts)
            flavour = Flavour(flavour.name, _native_operation)
        self.flavour = flavour
        self.what = f"{spec.collective}[{flavour.name}]"
        self.fingerprint = call_fingerprint(spec, flavour.name)
        #: the steps of a call that runs MPI operations one after the other (``hier``)
        self.steps: deque[Any] = deque()
        #: the agreement with the ranks of other nodes, while it runs (no `Board` then)
        self.agreement: SpanningAgreement | None = None
        self.phase = phase
        #: where this node's ranks post their calls: they agree there then
        self.board = board if check else None
        self.check = check and self.board is None
        self.key = call_key(seq, phase, False)
        #: this rank's entry is on the board; the others' are awaited before MPI's call
        self.posted = False
        #: in the transport's wakers while it waits for the board (`ready`)
        self.waking = False
        self.call = call
        self.seq = seq
        self.context = 0 if call is None else call.context
        #: the earlier call this one waits for before starting on its MPI communicator
        self.waiting_for: int | None = None
        self.failed = False
        self.request: Any = None
        #: what the flavour needs besides ``mc`` is made (`Flavour.ready`)
        self.comms_made = False
        try:
            self._begin()
        except transport._MPI.Exception as exc:
            raise self._mpi_error(exc) from exc

    def _mpi_error(self, exc: Any) -> Exception:
        """The collops error for MPI's error ``exc`` in this call (which then has failed)."""
        self.failed = True
        self._unwake()
        if self.request is not None:
            self.transport.unwatch(self.request)
        step = "agreeing on the call" if self.agreement is not None else \
            mpi_function(self.spec.collective)
        return mpi_error(self.rank, f"{self.what} call #{self.seq} ({step})",
                         exc)

    def _begin(self) -> bool:
        """Start the first MPI operation unless an earlier call still holds the slot, or (on
        a node's board) the other ranks have not posted this call yet."""
        if self.mc is None:  # the communicator's first call: its pool is being made
            assert self.call is not None
            self.mc = self.transport.collective_comm(self.call.group, self.call.context,
                                                     self.seq % COLLECTIVE_SLOTS)
            if self.mc is None:
                return False
        if not self.comms_made:
            ready = self.flavour.ready
            if ready is not None and self.call is not None and not ready(self.call, self.mc):
                return False
            self.comms_made = True
        board = self.board
        if not self.posted:
            if self.call is not None:
                self.waiting_for = _earlier_holder(self.call, self.seq, self)
                if self.waiting_for is not None:
                    return False
            if board is not None:
                board.refuse(self.key, f"{self.what} call #{self.seq}")
                if not self._settled():
                    self._wake()
                    return False  # this rank's deferred call is not checked yet
                board.post(self.key, self.fingerprint)
                self.posted = True
        if board is not None:
            others = (r for r in range(self.spec.size) if r != self.rank)
            posted, mismatch = board.compare(self.key, self.fingerprint, others)
            if mismatch is not None:
                board.mismatched(mismatch, self.rank, self.key, self.fingerprint,
                                 f"{self.what}, checked before "
                                 f"{mpi_function(self.spec.collective)}")
            if not posted:
                self._wake()
                return False
            self._unwake()
            self.request = self._post()
        elif self.check:
            if self.agreement is None:
                assert self.call is not None
                self.agreement = SpanningAgreement(
                    self.transport, self.call.group, self.rank, self.context, self.seq,
                    self.phase, self.fingerprint, False,
                    f"{self.what}, checked before {mpi_function(self.spec.collective)}")
            if not self.agreement.poll():
                return False
            self.agreement = None
            self.request = self._post()
        else:
            self.request = self._post()
        self._watch()
        return True

    def _settled(self) -> bool:
        """Whether this rank's deferred call (`Board.settle`) is checked (raises on a
        mismatch)."""
        assert self.board is not None
        others = [r for r in range(self.spec.size) if r != self.rank]
        return self.board.settle(others, self.rank, f"call #{self.seq} ({self.what})",
                                 self.key)

    def _wake(self) -> None:
        """Be woken when the board changes (`ready`)."""
        if not self.waking:
            self.transport._wakers.append(self)
            self.waking = True

    def ready(self) -> bool:
        """Whether the board shows the other ranks' entries for this call (or a mismatch)."""
        assert self.board is not None
        if not self.posted:
            try:
                return self._settled()
            except CollectiveMismatch:
                return True
        others = (r for r in range(self.spec.size) if r != self.rank)
        posted, mismatch = self.board.compare(self.key, self.fingerprint, others)
        return posted or mismatch is not None

    def not_posted(self) -> list[int]:
        """The world ranks whose entries for this call the board does not show yet."""
        assert self.board is not None
        others = (r for r in range(self.spec.size) if r != self.rank)
        group = range(self.spec.size) if self.call is None else self.call.group
        return [group[r] for r in self.board.not_posted(self.key, others)]

    def _unwake(self) -> None:
        if self.waking:
            self.transport._wakers.remove(self)
            self.waking = False

    def _watch(self) -> None:
        self.transport.watch(self.request, () if self.call is None else self.call.group)

    def _post(self) -> Any:
        """Start MPI's operation (the first of several, for a call made of steps)."""
        MPI = self.transport._MPI
        if self.flavour is MPI_NATIVE:
            operation = cached_operation(MPI, self.spec, self.rank, False)
        else:
            assert self.call is not None
            operation = self.flavour.operation(MPI, self.call, False)
        got = operation(self.mc, in_place(MPI, self.send, self.recv), self.recv)
        if not isinstance(got, list):
            return got
        self.steps.extend(got)
        return self._next_step()

    def _next_step(self) -> Any:
        """Start the next step that needs MPI (local steps run at once); None: none left."""
        while self.steps:
            request = self.steps.popleft()()
            if request is not None:
                return request
        return None

    def poll(self) -> bool:
        """Advance without blocking; True once MPI's collective has completed."""
        if self.left == 0:
            return True
        try:
            if self.request is not None or self._begin():
                while self.request is None or self.request.Test():
                    if self.request is not None:
                        self.transport.unwatch(self.request)
                    self.request = self._next_step()
                    if self.request is None:
                        self.left = 0
                        return True
                    self._watch()
            if self.deadline is not None and time.monotonic() > self.deadline:
                if self.request is not None:
                    self.transport.unwatch(self.request)
                error = self.timeout_error()
                if self.agreement is not None:  # the late ranks are told
                    self.agreement.give_up(error)
                raise error
        except self.transport._MPI.Exception as exc:
            raise self._mpi_error(exc) from exc
        except BaseException:
            self.failed = True
            self._unwake()
            raise
        return False

    def timeout_error(self) -> CollectiveTimeout:
        """The error describing where this call stopped."""
        if self.mc is None or not self.comms_made:
            where = "for its communicator's MPI communicators to be made (MPI_Comm_idup)"
        elif self.agreement is not None:
            where = "agreeing on the call with the ranks of other nodes"
        elif self.request is None and self.posted:
            where = "for the other ranks of this node to start it"
        elif self.request is None:
            where = (f"for the earlier call #{self.waiting_for} on this communicator, which "
                     f"shares its MPI communicator, to finish before starting "
                     f"{mpi_function(self.spec.collective)}")
        else:
            where = f"in MPI's non-blocking {mpi_function(self.spec.collective)}"
        return CollectiveTimeout(
            f"rank {self.rank}: {self.what} did not complete within "
            f"{self.timeout} s; waiting {where} over {self.spec.size} ranks (MPI does not say "
            "which ranks it has not heard from)")


def start(call: NativeCall, send: np.ndarray | None, recv: np.ndarray | None, seq: int,
          phase: int, timeout: float | None, flavour: Flavour = MPI_NATIVE) -> NativeExecution:
    """Start ``call`` (its number ``seq``) with MPI's own collective.

    ``timeout`` is already resolved by the caller (the call's, else the communicator's, else
    ``COLLOPS_TIMEOUT``); None means no limit.
    """
    transport, spec = call.transport, call.spec
    if not isinstance(transport, MpiTransport):
        raise ScheduleError(f"{spec.collective}[{flavour.name}] needs the MPI transport, not "
                            f"{call.transport_name}")
    # every operation of the call on one MPI communicator, started in the call's order; a
    # call waits for the earlier calls sharing that communicator (see the module's "Ordering");
    # None while the communicator's pool is being made (its first call: `collective_comm`)
    mc = transport.collective_comm(call.group, call.context, seq % COLLECTIVE_SLOTS)
    return NativeExecution(transport, mc, spec, call.rank, send, recv,
                           bool(call.params.get("check", 1)), timeout, call, seq, phase,
                           transport.board(call.group, call.context), flavour)


# -- ordering: which earlier call still holds an MPI communicator -------------------------------
_CALL_MASK = (1 << CALL_BITS) - 1
_CONTEXT_MASK = (1 << CONTEXT_BITS) - 1


def _call_of(ex: Any) -> tuple[int, int] | None:
    """(context, call number mod 2**CALL_BITS) of an execution in the progress engine."""
    if isinstance(ex, NativeExecution):
        return ex.context & _CONTEXT_MASK, ex.seq & _CALL_MASK
    tag_base = getattr(ex, "tag_base", None)  # a schedule's `Execution`
    if isinstance(tag_base, int):
        return call_of_tag_base(tag_base)
    return None


def _running(ex: Any, now: float) -> bool:
    """Whether ``ex`` may still lead its call to start MPI operations (not failed, not past
    its deadline: such a call raises when polled and starts nothing more)."""
    if getattr(ex, "failed", False):
        return False
    deadline = ex.deadline
    return deadline is None or now <= deadline


def _earlier_holder(call: NativeCall, seq: int, me: Any) -> int | None:
    """The number of the call `earlier_execution` finds (None if there is none)."""
    ex = earlier_execution(call, seq, me)
    if ex is None:
        return None
    other = _call_of(ex)
    assert other is not None
    return seq - ((seq & _CALL_MASK) - other[1]) % (1 << CALL_BITS)


def earlier_execution(call: NativeCall, seq: int, me: Any) -> Any:
    """The execution of an earlier call on ``call``'s communicator using slot
    ``seq % COLLECTIVE_SLOTS`` that is still running on this rank (None if there is none).

    A running call always has its current phase among the progress engine's active
    executions: a request registers a phase that does not complete at once, and the next
    phase starts in the same step that sees the previous one complete. Only when call ``seq``
    reuses a slot can there be such a call; the scan is over the few executions in flight.
    """
    if seq < COLLECTIVE_SLOTS:
        return None
    context = call.context & _CONTEXT_MASK
    mine = seq & _CALL_MASK
    now = time.monotonic()
    for ex in call.progress.active:
        if ex is me:
            continue
        other = _call_of(ex)
        if other is None or other[0] != context:
            continue
        behind = (mine - other[1]) & _CALL_MASK
        if 0 < behind < (1 << (CALL_BITS - 1)) and behind % COLLECTIVE_SLOTS == 0 \
                and _running(ex, now):
            return ex
    return None
