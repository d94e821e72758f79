"""``shm_direct``: small collectives through shared memory, without messages.

Not a schedule: like ``mpi_native`` a record of this kind has a ``native`` callable, here
one that runs the call through the communicator's *direct area* in the shared-memory job
segment (see `collops.shm.direct_area`): each rank copies its contribution once into
its own slot and announces it; each rank then reads the slots it needs straight from shared
memory — a broadcast reads the root's, an allreduce every rank's, folded in rank order so
every rank gets the same bits, whatever the operator. One synchronisation per call replaces
the log p rounds of messages of a tree or recursive doubling; what is left of the cost is
the Python to copy a few bytes, which is why these are the default for small calls on one
machine (the intra-node collectives of MPICH and UCC's ``tl/shm`` work the same way).

The records need the "shm_direct" resource, which the shared-memory transport offers for
communicators whose context has an area (the first ``direct_areas``, 32 by default), and
a call's per-rank contribution must fit a slot (``direct_bytes``, 64 KiB by default: the
whole send buffer for ``scatter``, ``alltoall`` and ``reduce_scatter_block``). They are
registered when `collops.shm` is imported (`register`).

Their cost for selection is half an α (one synchronisation, no message) plus the bytes
read at the model's β and reduced at its γ. The simulator and the cost tables cannot
replay them step by step, as they are not schedules.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .. import config
from ..algorithms import fingerprint as fp
from ..algorithms import tuning
from ..algorithms.native import NativeAlgorithm, NativeCall
from ..algorithms.registry import Algorithm, CostModel, Restriction, add_algorithm
from ..algorithms.spec import CallSpec
from ..errors import ScheduleError
from ..ops import compiled_kernel, use_compiled_kernels
from ..schedule import Schedule
from ..transport.tags import call_tag
from . import direct_roles as roles
from . import direct_vector as vector
from .direct_area import (
    DirectArea,
    call_number,
    held_word,
    slot_capacity,
    slot_of,
)
from .direct_reads import Reader, make_reader, read_plan
from .direct_roles import Role, contribution_bytes
from .execution import AreaExecution
from .segment import DIRECT_SLOTS
from .transport import ShmTransport
from .waiting import SLEEP, SPIN

try:
    from . import _direct
except ImportError:  # built without a C compiler: `DirectExecution` does the same work
    _direct = None  # type: ignore[assignment]
else:  # every fold in rank order, anywhere, takes the compiled kernels (`ops`)
    use_compiled_kernels(_direct.combine_into, lambda: config.settings.compiled)

NAME = "shm_direct"
#: the collectives right with ``x`` overlapping ``out`` (`Algorithm.in_place`): every rank's
#: input is copied whole into its slot before anyone writes a result, and every result is
#: read from the slots (`read_plan`: folds and copies, no part read from ``x``)
IN_PLACE = frozenset({"allreduce", "reduce", "scan", "exscan", "reduce_scatter_block",
                      "allgather", "gather", "alltoall"})
RESOURCE = "shm_direct"
SUPPORTED = ("barrier", "bcast", "scatter", "gather", "allgather", "alltoall", "reduce",
             "allreduce", "reduce_scatter_block", "scan", "exscan", *vector.SUPPORTED)
#: the transport component that runs it
TRANSPORTS = ("shm",)


def register() -> None:
    """Add an ``shm_direct`` record to every supported collective."""
    native = NativeAlgorithm(start, bind)
    for collective in SUPPORTED:
        add_algorithm(Algorithm(
            collective, NAME, f"{collective} through shared-memory slots: one copy in, reads "
            "straight from the peers' slots, no messages", _no_schedule, restrictions=(FITS,),
            cost=direct_cost, needs=frozenset({RESOURCE}), native=native,
            transports=TRANSPORTS, in_place=collective in IN_PLACE, agrees_on_root=True))


def fits_a_slot(spec: CallSpec) -> bool:
    """Whether each rank's contribution to ``spec`` fits a direct slot of this job."""
    return contribution_bytes(spec) <= slot_capacity()


#: the restriction of every ``shm_direct`` record
FITS = Restriction("fits", "each rank's contribution fits its direct slot (64 KiB unless the "
                   "job's layout says otherwise)", fits_a_slot)


def _no_schedule(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    raise ScheduleError(
        f"{spec.collective}[{NAME}] reads and writes shared memory directly; it is not a "
        "schedule and cannot be built, validated, simulated or costed step by step")


def direct_cost(spec: CallSpec, model: CostModel) -> float:
    """Half an α plus half of what the bytes read from the peers' slots (β) and folded in
    (γ) cost a message.

    Copying into this rank's own slot overlaps with the peers doing the same, as a message's
    copy into the transport does, which the schedules' costs do not count either. The reads
    and folds count half: they are one copy (a message's bytes are copied in and out) and run
    in C.
    """
    c, n, p = vector.regular(spec.collective), contribution_bytes(spec), spec.size
    if c in ("scatter", "alltoall", "reduce_scatter_block"):
        n //= max(p, 1)  # what one rank reads of a whole-buffer contribution
    reads = {"bcast": n, "scatter": n, "gather": n * (p - 1), "reduce": n * (p - 1),
             "scan": n * (p - 1) / 2, "exscan": n * (p - 1) / 2}.get(c, n * (p - 1))
    reduced = reads if spec.op is not None else 0
    return 0.5 * (model.alpha + reads * model.beta + reduced * model.gamma)


def _write(area: DirectArea, spec: CallSpec, slot: int, send: np.ndarray | None) -> None:
    nbytes = roles.slot_bytes(spec, area.index)
    if send is not None and nbytes:
        if spec.collective == "scatterv" and not vector.packed(spec):
            send = vector.pack(spec, send.reshape(-1))
        area.slots[area.index][slot][:nbytes] = send.reshape(-1).view(np.uint8)[:nbytes]


@functools.lru_cache(maxsize=1024)
def call_fingerprint(spec: CallSpec, name: str = NAME) -> int:
    """The fingerprint of a call through the direct areas by algorithm ``name``, from what
    every rank agrees on."""
    counts = spec.counts if spec.collective in vector.REGULAR else spec.count
    return fp.fingerprint(spec.collective, name, spec.root, spec.dtype,
                          (counts, spec.op.name if spec.op else None), spec.op)


class DirectExecution(AreaExecution):
    """A direct call in flight (`AreaExecution`): write the contribution, read the peers'
    slots, and at a bcast's or scatter's root wait until every reader found the call (unless
    ``confirm`` is false: a phase that follows checks the root, see `bind`)."""

    __slots__ = ("spec", "rank", "send", "recv", "k", "slot", "word", "written", "read", "role",
                 "write_k", "confirms", "acknowledged")

    def __init__(self, transport: ShmTransport, area: DirectArea, spec: CallSpec, rank: int,
                 send: np.ndarray | None, recv: np.ndarray | None, seq: int, phase: int,
                 context: int, timeout: float | None, confirm: bool = True,
                 published: bool = False) -> None:
        self.role = role = _role(area, spec, rank)
        area.settle_before(seq, phase, role.fingerprint, timeout)
        self.spec = spec
        self.rank = rank
        self.send = None if send is None else send.reshape(-1)  # views of the caller's
        self.recv = None if recv is None else recv.reshape(-1)  # contiguous arrays
        self.k = call_number(seq, phase)
        self.slot = slot_of(seq, phase)
        self.confirms = role.confirms and confirm
        self.word = held_word(self.k, role.fingerprint)
        # ``published``: the compiled runner wrote this rank's slot already (`PostedCall`)
        self.written = published or not role.publishes
        self.read = self.acknowledged = False
        area.inflight += 1
        if published and rank in role.awaits:
            area.own_pending[self.slot] = self.k
        if not self.written:
            area.queue_write(self, self.k)
        self._begin(transport, area, role.what, call_tag(context, seq, phase), timeout)
        self.poll()

    def _may_write(self) -> bool:
        """Earlier calls' contributions first (in the order this rank made the calls)."""
        return self.area.unwritten[0] is self and self.area.writable(self.slot)

    def _ready(self) -> bool:
        if not self.written:
            return self._may_write()
        if not self.read:
            return not self.area.missing(self.slot, self.word, self.role.others)
        return not self.confirms or not self.area.unconfirmed(self.slot)

    def _awaited(self) -> list[int]:
        area, slot = self.area, self.slot
        if not self.written:
            return area.unacknowledged(slot)
        if not self.read:
            return area.missing(slot, self.word, self.role.others)
        return area.unconfirmed(slot) if self.confirms else []

    def _expect(self) -> tuple[int, int, int]:
        return self.slot, self.word, self.role.fingerprint

    def _declares(self) -> bool:
        return not self.role.publishes

    def _advance(self, spin: float) -> bool:
        area, slot, k, role = self.area, self.slot, self.k, self.role
        if not self.written:
            if not self._may_write():
                return self._stuck()
            _write(area, self.spec, slot, self.send)
            area.publish(slot, k, role.fingerprint, role.readers)
            if self.rank in role.awaits:
                area.own_pending[slot] = k
            area.unwritten.popleft()
            self.written = True
        if not self.read:
            if area.missing(slot, self.word, role.others):
                return self._stuck()
            if role.announces:
                area.announce(slot, k, role.others)
            _reader_for(area, self.spec, self.rank)(slot, self.send, self.recv)
            self.read = True
        if not self.acknowledged:
            area.acknowledge(slot, k, role.others)
            self.acknowledged = True
        if self.confirms and area.unconfirmed(slot):
            return self._stuck()
        return True

    def _leave(self) -> None:
        if self.read and not self.acknowledged:  # it read the slot, whatever ended the call
            self.area.acknowledge(self.slot, self.k, self.role.others)
        if self.area.own_pending[self.slot] == self.k:
            self.area.own_pending[self.slot] = 0
        self.area.inflight -= 1
        if not self.written:
            self.area.unwritten.remove(self)


def kept(memo: dict[Any, Any], key: object, make: Callable[[], Any], limit: int = 1024) -> Any:
    """``memo[key]``, made by ``make`` the first time (a memo of more than ``limit`` entries
    is emptied first: call signatures seen once should not pile up)."""
    value = memo.get(key)
    if value is None:
        if len(memo) > limit:
            memo.clear()
        value = memo[key] = make()
    return value


def _role(area: DirectArea, spec: CallSpec, rank: int) -> Role:
    """``rank``'s `Role` in calls of ``spec`` (made once, then kept with the area)."""
    def make() -> Role:
        awaits = tuple(roles.awaits(spec, rank))
        return Role(call_fingerprint(spec), roles.publishes(spec, rank), awaits,
                    tuple(roles.waits_for(spec, rank)), roles.readers(spec, rank),
                    roles.confirms(spec, rank), roles.announces(spec, rank),
                    f"rank {rank}: {spec.collective}[{NAME}]")
    return kept(area.memo, ("role", spec, rank), make)  # type: ignore[no-any-return]


def area_of(call: NativeCall) -> tuple[ShmTransport, DirectArea]:
    """The shared-memory transport and the direct area of ``call``'s communicator."""
    transport = call.transport
    area = transport.direct_area(call.context, call.group) if isinstance(
        transport, ShmTransport) else None
    if area is None:
        raise ScheduleError(f"{call.spec.collective}[{NAME}] needs the shared-memory transport "
                            f"and a direct area for the communicator, not {call.transport_name}")
    return transport, area


def start(call: NativeCall, send: np.ndarray | None, recv: np.ndarray | None, seq: int,
          phase: int, timeout: float | None) -> DirectExecution | PostedCall:
    """Start ``call`` (its number ``seq``, phase ``phase``) through its direct area: by the
    compiled runner of its signature when it can publish the contribution without waiting
    (`PostedCall`), else as a `DirectExecution`."""
    transport, area = area_of(call)
    if phase == 0 and not area.inflight and config.settings.compiled:
        runner = _posting_runner(call, transport, area)
        if runner is not None and runner.post(send, seq):
            return PostedCall(call, runner, transport, area, send, recv, seq, timeout)
    return DirectExecution(transport, area, call.spec, call.rank, send, recv, seq, phase,
                           call.context, timeout)


def _posting_runner(call: NativeCall, transport: ShmTransport, area: DirectArea) -> Any:
    """The compiled runner that posts and finishes the non-blocking calls of ``call``'s
    signature (made once, then kept with the area), or None (not built, or a signature it
    does not run)."""
    runner = kept(area.memo, ("posting", call.spec, call.rank),
                  lambda: getattr(_compiled_runner(call, transport, area), "__self__", False))
    return runner or None


#: ``Runner.finish``'s ``block`` that returns what a blocking call would hand to Python (its
#: status, below: a peer still late, a header its reads do not take)
_KEEP_PYTHON = 2
_HANDED = (2, 5)


class PostedCall:
    """A non-blocking direct call whose contribution the compiled runner published as it
    began (`start`, ``Runner.post``); polled like an `Execution`.

    A poll finishes it in compiled code when every peer's word is there (``Runner.finish``,
    no wait). A poll that finds a peer late a second time hands the rest to the Python
    protocol (a `DirectExecution` of the published call), which checks for failed peers,
    mismatched calls and the deadline as it goes on. `wait_alone` — what the progress engine
    calls when nothing else is in flight — finishes it as a blocking call does: compiled
    waits, then Python's sleep and checks (`_finish_slowly`).

    While it is in flight it counts in the area's ``inflight``, so the calls made meanwhile
    take the Python protocol, which orders them after it.
    """

    __slots__ = ("call", "runner", "transport", "area", "send", "recv", "seq", "deadline",
                 "left", "rest", "late", "slot", "k", "resume")

    def __init__(self, call: NativeCall, runner: Any, transport: ShmTransport, area: DirectArea,
                 send: np.ndarray | None, recv: np.ndarray | None, seq: int,
                 timeout: float | None,
                 resume: Callable[[float | None], AreaExecution] | None = None) -> None:
        self.call, self.runner, self.transport, self.area = call, runner, transport, area
        self.send, self.recv, self.seq = send, recv, seq
        #: the protocol's execution of the published call, given the time left (None: a
        #: `DirectExecution`; `direct_alltoallv` passes its own)
        self.resume = resume
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.left = 1
        self.rest: AreaExecution | None = None
        self.late = False
        self.slot, self.k = slot_of(seq, 0), call_number(seq, 0)
        area.inflight += 1
        if call.rank in _role(area, call.spec, call.rank).awaits:  # it reads its own slot
            area.own_pending[self.slot] = self.k

    def _rest(self) -> AreaExecution:
        """The rest of the call by the Python protocol (the contribution is published)."""
        call = self.call
        if self.resume is not None:
            self.rest = self.resume(self._remaining())
        else:
            self.rest = DirectExecution(self.transport, self.area, call.spec, call.rank,
                                        self.send, self.recv, self.seq, 0, call.context,
                                        self._remaining(), published=True)
        assert self.rest is not None
        return self.rest

    @property
    def streamed(self) -> Any:
        """What the protocol's execution says follows in the call's next phase (a gatherv's
        stream, `direct_gatherv`), once the Python protocol took the call; else None."""
        return getattr(self.rest, "streamed", None)

    def _remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def poll(self, spin: float = 0.0) -> bool:
        """Advance without blocking; True once the call is done on this rank."""
        if not self.left:
            return True
        try:
            if self.rest is not None:
                done = self.rest.poll(spin)
            else:
                got = self.runner.finish(self.send, self.recv, self.seq, None, False)
                done = got is True or got is None
                # a peer late again, or a header the compiled reads do not take (5)
                if not done and (self.late or got is not False):
                    done = self._rest().poll(spin)
                self.late = True
        except BaseException:
            self._end()
            raise
        if done:
            self._end()
        return done

    def wait_alone(self) -> None:
        """Block until done, nothing else being in flight to progress meanwhile (`Progress`
        calls it then): as a blocking call waits."""
        progress = self.call.progress
        if self in progress.active:  # what the runner hands to Python waits without it
            progress.active.remove(self)
        try:
            if self.resume is not None:  # the protocol's own execution takes what is left
                if self.rest is None and self.runner.finish(
                        self.send, self.recv, self.seq, self._remaining(), _KEEP_PYTHON
                ) in _HANDED:
                    self._rest()
                if self.rest is not None:
                    progress.wait(self.rest)  # its messages progress through the transport
            elif self.rest is not None:
                self.rest.wait()
            elif self.left:
                self.runner.finish(self.send, self.recv, self.seq, self._remaining(), True)
        finally:
            self._end()

    def _end(self) -> None:
        if self.left:
            self.left = 0
            self.area.inflight -= 1
            if self.area.own_pending[self.slot] == self.k:
                self.area.own_pending[self.slot] = 0


def _run(call: NativeCall, send: np.ndarray | None, recv: np.ndarray | None,
         seq: int, timeout: float | None, phase: int = 0, confirm: bool = True) -> None:
    """A blocking call as `start` begins it (a root confirming only when ``confirm``),
    progressing the other calls in flight meanwhile."""
    transport, area = area_of(call)
    ex = DirectExecution(transport, area, call.spec, call.rank, send, recv, seq, phase,
                         call.context, timeout, confirm)
    if not ex.poll():
        call.progress.wait(ex)


def bind(call: NativeCall, length_prefix: tuple[int, int] | None = None
         ) -> Callable[..., None]:
    """A blocking direct call specialised to one signature:
    ``fn(send, recv, seq, timeout, phase=0, confirm=True)`` (phase: of a multi-phase call, as
    `start`'s; ``confirm`` false: a bcast's or scatter's root does not wait for its readers to
    find the call, since a phase that follows checks the root — the envelope of a call whose
    data goes by an algorithm that `agrees_on_root`).

    ``length_prefix=(at, head)`` says each contribution (each rank's block of a scatter's)
    starts with a ``head``-byte header whose little-endian u64 at byte ``at`` counts the
    bytes in use after it, as the envelopes of bcast and scatter do: the compiled runner then
    copies only those (the rest of the slot is never read).

    Everything that does not change from call to call is worked out here once, for the
    compiled runner (`_compiled_runner`); without it the call is a `DirectExecution` driven
    to completion (`_run`): the one Python implementation of the protocol.
    """
    transport, area = area_of(call)
    compiled = _compiled_runner(call, transport, area, length_prefix=length_prefix)
    if compiled is not None:
        return compiled
    return functools.partial(_run, call)


def _compiled_runner(call: NativeCall, transport: ShmTransport, area: DirectArea,
                     fingerprinted: bool = True, length_prefix: tuple[int, int] | None = None
                     ) -> Callable[..., None] | None:
    """The compiled blocking fast path for ``spec`` (None: not built, disabled or unsupported).

    It runs what `DirectExecution` runs, with the reads described as byte ranges
    (`read_plan`): copies for the gathering and broadcasting calls, a fold in rank order for the
    reductions whose operator and dtype it knows (the others stay in Python and numpy).
    """
    if _direct is None or not config.settings.compiled:
        return None
    spec = call.spec
    if spec.collective == "scatterv" and call.rank == spec.root and not vector.packed(spec):
        return None  # its blocks are packed into its slot in Python (`_write`)
    rank, c, dt = call.rank, spec.collective, spec.dtype
    others = roles.waits_for(spec, rank)
    plan, size = read_plan(spec, rank), dt.itemsize
    n = plan.count
    op_code = dt_code = 0
    if plan.kind == "reduce":
        kernel = compiled_kernel(spec.op, dt)  # the fold's kernel is chosen in `ops`
        if kernel is None:
            return None
        op_code, dt_code = kernel
    kind = {"none": _direct.READ_NONE, "copy": _direct.READ_COPY, "self": _direct.READ_SELF,
            "reduce": _direct.READ_REDUCE}[plan.kind]
    slots = range(DIRECT_SLOTS)
    src = [area.slot_offset[j][i] + plan.offset for i in slots for j in plan.members]
    publishes = roles.publishes(spec, rank)
    # a scatter's root reads its own block from its x: that part of its slot is not written
    skip = (plan.self_from * size, n * size) if (
        publishes and plan.kind == "self" and vector.regular(c) == "scatter") else (0, 0)
    # without the fingerprint (only to measure its cost): nothing stored, nothing packed
    fingerprint = call_fingerprint(spec) if fingerprinted else 0

    def slow(status: int, send: Any, recv: Any, seq: int, timeout: float | None,
             phase: int, confirm: bool) -> None:
        if send is not None and send.ndim != 1:  # a bound call passes the caller's arrays
            send = send.reshape(-1)
        if recv is not None and recv.ndim != 1:
            recv = recv.reshape(-1)
        if status == 1 and fingerprinted:
            return _run(call, send, recv, seq, timeout, phase, confirm)
        if status == 1:  # measuring without the fingerprint: wait for the slot, run again
            slot = slot_of(seq, phase)
            area.wait(lambda: not area.inflight and area.writable(slot),
                      lambda: area.unacknowledged(slot), None, "", None, fp.describe)
            return compiled.run(send, recv, seq, timeout, phase, confirm)
        # status 2 (its peers' words) and 3 (a root's readers' arrivals): the runner
        # spun and yielded (`Ladder`'s first stages): sleep from here
        if status == 3:
            return _confirm_slowly(call, area, seq, timeout, fingerprint, phase, SLEEP)
        return _finish_slowly(call, area, send, recv, seq, timeout, fingerprint, phase, SLEEP,
                              confirm)

    compiled = _direct.Runner(
        **runner_words(call, transport, area, others),
        readers=roles.readers(spec, rank), slow=slow, publishes=publishes,
        defers=root_defers(spec, rank),
        nbytes=roles.slot_bytes(spec, rank), skip=skip, fingerprint=fingerprint,
        is_root=roles.is_root(spec, rank), announces=roles.announces(spec, rank),
        mix=held_word(0, fingerprint), read_kind=kind, src=src, dst=[d * size for d in plan.dst],
        len=[m * size for m in plan.piece_lengths()], self_copy=(plan.self_from * size, 0,
                                                                 n * size),
        count=n, op=op_code, dtype=dt_code,
        store_fingerprint=fingerprinted,
        prefix_at=-1 if length_prefix is None else length_prefix[0],
        prefix_head=0 if length_prefix is None else length_prefix[1],
        write_prefix=length_prefix is not None and c == "bcast")
    return compiled.run


def runner_words(call: NativeCall, transport: ShmTransport, area: DirectArea,
                 others: list[int]) -> dict[str, Any]:
    """The compiled runner's arguments that place ``call``'s rank in its direct area: its
    words, its peers' (``others``: those it waits for) and how it waits."""
    rank, p, slots = call.rank, call.spec.size, range(DIRECT_SLOTS)
    sleepers = [r for r in area.group if r != transport.rank]
    # the words of peers pinned to this rank's core: waits for them yield at once
    on_my_core = [m for m in range(p) if transport.shares_core(area.group[m])]
    local_words = [area.held[m][i] for i in slots for m in on_my_core if m in others] + [
        area.ack[m][rank][i] for m in on_my_core for i in slots]
    return dict(
        segment=transport.segment_map, ndarray=np.ndarray, area=area,
        occupant=area.occupant.readers, occupant_calls=area.occupant.calls,
        own_pending=area.own_pending, wake=transport.wake,
        my_held=area.held[rank], my_fp=area.fps[rank], my_data=area.slot_offset[rank],
        held=[area.held[j][i] for i in slots for j in others],
        ack=[area.ack[rank][j][i] for i in slots for j in others],
        ack_of_me=[area.ack[m][rank][i] for m in range(p) for i in slots],
        local_words=local_words,
        sleeper_words=[transport.sleeping_word(r) for r in sleepers], sleeper_ranks=sleepers,
        spin_seconds=area.ladder.compiled_spin, yield_seconds=area.ladder.yield_seconds,
        hand_over_core=area.oversubscribed and root_yields(call.spec))


def root_yields(spec: CallSpec) -> bool:
    """Whether, with more ranks than cores, a bcast's or scatter's root yields its core once
    after publishing, to a reader that may wait for it: the selection table's
    ``protocols.shm_direct.root_yields``."""
    return bool(tuning.setting("shm_direct", "root_yields", spec,
                               config.settings.tuning_file).value)


def root_defers(spec: CallSpec, rank: int) -> bool:
    """Whether ``rank``, a bcast's or scatter's root, may return before every reader found the
    call and check that at its next call on the area instead (`DirectArea.settle`): root 0
    only, so that ranks which disagree on the root always include one that waits — a rank
    naming another root — and raises at the call; and where the selection table's
    ``protocols.shm_direct.root_defers`` allows it."""
    return (roles.confirms(spec, rank) and spec.root == 0
            and bool(tuning.setting("shm_direct", "root_defers", spec,
                                    config.settings.tuning_file).value))


def _finish_slowly(call: NativeCall, area: DirectArea, send: np.ndarray | None,
                   recv: np.ndarray | None, seq: int, timeout: float | None,
                   fingerprint: int | None = None, phase: int = 0, start: int = SPIN,
                   confirm: bool = True) -> None:
    """The rest of a blocking call whose contribution is published but whose peers are late
    (``start``: the stage of the wait to begin with; ``confirm``: as `bind`'s)."""
    spec = call.spec
    k, slot, rank = call_number(seq, phase), slot_of(seq, phase), call.rank
    deadline = None if timeout is None else time.monotonic() + timeout
    others = roles.waits_for(spec, rank)
    if fingerprint is None:
        fingerprint = call_fingerprint(spec)
    word = held_word(k, fingerprint)
    area.wait(lambda: not area.missing(slot, word, others),
              lambda: area.missing(slot, word, others), deadline,
              f"rank {rank}: {spec.collective}[{NAME}]", call_tag(call.context, seq, phase),
              fp.describe, (slot, word, fingerprint), start, not roles.publishes(spec, rank))
    if roles.announces(spec, rank):
        area.announce(slot, k, others)
    try:
        _reader_for(area, spec, rank)(slot, send, recv)
    finally:
        area.acknowledge(slot, k, others)
    if confirm and roles.confirms(spec, rank):
        _confirm_slowly(call, area, seq, timeout, fingerprint, phase, start)


def _confirm_slowly(call: NativeCall, area: DirectArea, seq: int, timeout: float | None,
                    fingerprint: int | None = None, phase: int = 0, start: int = SPIN) -> None:
    """A bcast's or scatter's root waits until every reader found its call
    (`direct_roles.confirms`), raising `CollectiveMismatch` if a reader made another call at
    the same point."""
    spec, rank = call.spec, call.rank
    slot, word = slot_of(seq, phase), held_word(call_number(seq, phase),
                                                fingerprint or call_fingerprint(spec))
    deadline = None if timeout is None else time.monotonic() + timeout
    area.wait(lambda: not area.unconfirmed(slot), lambda: area.unconfirmed(slot),
              deadline, f"rank {rank}: {spec.collective}[{NAME}]",
              call_tag(call.context, seq, phase), fp.describe,
              (slot, word, fingerprint or call_fingerprint(spec)), start)


def _reader_for(area: DirectArea, spec: CallSpec, rank: int) -> Reader:
    """The reader of one call signature on ``area`` (made once, then kept with the area)."""
    return kept(area.memo, (NAME, spec, rank),  # type: ignore[no-any-return]
                lambda: make_reader(area, spec, rank))
