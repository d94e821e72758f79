"""The MPI transport: ranks of an MPI job, bytes moved by mpi4py point-to-point.

collops traffic lives on a duplicate of the job's communicator, so it can never match a
message of the user's own. The engine's tags are 64-bit integers, far beyond MPI's tag range
(``MPI.TAG_UB`` may be as small as 32767), so every message travels on **one** MPI tag and
carries its own header — engine tag, call fingerprint, size — and matching by engine tag
happens here, with an unexpected-message table, as in the other transports. MPI's
non-overtaking rule (messages from one sender on one communicator and tag arrive in the order
they were sent) is what makes this sound:

* **small** messages (at most `EAGER_LIMIT` bytes) are packed — header then payload — into
  one MPI message; the send is done at once (the bytes were copied), the MPI request is
  completed in the background.
* **large** messages go as a header message followed by the payload, sent straight from the
  caller's buffer. The receiver, having read the header from sender *s*, knows the next
  message from *s* is that payload; it takes it off MPI's queue with a matched probe
  (``MPI_Improbe``) and receives it with ``MPI_Imrecv`` directly into the posted buffer — at
  once if the receive is posted, or later, keeping the matched message handle as the
  unexpected entry (MPI holds the bytes, or the sender waits, meanwhile).

Nothing is posted to MPI for a collops receive until its message has arrived, so a receive
that is abandoned (a timeout, a mismatch) leaves no MPI request behind. A receive reports the
size and fingerprint that arrived; a size that differs from the posted buffer is drained
into scratch space and reported, for the engine to raise `MessageSizeMismatch`.

MPI has no portable "wait for any activity", so `wait_for_activity` polls, in the stages of
the shared-memory transport's wait (their durations from `collops.config.Settings`): it
spins for ``spin_seconds`` (not at all when this node has more ranks than cores), then yields
the core between polls for ``yield_seconds``, then sleeps with a growing delay (up to 1 ms;
0.1 ms while one of MPI's own non-blocking collectives is in flight, as those advance only
inside MPI calls), checking every ``sleep_slice`` that the ranks it waits for are alive. It
never burns a core for long, which matters when ranks outnumber cores. The transport also
hands out communicators for MPI's own collectives (the ``mpi_native`` algorithms), a small
pool per collops communicator, see `collective_comm`.

Failures. MPI errors return to collops (the error handler of its communicators is
``MPI_ERRORS_RETURN``) and become `TransportError`s naming the rank, what failed and MPI's
message. A dead rank never means a hang: most launchers end the job themselves; where one
does not (``mpiexec -disable-auto-cleanup``), a wait that needs a rank of this node whose
process is gone raises `PeerFailed` naming it (`liveness`: the pids of this node's ranks,
checked every ``sleep_slice``), and a rank blocked inside a blocking MPI call (making a
communicator) aborts the job naming the dead rank. A rank that returns from its program
waits alive in ``MPI_Finalize``: it marks itself finished on its node (`liveness.FINISHED`),
and a peer still waiting for its messages raises `PeerFailed` naming it. A rank that gives a
call up (`give_up`) tells its peers, who raise `CollectiveMismatch`. `world()` installs an
exception hook so that an uncaught exception on any rank prints that rank's traceback and
aborts the whole job (``MPI_Abort``) instead of leaving the other ranks waiting forever.
"""

from __future__ import annotations

import os
import struct
import time
from typing import Any

from .. import config
from ..algorithms.fingerprint import describe
from ..errors import CollopsError, PeerFailed, TransportError
from ..transport.base import Capabilities, Handle, Transport
from ..transport.tags import call_of_tag_base, is_point_to_point
from . import given_up, spanning
from .abort import abort_job, install_abort_hook
from .board import Board
from .channel import Channel
from .liveness import BlockingGuard, NodePeers, node_peers
from .native_comms import COLLECTIVE_SLOTS, NativeComms, mpi_error, returning_errors
from .spanning import AGREEMENT_BIT

#: seconds a rank keeps taking in the messages of a peer that returned from its program
#: before it says the peer left it waiting (`MpiTransport.check_peers`)
FINISHED_GRACE = 0.25

#: the one MPI tag all collops point-to-point messages use
WIRE_TAG = 0
#: largest payload packed with its header into one MPI message
EAGER_LIMIT = 32 * 1024
#: engine tag, fingerprint, payload size (bit 63 set: the payload follows separately)
_HEADER = struct.Struct("<QQQ")
HEADER_BYTES = _HEADER.size
_LARGE = 1 << 63
#: longest sleep between polls in `wait_for_activity`
MAX_SLEEP = 1e-3
#: longest sleep while one of MPI's own collectives is in flight (it needs MPI calls to move)
MAX_SLEEP_COLLECTIVE = 1e-4


def _mpi() -> Any:
    """The mpi4py ``MPI`` module, or a clear error naming the package to install."""
    try:
        from mpi4py import MPI
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise TransportError("the mpi transport needs mpi4py and an MPI library: "
                             "pip install 'collops[mpi]' (see docs/mpi.md)") from exc
    return MPI


class _LargeArrival:
    """A large message whose header has arrived; ``message`` is its matched payload."""

    __slots__ = ("message", "fingerprint", "nbytes")

    def __init__(self, message: Any, fingerprint: int, nbytes: int) -> None:
        self.message = message
        self.fingerprint = fingerprint
        self.nbytes = nbytes


class MpiTransport(NativeComms, Transport):
    """This process's rank of an MPI job (over a private duplicate of ``comm``)."""

    def __init__(self, comm: Any = None) -> None:
        MPI = _mpi()
        self._MPI = MPI
        base = MPI.COMM_WORLD if comm is None else comm
        self.comm = returning_errors(MPI, base.Dup())
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self._status = MPI.Status()
        self._inbox = bytearray(HEADER_BYTES + EAGER_LIMIT)
        self._inbox_view = memoryview(self._inbox)
        self._posted: dict[tuple[int, int], tuple[Handle, memoryview]] = {}
        self._unexpected: dict[tuple[int, int], tuple[bytes, int] | _LargeArrival] = {}
        #: sender -> (tag, fingerprint, nbytes) of the large payload it sends next
        self._payload_from: dict[int, tuple[int, int, int]] = {}
        #: MPI requests a collops handle waits for
        self._pending: list[tuple[Any, Handle]] = []
        #: MPI requests nobody waits for (packed sends, drained payloads) and their buffers
        self._background: list[tuple[Any, object]] = []
        #: point-to-point sends this rank started over MPI (a blocking barrier runs MPI's own
        #: barrier, to flush them, when any rank sent some since its last one: `board.Board`)
        self._sends = 0
        #: requests of MPI collectives in flight, whose completion wakes `wait_for_activity`,
        #: with the ranks (of ``comm``) taking part
        self._watched: list[tuple[Any, tuple[int, ...]]] = []
        #: calls waiting for the other ranks' entries on a `Board`, whose ``ready()`` ends a
        #: `wait_for_activity`
        self._wakers: list[Any] = []
        self._closed = False
        #: (rank, tag >> given_up.CALL_SHIFT) of the calls other ranks gave up -> the
        #: rank that gave the call up first and its error
        self._given_up: dict[tuple[int, int], tuple[int, str]] = {}
        #: ``hier``'s communicators under each of `collective_comm`'s (by its id)
        self._hier: dict[int, tuple[Any, Any]] = {}
        #: the thread watching this rank's blocking MPI calls (`blocking.Watchdog`)
        self._watchdog: Any = None
        self._collective_base = returning_errors(MPI, base.Dup())
        self._pools: dict[tuple[tuple[int, ...], int], list[Any]] = {
            (tuple(range(self.size)), 0):
                [self._collective_base.Dup() for _ in range(COLLECTIVE_SLOTS)]}
        self._making_pools: dict[tuple[tuple[int, ...], int], Any] = {}
        self._hier_bases: dict[tuple[tuple[int, ...], int], tuple[Any, Any]] = {}
        self._making_hier: dict[tuple[tuple[int, ...], int], Any] = {}
        self._due: set[tuple[tuple[int, ...], int]] = set()
        self._peers = NodePeers({})
        #: (group, context) -> each collops communicator's MPI point-to-point (`p2p.Link`)
        self._links: dict[tuple[tuple[int, ...], int], Any] = {
            (tuple(range(self.size)), 0): (returning_errors(MPI, base.Dup()),
                                           returning_errors(MPI, base.Dup()))}
        nodes, cpus_here = self._nodes()
        self._capabilities = Capabilities("mpi", nodes, resources=frozenset({"mpi"}))
        self._spare_boards: dict[tuple[int, ...], dict[int, Board]] = {}
        self._boards_made: dict[tuple[int, ...], int] = {}
        #: each pool's fingerprint board (None: its ranks span nodes), see `board`
        self._boards = {key: self._board_for(key[0], pool[0])
                        for key, pool in self._pools.items()}
        #: each pool's agreement channel when its ranks span nodes (`spanning`)
        self._channels = {key: Channel(self._collective_base.Dup())
                          for key, board in self._boards.items()
                          if board is None and len(key[0]) > 1}
        world = tuple(range(self.size))
        self.hier_bases_made(world, 0, self._links[(world, 0)][0])
        ranks_here = nodes.count(nodes[self.rank])
        s = config.settings
        self._spin_seconds = s.spin_seconds if ranks_here <= cpus_here else 0.0
        self._yield_seconds, self._check_every = s.yield_seconds, s.sleep_slice
        self._next_check = 0.0

    @classmethod
    def world(cls) -> MpiTransport:
        """The transport over ``MPI.COMM_WORLD``; an uncaught exception then aborts the job."""
        transport = cls()
        install_abort_hook(transport.rank, transport.size)
        import atexit
        atexit.register(transport.close)
        return transport

    def _nodes(self) -> tuple[tuple[int, ...], int]:
        """Node id of every rank (ranks in one ``COMM_TYPE_SHARED`` split share a node), and
        how many CPUs this node's ranks may use together (mpiexec may pin each to one)."""
        MPI = self._MPI
        shared = self.comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        leader = shared.allreduce(self.rank, op=MPI.MIN)
        masks = shared.allgather(sorted(os.sched_getaffinity(0)))
        self._peers = node_peers(MPI, self.comm, shared)
        self._node_comm = shared  # under the window of the node's finished words
        leaders = self.comm.allgather(leader)
        number = {lead: i for i, lead in enumerate(sorted(set(leaders)))}
        cpus = len(set().union(*masks))
        per_node = config.settings.ranks_per_node
        if per_node is not None:  # "nodes" on one machine, for node-aware algorithms' tests
            return tuple(r // per_node for r in range(self.size)), cpus
        return tuple(number[lead] for lead in leaders), cpus

    # -- sending -----------------------------------------------------------------------------
    def unexpected_for_call(self, value: int, shift: int) -> tuple[int, int] | None:
        """``(peer, fingerprint)`` of an unmatched message with ``tag >> shift == value``."""
        for (peer, tag), arrived in self._unexpected.items():
            if tag >> shift == value:
                return peer, (arrived.fingerprint if isinstance(arrived, _LargeArrival)
                              else arrived[1])
        return None

    def arrived(self, peer: int, tag: int) -> int | None:
        """The size of the unmatched message ``(peer, tag)`` this rank has taken off MPI's
        queue, if any."""
        arrived = self._unexpected.get((peer, tag))
        if arrived is None:
            return None
        return arrived.nbytes if isinstance(arrived, _LargeArrival) else len(arrived[0])

    def lost(self, peer: int) -> tuple[PeerFailed, bool] | None:
        """``(PeerFailed, True)`` if ``peer`` ran on this node and its process is gone (MPI
        tells nothing of other nodes; their launcher ends the job), else None."""
        if peer != self.rank and self._peers.first_dead({peer}) is not None:
            return self.noted(PeerFailed(
                peer, f"its process (pid {self._peers.pids[peer]}) is gone while rank "
                f"{self.rank} waited for it over MPI")), True
        if peer != self.rank and self._peers.first_finished({peer}) is not None:
            self._advance()  # take what it sent before it finished
            return self.finished_error(peer), False
        return None

    def isend(self, peer: int, tag: int, data: memoryview, fingerprint: int = 0) -> Handle:
        """Send ``data``: packed with its header when small (done at once), else in two."""
        n = data.nbytes
        h = Handle(peer, tag, n)
        self._sends += 1
        try:
            if n <= EAGER_LIMIT:
                packet = bytearray(HEADER_BYTES + n)
                _HEADER.pack_into(packet, 0, tag, fingerprint, n)
                if n:
                    packet[HEADER_BYTES:] = data
                self._background.append((self.comm.Isend(packet, peer, WIRE_TAG), packet))
                h.done = True
                return h
            header = _HEADER.pack(tag, fingerprint, n | _LARGE)
            self._background.append((self.comm.Isend(header, peer, WIRE_TAG), header))
            self._pending.append((self.comm.Isend(data, peer, WIRE_TAG), h))
        except self._MPI.Exception as exc:
            call = describe(fingerprint).split(" ")[0] if fingerprint else "a message"
            raise mpi_error(self.rank, f"{call} call #{call_of_tag_base(tag)[1]}: sending "
                            f"{n} bytes to rank {peer}", exc) from exc
        return h

    # -- receiving ---------------------------------------------------------------------------
    def irecv(self, peer: int, tag: int, out: memoryview) -> Handle:
        """Receive the message ``(peer, tag)`` into ``out`` (matched here, by engine tag)."""
        h = Handle(peer, tag)
        key = (peer, tag)
        arrived = self._unexpected.pop(key, None)
        if arrived is None and self._unexpected and not tag & AGREEMENT_BIT and \
                not is_point_to_point(tag):
            crossed = spanning.crossing(self._unexpected, tag)
            if crossed is not None:  # the agreement message came first
                h.nbytes, h.fingerprint, h.done = crossed[0], crossed[1], True
                return h
        if arrived is None:
            self._posted[key] = (h, out)
        elif isinstance(arrived, _LargeArrival):
            self._receive_large(h, out, arrived.message, arrived.fingerprint, arrived.nbytes)
        else:
            _fill(h, out, memoryview(arrived[0]), arrived[1])
        return h

    def _drain(self) -> bool:
        """Take every message MPI has for us off its queue; True if there was any."""
        status, comm, any_source = self._status, self.comm, self._MPI.ANY_SOURCE
        got = False
        while True:
            message = comm.Improbe(any_source, WIRE_TAG, status)
            if message is None:
                return got
            got = True
            source = status.Get_source()
            expected = self._payload_from.pop(source, None)
            if expected is not None:
                tag, fingerprint, nbytes = expected
                posted = self._posted.pop((source, tag), None)
                if posted is None:
                    self._unexpected[(source, tag)] = _LargeArrival(message, fingerprint, nbytes)
                else:
                    self._receive_large(posted[0], posted[1], message, fingerprint, nbytes)
                continue
            message.Recv(self._inbox)
            tag, fingerprint, nbytes = _HEADER.unpack_from(self._inbox)
            if given_up.is_marker(fingerprint, nbytes):  # `give_up`'s
                self._given_up[(source, tag >> given_up.CALL_SHIFT)] = given_up.read(
                    nbytes, self._inbox_view[HEADER_BYTES:])
                continue
            if nbytes & _LARGE:
                self._payload_from[source] = (tag, fingerprint, nbytes & ~_LARGE)
                continue
            payload = self._inbox_view[HEADER_BYTES: HEADER_BYTES + nbytes]
            posted = self._posted.pop((source, tag), None)
            if posted is None and tag & AGREEMENT_BIT and not is_point_to_point(tag):
                posted = spanning.crossed(self._posted, tag)
                if posted is not None:  # its receiver learns the sender's call from it
                    posted[0].nbytes, posted[0].fingerprint = nbytes, fingerprint
                    posted[0].done = True
                    continue
            if posted is None:
                self._unexpected[(source, tag)] = (bytes(payload), fingerprint)
            else:
                _fill(posted[0], posted[1], payload, fingerprint)

    def _receive_large(self, h: Handle, out: memoryview, message: Any, fingerprint: int,
                       nbytes: int) -> None:
        """Receive a matched large payload into ``out`` (or drain it when sizes differ)."""
        h.nbytes = nbytes
        h.fingerprint = fingerprint
        if out.nbytes == nbytes:
            self._pending.append((message.Irecv(out), h))
            return
        scratch = bytearray(nbytes)
        self._background.append((message.Irecv(scratch), scratch))
        h.done = True

    # -- progress ----------------------------------------------------------------------------
    def _advance(self) -> bool:
        """One round of progress; True if anything arrived or completed."""
        try:
            moved = self._drain()
            if self._pending:
                still = []
                for request, h in self._pending:
                    if request.Test():
                        h.done = True
                        moved = True
                    else:
                        still.append((request, h))
                self._pending[:] = still  # in place: compiled runners hold the list
            if self._background:
                self._background[:] = [(r, b) for r, b in self._background if not r.Test()]
        except self._MPI.Exception as exc:
            calls = sorted({call_of_tag_base(tag)[1] for _, tag in self._posted}
                           | {call_of_tag_base(h.tag)[1] for _, h in self._pending})
            numbers = ", ".join(f"#{c}" for c in calls) or "none"
            raise mpi_error(self.rank, f"receiving or completing the messages of calls "
                            f"({numbers})", exc) from exc
        return moved

    def progress(self) -> None:
        """Advance pending operations without blocking."""
        self._advance()

    def wait_for_activity(self, timeout: float | None) -> None:
        """Poll until something arrives or completes, or ``timeout``: spin, yield, then sleep,
        checking in the sleep stage that the ranks awaited are alive (`PeerFailed`)."""
        start = time.monotonic()
        end = None if timeout is None else start + timeout
        # MPI's non-blocking collectives progress only inside MPI calls: keep calling often
        longest = MAX_SLEEP_COLLECTIVE if self._watched else MAX_SLEEP
        delay = 2e-5
        while True:
            if self._advance():
                return
            if self._watched and self._watched_done():
                return
            if self._wakers and any(w.ready() for w in self._wakers):
                return
            now = time.monotonic()
            if end is not None and now >= end:
                return
            waited = now - start
            if waited < self._spin_seconds:
                continue
            if waited < self._spin_seconds + self._yield_seconds:
                os.sched_yield()
                continue
            if self._given_up and self._posted:
                given_up.check(self.rank, self._posted, self._given_up)
            if now >= self._next_check:
                self._next_check = now + self._check_every
                self.check_peers()
            time.sleep(delay if end is None else min(delay, end - now))
            delay = min(delay * 2, longest)

    def _watched_done(self) -> bool:
        try:
            return any(r.Get_status() for r, _ in self._watched)
        except self._MPI.Exception as exc:
            raise mpi_error(self.rank, "testing MPI's collectives in flight", exc) from exc

    def awaited(self) -> set[int]:
        """The ranks this rank waits for: peers of its pending messages and the members of
        MPI collectives in flight."""
        ranks = self._awaited_messages()
        for _, group in self._watched:
            ranks.update(group)
        for waker in self._wakers:
            ranks.update(waker.not_posted())
        ranks.discard(self.rank)
        return ranks

    def _awaited_messages(self) -> set[int]:
        """The ranks this rank awaits a message from, or whose receive of its send is due."""
        ranks = {peer for peer, _ in self._posted} | set(self._payload_from)
        ranks.update(h.peer for _, h in self._pending)
        return ranks

    def check_peers(self) -> None:
        """Raise `PeerFailed` if a rank this one waits for ran on this node and is gone, or
        returned from its program (`liveness.FINISHED`) before sending what this rank awaits
        or posting the call this rank waits for on a board."""
        if self._channels and self._posted:
            spanning.cross_channels(self._channels, self._posted)
        peers = self._peers
        dead = peers.first_dead(self.awaited())
        if dead is not None:
            raise self.dead_error(dead, "over MPI")
        if peers.words is None:
            return
        if peers.first_finished(self._awaited_messages()) is not None:
            # what it sent before it finished is on its way: its sends completed before it
            # said so, but MPI may take more than one pass of this rank's progress to match
            # them (a flake of the 4-rank features test, when one pass was all it got)
            end = time.monotonic() + FINISHED_GRACE
            while True:
                self._advance()
                done = peers.first_finished(self._awaited_messages())
                if done is None:
                    break
                if time.monotonic() >= end:
                    raise self.finished_error(done)
                time.sleep(1e-4)
        for waker in self._wakers:
            done = peers.first_finished(waker.not_posted())
            if done is not None:
                raise self.finished_error(done, "for it to make the same call")

    def finished_error(self, peer: int, what: str = "for its messages") -> PeerFailed:
        """The error of a rank that waits ``what`` from ``peer``, which returned from its
        program: naming the rank ``peer``'s own failure followed from, if it noted one."""
        return self._failed(peer, "returned from its program",
                            "it returned from its program (finished with collops)",
                            f"still waited {what} over MPI")

    def dead_error(self, peer: int, what: str) -> PeerFailed:
        """The error of a rank that waited for ``peer`` (``what``: how), whose process is
        gone: naming the rank ``peer``'s own failure followed from, if it noted one before it
        went (a rank that raised because of another and then exited)."""
        pid = self._peers.pids[peer]
        return self._failed(peer, f"is gone (pid {pid})",
                            f"its process (pid {pid}, on rank {self.rank}'s node) is gone",
                            f"waited for it {what}")

    def _failed(self, peer: int, cause_how: str, own_how: str, waiting: str) -> PeerFailed:
        """`PeerFailed` naming the cause ``peer`` noted (``cause_how``: what ``peer`` did),
        else ``peer`` itself (``own_how``), while this rank was ``waiting``."""
        cause = self._peers.cause(peer)
        if cause is not None and cause != self.rank:
            return self.noted(PeerFailed(
                cause, f"rank {peer}, failing because of it, {cause_how} while rank "
                f"{self.rank} {waiting}"))
        return self.noted(PeerFailed(peer, f"{own_how} while rank {self.rank} {waiting}"))

    def noted(self, error: PeerFailed) -> PeerFailed:
        """``error``, its failed rank noted as the cause of this rank's failure."""
        self.note_cause(error.failed_rank)
        return error

    def note_cause(self, failed: int) -> None:
        """Note that this rank's failure follows from rank ``failed``'s, for the peers that
        see this rank finish to name ``failed`` (`NodePeers.note_cause`)."""
        self._peers.note_cause(self.rank, failed)

    def give_up(self, tag_base: int, error: BaseException, fingerprint: int | None = None
                ) -> None:
        """This rank abandoned the phase of a call whose tag base is ``tag_base`` after
        ``error``. A `PeerFailed` is noted as the cause of this rank's own failure (`noted`);
        after any other collops error its peers are told (`given_up.tell`)."""
        if isinstance(error, PeerFailed):
            self.noted(error)
        elif isinstance(error, CollopsError) and not self._closed:
            given_up.tell(self, tag_base, error, _HEADER, WIRE_TAG)

    def blocking(self, call: str) -> BlockingGuard:
        """A guard for a blocking MPI call: the job is aborted if a rank of this node dies
        meanwhile (a blocked call would never return)."""
        return BlockingGuard(self._peers, self.rank, call, abort_job)

    # -- point-to-point on MPI's own (`mpi/p2p.py`) ----------------------------------------------
    def communicator_made(self, group: tuple[int, ...], context: int, begun: Any = None
                          ) -> None:
        """Make the MPI communicators of collops communicator ``(group, context)``'s
        point-to-point, and its fingerprint board: called where that communicator is made,
        collectively over ``group``. ``begun``: an ``idup``'s (`communicator_begun`, done),
        whose point-to-point ones it holds; its board waits (`made_due`)."""
        from .p2p import free_link, link_comm, make_link
        if begun is not None:
            self._links[(group, context)] = (begun.comms[0], begun.comms[1])
            self._due.add((group, context))
            return
        with self.blocking("MPI_Comm_create_group"):
            make_link(self, self._links, group, context)
            try:
                own = link_comm(self._links, group, context)
                self.board_made(group, context, own)
                self.hier_bases_made(group, context, own)
            except BaseException:
                free_link(self, self._links, group, context)
                raise

    def point_to_point_link(self, group: tuple[int, ...], context: int) -> Any:
        """The `p2p.Link` of collops communicator ``(group, context)`` (None: it was not made
        through `communicator_made`, and its point-to-point takes the transport's messages)."""
        from .p2p import link_of
        return link_of(self, self._links, group, context)

    def watch(self, request: Any, group: tuple[int, ...] = ()) -> None:
        """Let ``request``'s completion end a `wait_for_activity`; ``group``: the ranks whose
        death it waits on (`check_peers`)."""
        self._watched.append((request, group))

    def unwatch(self, request: Any) -> None:
        """Stop watching ``request``."""
        for i, (r, _) in enumerate(self._watched):
            if r is request:
                del self._watched[i]
                return

    # -- the rest ------------------------------------------------------------------------------
    def capabilities(self) -> Capabilities:
        """Name "mpi", which ranks share a node, and the "mpi" resource (for mpi_native)."""
        return self._capabilities

    def close(self, grace: float = 2.0) -> None:
        """Let background sends finish (up to ``grace`` seconds) before MPI is finalized."""
        if self._closed:
            return
        self._closed = True
        for channel in self._channels.values():
            channel.close()
        dead = self._peers.first_dead()
        if dead is not None:  # MPI_Finalize would wait for it for ever
            abort_job(f"collops: MPI rank {dead} (pid {self._peers.pids[dead]}) is gone; "
                      f"rank {self.rank} aborts the job instead of finalizing MPI")
        end = time.monotonic() + grace
        try:
            while (self._background or self._pending) and time.monotonic() < end:
                if not self._advance():
                    time.sleep(1e-3)
            from .p2p import flush_links
            flush_links(self._links, end)
        except TransportError:
            pass
        self._peers.mark_finished(self.rank)  # its peers still waiting for it are told


def _fill(h: Handle, out: memoryview, payload: memoryview, fingerprint: int) -> None:
    """Complete a receive from bytes at hand (copied only when the sizes agree)."""
    h.nbytes = payload.nbytes
    h.fingerprint = fingerprint
    if payload.nbytes == out.nbytes and payload.nbytes:
        out[:] = payload
    h.done = True
