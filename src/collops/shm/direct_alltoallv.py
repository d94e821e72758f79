"""``alltoallv`` through the direct slots (``shm_direct``): each rank's counts are its own.

A writer's slot starts with a header of ``1 + 3p`` little-endian u64 words: a flag (its
blocks did not fit), the bytes it sends to each member, the bytes it expects from each, and
where in the slot its block for each lies (the blocks follow the header packed in rank
order). A reader checks each writer's header against its own counts both ways (a
send to it of another length, or a block it sends of a length the writer does not expect:
`CollectiveMismatch` naming both ranks, on each rank of the pair) and copies its blocks to
its ``rdispls``; its own block it copies from ``x`` directly.

Whether a writer's blocks fit is the writer's own business, as its counts are: one whose
blocks for its peers do not all fit its slot sets a flag and puts their addresses in its
header instead, and its readers copy them straight out of its memory (`process_vm_readv`; it
completes once they have all acknowledged), or, where the kernel does not permit that, it
sends them as messages (tagged with the call's next phase, so no wait of this phase mistakes
them for a peer's other call) and its readers receive them. Every rank therefore takes
the same protocol whatever the counts, and the selection (which may depend only on what all
ranks agree on) needs no bound on them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import config
from ..algorithms.native import NativeAlgorithm, NativeCall
from ..algorithms.registry import Algorithm, CostModel, add_algorithm
from ..algorithms.spec import CallSpec, prefix
from ..errors import CollectiveMismatch
from ..transport.tags import make_tag_base
from . import direct
from .direct_area import DirectArea, held_word
from .segment import DIRECT_SLOTS
from .transport import ShmTransport

#: the header's flags: this writer's blocks do not fit its slot; they go as messages, or,
#: where the kernel permits single copies, its readers copy them out of its memory from the
#: addresses in its header (it completes once they all have)
OVERFLOW = 1
BY_REFERENCE = 2
#: a reader that takes whatever length each writer's header says (a gatherv root given no
#: counts, `direct_gatherv`): its writers do not check what it expects
ANY_LENGTH = 4
#: a header's words are u64; the blocks start at a 64-byte boundary after it
WORD = 8
ALIGN = 64


def head_words(p: int) -> int:
    """Words of a writer's header for ``p`` members: the flag, then the bytes it sends to,
    expects from and (in its slot) writes at for each member, padded to 64 bytes."""
    return -(-(1 + 3 * p) * WORD // ALIGN) * ALIGN // WORD


@dataclass(frozen=True)
class Layout:
    """One rank's part in an alltoallv of one spec, in bytes: its header, its writes into
    its slot (``(from, bytes, to)``), where its blocks start in its ``x`` and their bytes, its
    own block (``(from, bytes, to)``) and what it expects from each member (``(bytes, at)``
    in recv)."""

    head: np.ndarray
    overflows: bool
    writes: tuple[tuple[int, int, int], ...]
    sends: tuple[int, ...]
    sfrom: tuple[int, ...]
    own: tuple[int, int, int]
    expects: tuple[tuple[int, int], ...]


@functools.lru_cache(maxsize=1024)
def layout_of(spec: CallSpec, rank: int, slot_bytes: int) -> Layout:
    """The `Layout` of ``rank`` in an alltoallv of ``spec`` on slots of ``slot_bytes``: its
    blocks for the other members packed after the header in rank order, unless they do not
    all fit (then they go as messages)."""
    p, size = spec.size, spec.itemsize
    sends = tuple(c * size for c in spec.sendcounts)
    sfrom = tuple(d * size for d in (spec.sdispls or prefix(spec.sendcounts)))
    recvs = tuple(c * size for c in spec.recvcounts)
    rat = tuple(d * size for d in (spec.rdispls or prefix(spec.recvcounts)))
    words = np.zeros(head_words(p), "<u8")
    at = [0] * p
    end = words.nbytes
    for j, n in enumerate(sends):
        if j != rank and n:
            at[j], end = end, end + n
    overflows = end > slot_bytes
    words[0] = OVERFLOW if overflows else 0
    words[1: 1 + p] = sends
    words[1 + p: 1 + 2 * p] = recvs
    words[1 + 2 * p: 1 + 3 * p] = at
    writes = () if overflows else tuple(
        (sfrom[j], n, at[j]) for j, n in enumerate(sends) if j != rank and n)
    return Layout(words, overflows, writes, sends, sfrom, (sfrom[rank], sends[rank], rat[rank]),
                  tuple(zip(recvs, rat, strict=True)))


def check_header(spec: CallSpec, rank: int, writer: int, words: np.ndarray,
                 layout: Layout, slot_bytes: int, what: str = "", counts: str = "recvcounts",
                 learns: bool = False) -> int:
    """Where ``rank``'s block lies in ``writer``'s slot, after checking its header
    (``words``): `CollectiveMismatch` (naming the call as ``what``, the expected lengths
    as the argument ``counts``) when the two ranks disagree about a block between them,
    either way, or when the block would not lie inside the slot. ``learns``: this rank
    takes the length the writer sends it, whatever it is."""
    p, size = spec.size, spec.itemsize
    flags = int(words[0])
    sent, expected = int(words[1 + rank]), int(words[1 + p + rank])
    at = int(words[1 + 2 * p + rank])
    mine, theirs = layout.expects[writer][0], layout.sends[writer]
    what = what or f"rank {rank}: alltoallv[{direct.NAME}]"
    if sent != mine and not learns:
        raise CollectiveMismatch(
            f"{what}: rank {writer} sends {sent // size} elements to rank {rank}, which "
            f"expects {mine // size} (its {counts}[{writer}])")
    if expected != theirs and not flags & ANY_LENGTH:
        raise CollectiveMismatch(
            f"{what}: rank {rank} sends {theirs // size} elements to rank {writer}, which "
            f"expects {expected // size} (its {counts}[{rank}])")
    if not flags & OVERFLOW and sent and not words.nbytes <= at <= slot_bytes - sent:
        raise CollectiveMismatch(f"{what}: rank {writer}'s header puts its block for rank "
                                 f"{rank} at byte {at}, outside its slot")
    return at


class AlltoallvExecution(direct.DirectExecution):
    """An alltoallv in flight through the direct slots (`DirectExecution`'s protocol with
    this module's header and packed blocks; a writer whose blocks do not fit has them read
    out of its memory, or sends them as messages)."""

    __slots__ = ("layout", "handles", "context", "seq", "phase", "published", "by_reference")

    #: what a header's mismatch names as the expected lengths
    counts_name = "recvcounts"

    def __init__(self, transport: ShmTransport, area: DirectArea, spec: CallSpec, rank: int,
                 send: np.ndarray | None, recv: np.ndarray | None, seq: int, phase: int,
                 context: int, timeout: float | None, published: bool = False,
                 layout: Layout | None = None) -> None:
        self.layout = layout or layout_of(spec, rank, area.capacity)
        self.handles: list[Any] = []
        self.context, self.seq, self.phase = context, seq, phase
        #: the compiled runner published this rank's slot already (it fits: no messages)
        self.published = published
        self.by_reference = self.layout.overflows and transport.capabilities().single_copy
        super().__init__(transport, area, spec, rank, send, recv, seq, phase, context, timeout)

    @staticmethod
    def posting_runner(call: NativeCall, transport: ShmTransport, area: DirectArea
                       ) -> Callable[..., None] | None:
        """The compiled runner that posts and finishes this protocol's non-blocking calls of
        ``call``'s signature (`posted`; None: none)."""
        others = [j for j in range(call.spec.size) if j != call.rank]
        return table_runner(call, transport, area,
                            layout_of(call.spec, call.rank, area.capacity), others, others,
                            _run)

    def _tag(self) -> int:
        """The messages' tag: the call's next phase, which no wait of this one watches."""
        return make_tag_base(self.context, self.seq, self.phase + 1)

    def _write(self) -> None:
        """The header and (when they fit) the blocks into this rank's slot; else the
        blocks as messages."""
        lay, area = self.layout, self.area
        slot = area.slots[area.index][self.slot]
        send = self.send.view(np.uint8) if self.send is not None else None
        if self.by_reference:  # the blocks' addresses where the slot's offsets would be
            head = lay.head.copy()
            head[0] |= BY_REFERENCE
            p = self.spec.size
            base = 0 if send is None else send.ctypes.data
            head[1 + 2 * p: 1 + 3 * p] = [base + at for at in lay.sfrom]
            slot[: head.nbytes] = head.view(np.uint8)
            return
        slot[: lay.head.nbytes] = lay.head.view(np.uint8)
        for src, n, dst in lay.writes:
            assert send is not None
            slot[dst: dst + n] = send[src: src + n]
        if lay.overflows:
            self._send_blocks()

    def _send_blocks(self) -> None:
        """This rank's blocks as messages (they do not fit its slot, and its readers cannot
        copy them out of its memory)."""
        lay, area, send = self.layout, self.area, self.send
        if send is None:
            return
        fp = self.role.fingerprint
        for j, (src, n) in enumerate(zip(lay.sfrom, lay.sends, strict=True)):
            if j != self.rank and n:
                self.handles.append(self.transport.isend(
                    area.group[j], self._tag(), send.view(np.uint8)[src: src + n].data, fp))

    def _read(self) -> None:
        """Check every writer's header (all of them before anything moves), then copy the
        blocks that came through slots or by reference, receive those that come as
        messages, and copy this rank's own block."""
        lay, area, spec, me = self.layout, self.area, self.spec, self.rank
        heads = lay.head.size
        learns = self._learns()
        found = []
        for w in self.role.others:
            slot = area.slots[w][self.slot]
            words = slot[: heads * WORD].view("<u8")
            found.append((w, slot, words, check_header(
                spec, me, w, words, lay, area.capacity, self.role.what, self.counts_name,
                learns)))
        expects, own = self._placed(found)
        recv = self.recv.view(np.uint8) if self.recv is not None else None
        for w, slot, words, start in found:
            n, at = expects[w]
            if not n:
                continue
            assert recv is not None
            flags = int(words[0])
            if flags & BY_REFERENCE:
                self.transport.read_from(area.group[w], start, recv.ctypes.data + at, n)
            elif flags & OVERFLOW:
                self.handles.append(self.transport.irecv(
                    area.group[w], self._tag(), recv[at: at + n].data))
            else:
                recv[at: at + n] = slot[start: start + n]
        src, n, dst = own
        if n and recv is not None and self.send is not None:
            recv[dst: dst + n] = self.send.view(np.uint8)[src: src + n]

    def _learns(self) -> bool:
        """Whether this rank takes each writer's length from its header (`ANY_LENGTH`)."""
        return False

    def _placed(self, found: list[tuple[int, np.ndarray, np.ndarray, int]]
                ) -> tuple[tuple[tuple[int, int], ...], tuple[int, int, int]]:
        """What this rank takes from each member (``(bytes, at)`` in recv) and its own block
        (``(from, bytes, to)``), once the writers' headers (``found``) are checked."""
        return self.layout.expects, self.layout.own

    def _messages_done(self) -> bool:
        """Whether this rank's sends and receives of blocks that did not fit are done."""
        if not self.handles:
            return True
        self.transport.progress()
        for h in self.handles:
            if h.error is not None:
                raise h.error
            if h.done and h.nbytes and h.fingerprint and h.fingerprint != self.role.fingerprint:
                raise CollectiveMismatch(f"{self.what}: a block from rank {h.peer} of another "
                                         "call")
        self.handles = [h for h in self.handles if not h.done]
        return not self.handles

    def _ready(self) -> bool:
        if self.acknowledged:  # messages: the transport's own activity wakes the wait
            return self.by_reference and not self.area.unacknowledged(self.slot)
        return super()._ready()

    def _awaited(self) -> list[int]:
        if self.acknowledged:
            if self.by_reference:
                return self.area.unacknowledged(self.slot)
            return sorted({self.area.group.index(h.peer) for h in self.handles})
        return super()._awaited()

    def _advance(self, spin: float) -> bool:
        area, slot, k, role = self.area, self.slot, self.k, self.role
        if not self.written and self.published:
            area.unwritten.remove(self)
            self.written = True
        if not self.written:
            if not self._may_write():
                return self._stuck()
            self._write()
            area.publish(slot, k, role.fingerprint, role.readers)
            area.unwritten.popleft()
            self.written = True
        if not self.read:
            if area.missing(slot, self.word, role.others):
                return self._stuck()
            self.read = True  # whatever the headers say, the slots are done with
            self._read()
        if not self.acknowledged:
            area.acknowledge(slot, k, role.others)
            self.acknowledged = True
        if self.by_reference:  # its readers copy from its memory until they acknowledge
            return not area.unacknowledged(slot) or self._stuck()
        return self._messages_done() or self._stuck()


def started(kind: type[AlltoallvExecution], call: NativeCall, send: np.ndarray | None,
            recv: np.ndarray | None, seq: int, phase: int, timeout: float | None,
            published: bool = False) -> AlltoallvExecution:
    """A call of ``kind`` (`AlltoallvExecution` or a protocol built on it) begun through
    its direct area: its number ``seq``, phase ``phase`` (``published``: the compiled runner
    wrote this rank's slot already)."""
    transport, area = direct.area_of(call)
    return kind(transport, area, call.spec, call.rank, send, recv, seq, phase, call.context,
                timeout, published)


def posted(kind: type[AlltoallvExecution], call: NativeCall, send: np.ndarray | None,
           recv: np.ndarray | None, seq: int, phase: int, timeout: float | None
           ) -> AlltoallvExecution | direct.PostedCall:
    """`started`, for a non-blocking call: by the compiled runner of its signature when it
    can publish this rank's header and blocks without waiting (a `direct.PostedCall`, which
    compiled code finishes, or else ``kind``'s protocol from the published slot), else
    ``kind``'s protocol from the start."""
    transport, area = direct.area_of(call)
    if phase == 0 and not area.inflight and config.settings.compiled:
        runner = direct.kept(area.memo, ("posting table", call.spec, call.rank),
                             lambda: getattr(kind.posting_runner(call, transport, area),
                                             "__self__", False))
        if runner and runner.post(send, seq):
            return direct.PostedCall(
                call, runner, transport, area, send, recv, seq, timeout,
                lambda left: kind(transport, area, call.spec, call.rank, send, recv, seq, 0,
                                  call.context, left, True))
    return kind(transport, area, call.spec, call.rank, send, recv, seq, phase, call.context,
                timeout)


def run_blocking(kind: type[AlltoallvExecution], call: NativeCall, send: np.ndarray | None,
                 recv: np.ndarray | None, seq: int, timeout: float | None, phase: int = 0,
                 confirm: bool = True, published: bool = False) -> None:
    """A blocking call of ``kind`` as `started` begins it, progressing the other calls
    meanwhile."""
    ex = started(kind, call, send, recv, seq, phase, timeout, published)
    if not ex.poll():
        call.progress.wait(ex)


#: start an alltoallv (``start(call, send, recv, seq, phase, timeout)``), or run one
start = functools.partial(posted, AlltoallvExecution)
_run = functools.partial(run_blocking, AlltoallvExecution)


def bind(call: NativeCall, length_prefix: tuple[int, int] | None = None
         ) -> Callable[..., None]:
    """A blocking alltoallv of one signature: ``fn(send, recv, seq, timeout, phase=0)``
    (``length_prefix``: envelopes only, never an alltoallv's). Compiled (`table_runner`)
    when this rank's blocks fit its slot; else the Python protocol (`_run`)."""
    transport, area = direct.area_of(call)
    spec, rank = call.spec, call.rank
    others = [j for j in range(spec.size) if j != rank]
    compiled = table_runner(call, transport, area, layout_of(spec, rank, area.capacity),
                            others, others, _run)
    return compiled or functools.partial(_run, call)


def table_runner(call: NativeCall, transport: ShmTransport, area: DirectArea, lay: Layout,
                 others: list[int], readers: list[int], run: Callable[..., None]
                 ) -> Callable[..., None] | None:
    """The compiled blocking runner of ``call`` whose rank writes ``lay`` and reads the
    headers of ``others`` (None: not built, disabled, or this rank's blocks go as
    messages): it writes the header and blocks, waits for the peers' words, checks their
    headers and copies (`_direct`'s ``READ_TABLE``), and hands back to the Python protocol
    (``run``) whatever else happens."""
    _direct = direct._direct
    if _direct is None or not config.settings.compiled or lay.overflows:
        return None
    spec, rank, p = call.spec, call.rank, call.spec.size
    fingerprint = direct.call_fingerprint(spec)

    def slow(status: int, send: Any, recv: Any, seq: int, timeout: float | None,
             phase: int, confirm: bool) -> None:
        # 1: the slot was busy, nothing ran; 2 (peers late) and 5 (a header asks for more):
        # published, the rest in Python
        send = None if send is None else send.reshape(-1)
        recv = None if recv is None else recv.reshape(-1)
        run(call, send, recv, seq, timeout, phase, confirm, published=status != 1)

    slots = range(DIRECT_SLOTS)
    compiled = _direct.Runner(
        **direct.runner_words(call, transport, area, others),
        readers=tuple(readers), slow=slow, publishes=True, nbytes=0, fingerprint=fingerprint,
        mix=held_word(0, fingerprint), read_kind=_direct.READ_TABLE,
        src=[area.slot_offset[j][i] for i in slots for j in others],
        dst=[lay.expects[j][1] for j in others], len=[lay.expects[j][0] for j in others],
        self_copy=(lay.own[0], lay.own[2], lay.own[1]), count=0, op=0, dtype=0,
        head=lay.head.tobytes(), writes=[v for w in lay.writes for v in w],
        back=[lay.sends[j] for j in others], table=(1 + rank, 1 + p + rank, 1 + 2 * p + rank),
        slot_bytes=area.capacity)
    return compiled.run  # type: ignore[no-any-return]


def alltoallv_cost(spec: CallSpec, model: CostModel) -> float:
    """Half an α: one synchronisation, no message (the counts are each rank's own, so the
    bytes, which the ranks may not agree on, are left out)."""
    return 0.5 * model.alpha


def register() -> None:
    """Add the ``shm_direct`` record of ``alltoallv``."""
    add_algorithm(Algorithm(
        "alltoallv", direct.NAME, "alltoallv through shared-memory slots: each rank's blocks "
        "packed after a header of their lengths, read straight from the peers' slots (beyond "
        "a slot: out of the writer's memory, or as messages)", direct._no_schedule,
        cost=alltoallv_cost, needs=frozenset({direct.RESOURCE}),
        native=NativeAlgorithm(start, bind), transports=direct.TRANSPORTS))
