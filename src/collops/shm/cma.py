"""``shm_cma``: large collectives on one machine by reading the peers' own buffers.

`shm_direct` copies each contribution into a shared slot, which is right for small calls and
wrong for large ones: the slot would have to be as large as the message. Here a rank's slot in
the communicator's direct area holds only a *descriptor* — the addresses of its send and
receive buffers — and the ranks that need its data copy it straight out of its
address space with Linux's cross-memory attach (the transport's `read_from`): one copy per byte, no
intermediate buffer, no message, and one synchronisation instead of the log p or p − 1
rounds of a schedule, each of which costs a wake-up when ranks outnumber cores.

Per call, on each rank: publish the descriptor (the same slot protocol as `shm_direct`, so
call numbers, fingerprints, mismatch, failure and timeout detection are shared); wait for the
descriptors it reads; copy what it needs:

* ``bcast``/``scatter``: each non-root reads its part of the root's send buffer;
* ``gather``: the root reads every peer's send buffer into its receive buffer;
* ``allgather``/``alltoall``: every rank reads its block of every peer's send buffer;
* ``reduce``: the root folds the peers' send buffers in rank order, through a bounded scratch;
* ``reduce_scatter_block``: every rank folds its block of every send buffer, in rank order;
* ``allreduce``: that reduce-scatter into the rank's part of its *receive* buffer, a second
  descriptor saying the part is done, then every rank reads the other parts from their
  owners' receive buffers — 2 (p − 1)/p of the vector read per rank, like a ring, in two
  synchronisations instead of 2 (p − 1).

A rank whose buffers others read returns only once they have acknowledged reading them (the
acknowledgement words of the direct area), so the buffers are never reused too early.
The root of a rooted call waits for every member's word (a bcast's or scatter's non-roots
publish one without data), so ranks that disagree on the root raise `CollectiveMismatch`.

It needs the "shm_cma" resource, which the transport offers where it may use cross-memory
attach (same user, ptrace permitted); selection takes it unasked only where the selection
table says so (a 2-rank reduce beyond the stream's bound), and `shm_direct` keeps the calls
that fit its slots.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .. import config
from ..algorithms import tuning
from ..algorithms.native import NativeAlgorithm, NativeCall
from ..algorithms.registry import Algorithm, CostModel, add_algorithm
from ..algorithms.spec import CallSpec
from ..datatypes import address_of
from ..errors import ScheduleError
from ..schedule import Schedule
from ..transport.tags import call_tag
from . import direct as shm_direct
from . import direct_roles
from .direct_area import DirectArea, call_number, held_word, slot_of
from .execution import AreaExecution
from .transport import ShmTransport

NAME = "shm_cma"
#: the transport offers it where cross-memory attach is permitted
RESOURCE = "shm_cma"
SUPPORTED = ("bcast", "scatter", "gather", "allgather", "alltoall", "reduce", "allreduce",
             "reduce_scatter_block")
#: descriptor words: send address, receive address
_SEND, _RECV = range(2)


def register() -> None:
    """Add an ``shm_cma`` record to every supported collective."""
    native = NativeAlgorithm(start, bind)
    for collective in SUPPORTED:
        add_algorithm(Algorithm(
            collective, NAME, f"{collective} by reading the peers' buffers in place "
            "(process_vm_readv) after one exchange of addresses", _no_schedule,
            cost=cma_cost, needs=frozenset({shm_direct.RESOURCE, RESOURCE}),
            native=native, transports=shm_direct.TRANSPORTS, agrees_on_root=True))


def _no_schedule(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    raise ScheduleError(
        f"{spec.collective}[{NAME}] reads the peers' memory directly; it is not a schedule and "
        "cannot be built, validated, simulated or costed step by step")


def cma_cost(spec: CallSpec, model: CostModel) -> float:
    """Two synchronisations (descriptors, acknowledgements; three for allreduce) plus the
    bytes the busiest rank reads from its peers (β) and folds (γ).

    A model, not a calibration: where it is taken unasked is the selection table's to say.
    """
    c, n, p = spec.collective, spec.count * spec.itemsize, spec.size
    if c == "allreduce":
        part = n * (p - 1) / p
        return 3 * model.alpha + 2 * part * model.beta + part * model.gamma
    read = n if c in ("bcast", "scatter") else n * (p - 1)
    folded = read if c in ("reduce", "reduce_scatter_block") else 0
    return 2 * model.alpha + read * model.beta + folded * model.gamma


# -- who publishes, who reads: as in shm_direct, less a rank's own slot ------------------------
def _awaits(spec: CallSpec, rank: int) -> list[int]:
    """The members whose descriptors ``rank`` reads."""
    return [j for j in direct_roles.awaits(spec, rank) if j != rank]


def _borrowers(spec: CallSpec, rank: int) -> tuple[int, ...]:
    """The members that read ``rank``'s descriptor (and so its buffers)."""
    return tuple(m for m in range(spec.size) if m != rank and rank in _awaits(spec, m))


def scratch_bytes(spec: CallSpec) -> int:
    """Bytes of the scratch a folding rank reads a peer's data into, a piece at a time: the
    selection table's ``protocols.shm_cma.scratch_bytes``."""
    return int(tuning.setting("shm_cma", "scratch_bytes", spec,
                              config.settings.tuning_file).value)


def _scratch(area: DirectArea, dtype: np.dtype, count: int) -> np.ndarray:
    """A reusable scratch of at least ``count`` items (at most `scratch_bytes`)."""
    key = (NAME, "scratch")
    raw = area.memo.get(key)
    need = count * dtype.itemsize
    if not isinstance(raw, np.ndarray) or raw.nbytes < need:
        raw = area.memo[key] = np.empty(max(need, 4096), np.uint8)
    return raw[:need].view(dtype)


# -- the call ----------------------------------------------------------------------------------
_WRITE, _READ, _DRAIN, _DONE = range(4)


class CmaExecution(AreaExecution):
    """An ``shm_cma`` call in flight (`AreaExecution`): publish the buffers' addresses, read
    the peers' buffers, and wait until the readers of this rank's have read them."""

    def __init__(self, transport: ShmTransport, area: DirectArea, spec: CallSpec, rank: int,
                 send: np.ndarray | None, recv: np.ndarray | None, seq: int, phase: int,
                 context: int, timeout: float | None) -> None:
        c, p = spec.collective, spec.size
        self.spec, self.rank = spec, rank
        self.send = None if send is None else send.reshape(-1)
        self.recv = None if recv is None else recv.reshape(-1)
        self.seq, self.context = seq, context
        self.fingerprint = shm_direct.call_fingerprint(spec, NAME)
        #: the members whose descriptors it reads
        self.awaits = _awaits(spec, rank)
        #: the members that read its descriptor
        self.readers = _borrowers(spec, rank)
        #: whether members read its buffers: it returns once they have
        self.lends = bool(_borrowers(spec, rank))
        #: the call's phase, and the next one for allreduce's second exchange
        self.phases = [phase, phase + 1] if c == "allreduce" and p > 1 else [phase]
        self.index = 0
        #: (slot, call number) of each descriptor this rank published
        self.published: list[tuple[int, int]] = []
        # a gather's or reduce's root reads everyone and is read by no one, yet stores its
        # word: two ranks that each believe themselves the root then meet each other's
        self.state = _WRITE if self.readers or (
            c in ("gather", "reduce") and rank == spec.root and p > 1) else _READ
        area.settle_before(seq, phase, self.fingerprint, timeout)
        area.inflight += 1
        if self.state == _WRITE:
            area.queue_write(self, call_number(seq, phase))
        self._begin(transport, area, f"rank {rank}: {c}[{NAME}]", call_tag(context, seq, phase),
                    timeout)
        self.poll()

    @property
    def phase(self) -> int:
        return self.phases[self.index]

    def _slot_word(self) -> tuple[int, int, int]:
        k = call_number(self.seq, self.phase)
        return slot_of(self.seq, self.phase), k, held_word(k, self.fingerprint)

    def _ready(self) -> bool:
        area = self.area
        slot, _, word = self._slot_word()
        if self.state == _WRITE:
            return area.unwritten[0] is self and area.writable(slot)
        if self.state == _READ:
            return not area.missing(slot, word, self.awaits)
        if self.state == _DRAIN:
            return not self._unread()
        return True

    def _unread(self) -> list[int]:
        """The readers that have not yet read this rank's buffers (a retaken slot was read)."""
        area = self.area
        return sorted({m for s, k in self.published if area.occupant[s][0] == k
                       for m in area.unacknowledged(s)})

    def _advance(self, spin: float) -> bool:
        while self.state != _DONE:
            if not self._ready():
                return self._stuck()
            self._step()
        return True

    def _step(self) -> None:
        area = self.area
        slot, k, word = self._slot_word()
        if self.state == _WRITE:
            d = area.view(area.index, slot, np.dtype(np.uint64), 2)
            d[_SEND], d[_RECV] = address_of(self.send), address_of(self.recv)
            area.publish(slot, k, self.fingerprint, self.readers)
            area.unwritten.popleft()
            if self.lends:
                self.published.append((slot, k))
            self.state = _READ
            return
        if self.state == _READ:
            # found: said before the copies, as shm_direct's readers do (a root that gives
            # up, a stall report, then know this rank reached the call)
            area.announce(slot, k, self.awaits)
            descriptors = {j: area.view(j, slot, np.dtype(np.uint64), 2).tolist()
                           for j in self.awaits}
            (self._second if self.index else self._first)(descriptors)
            area.acknowledge(slot, k, self.awaits)
            if not self.index:
                self._own_part()  # after the acknowledgement: the peers go on meanwhile
            if self.index + 1 < len(self.phases):
                self.index += 1
                self.tag = call_tag(self.context, self.seq, self.phase)
                self.state = _WRITE
                area.queue_write(self, call_number(self.seq, self.phase))
            else:
                self.state = _DRAIN
            return
        self.state = _DONE  # drained: every reader has read this rank's buffers

    def _awaited(self) -> list[int]:
        area = self.area
        slot, _, word = self._slot_word()
        if self.state == _WRITE:
            return area.unacknowledged(slot)
        if self.state == _READ:
            return area.missing(slot, word, self.awaits)
        # a reader that made another call at the same point (ranks that disagree on a
        # bcast's root) has its word there: a mismatch
        return self._unread()

    def _expect(self) -> tuple[int, int, int] | None:
        slot, _, word = self._slot_word()
        if self.state == _READ or (
                self.state == _DRAIN and self.spec.collective in ("bcast", "scatter")):
            return slot, word, self.fingerprint
        return None

    def _leave(self) -> None:
        self.area.inflight -= 1
        if self in self.area.unwritten:
            self.area.unwritten.remove(self)

    # -- the copies -----------------------------------------------------------------------
    def _read(self, member: int, remote: int, local: int, nbytes: int) -> None:
        """Copy ``nbytes`` at ``remote`` in ``member``'s process to ``local``."""
        self.transport.read_from(self.area.group[member], remote, local, nbytes)

    def _first(self, descriptors: dict[int, list[int]]) -> None:
        spec, rank, p = self.spec, self.rank, self.spec.size
        c, n, dt = spec.collective, spec.count, spec.dtype
        size = dt.itemsize
        nb = n * size
        send, recv = self.send, self.recv
        if c in ("bcast", "scatter"):
            if rank != spec.root:
                assert recv is not None
                offset = rank * nb if c == "scatter" else 0
                remote, _ = descriptors[spec.root]
                self._read(spec.root, remote + offset, address_of(recv), nb)
            return
        if c in ("gather", "allgather", "alltoall"):
            if recv is None:
                return
            own = rank * nb if c == "alltoall" else 0
            base = address_of(recv)
            for j, (remote, _) in descriptors.items():
                self._read(j, remote + own, base + j * nb, nb)
            return
        # the reductions: fold the members' pieces in rank order
        assert spec.op is not None and send is not None
        if c == "reduce":
            if rank != spec.root:
                return
            lo, hi, src = 0, n, 0
        elif c == "reduce_scatter_block":
            lo, hi, src = 0, n, rank * n
        else:  # allreduce: this rank's part of the vector
            lo, hi = _part(n, p, rank)
            src = lo
        assert recv is not None
        self._fold(descriptors, recv[lo:hi], src, hi - lo)

    def _own_part(self) -> None:
        """The rank's own block or copy, which needs no peer (done once the peers may go on)."""
        spec, rank = self.spec, self.rank
        c, n = spec.collective, spec.count
        send, recv = self.send, self.recv
        if send is None or recv is None:
            return
        if c in ("bcast", "scatter") and rank == spec.root:
            offset = rank * n if c == "scatter" else 0
            if address_of(recv) != address_of(send) + offset * spec.dtype.itemsize:
                recv[:n] = send[offset: offset + n]
        elif c in ("gather", "allgather", "alltoall"):
            own = rank * n if c == "alltoall" else 0
            recv[rank * n: (rank + 1) * n] = send[own: own + n]

    def _fold(self, descriptors: dict[int, list[int]], out: np.ndarray, src: int,
              count: int) -> None:
        """``out`` = the members' items ``src … src + count`` folded in rank order."""
        spec, rank, dt = self.spec, self.rank, self.spec.dtype
        assert spec.op is not None and self.send is not None
        if count == 0:
            return
        size = dt.itemsize
        step = max(1, min(count, scratch_bytes(spec) // size))
        scratch = _scratch(self.area, dt, step)
        combine = spec.op.combine_into
        for lo in range(0, count, step):
            hi = min(count, lo + step)
            piece = out[lo:hi]
            for j in range(spec.size):
                if j == rank:
                    mine = self.send[src + lo: src + hi]
                    if j == 0:
                        piece[...] = mine
                    else:
                        combine(piece, piece, mine)
                    continue
                remote, _ = descriptors[j]
                into = piece if j == 0 else scratch[: hi - lo]
                self._read(j, remote + (src + lo) * size, address_of(into), (hi - lo) * size)
                if j:
                    combine(piece, piece, into)

    def _second(self, descriptors: dict[int, list[int]]) -> None:
        """allreduce: copy the other members' finished parts out of their receive buffers."""
        n, p, size = self.spec.count, self.spec.size, self.spec.dtype.itemsize
        assert self.recv is not None
        base = address_of(self.recv)
        for j, (_, remote) in descriptors.items():
            lo, hi = _part(n, p, j)
            if hi > lo:
                self._read(j, remote + lo * size, base + lo * size, (hi - lo) * size)


def _part(n: int, p: int, j: int) -> tuple[int, int]:
    """Items ``[lo, hi)`` of an ``n``-item vector that member ``j`` of ``p`` reduces."""
    return j * n // p, (j + 1) * n // p


def start(call: NativeCall, send: np.ndarray | None, recv: np.ndarray | None, seq: int,
          phase: int, timeout: float | None) -> CmaExecution:
    """Start ``call`` (its number ``seq``, phase ``phase``) by cross-memory reads."""
    transport, area = shm_direct.area_of(call)
    return CmaExecution(transport, area, call.spec, call.rank, send, recv, seq, phase,
                        call.context, timeout)


def bind(call: NativeCall, length_prefix: tuple[int, int] | None = None) -> Callable[..., None]:
    """The blocking form: ``fn(send, recv, seq, timeout, phase=0)`` (large calls: no fast
    path needed; ``length_prefix`` changes nothing here)."""

    def fn(send: np.ndarray | None, recv: np.ndarray | None, seq: int,
           timeout: float | None, phase: int = 0) -> None:
        ex = start(call, send, recv, seq, phase, timeout)
        if not ex.poll():
            call.progress.wait(ex)

    return fn
