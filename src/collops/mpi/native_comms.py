"""The MPI transport's communicators for MPI's own collectives (``mpi_native``, ``hier``).

Each collops communicator gets a small pool of MPI communicators, begun by its first
``mpi_native`` call with ``MPI_Comm_idup`` and waited for without blocking (`collective_comm`);
on one node a fingerprint board, made with the communicator (`board_made`); across nodes an
agreement channel, made with the pool. `NativeComms` is the part of `MpiTransport` that keeps
them.

Why not made by blocking calls where first used: MPI lets ranks begin non-blocking
collectives on two communicators in opposite orders, and two ranks each blocked in the
making of a different communicator's (``MPI_Comm_create_group``, ``MPI_Win_allocate_shared``)
wait for each other for ever. A duplication begun on the communicator's own point-to-point MPI
communicator, on which nothing else is collective, is ordered by that communicator's calls
alone; the board needs a blocking call (MPI has no non-blocking shared window), so it is made
where the communicator is, which every member reaches at the same point of its calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .. import config
from ..errors import CollectiveMismatch, CollectiveTimeout, CommunicatorLimit, TransportError
from .board import Board
from .channel import Channel
from .liveness import BlockingGuard

#: MPI communicators per collops communicator for MPI's own collectives (see `collective_comm`)
COLLECTIVE_SLOTS = 8


#: what MPICH says when it has no communicator context left
_OUT_OF_CONTEXTS = "Too many communicators"
#: MPI communicators a collops communicator holds: its point-to-point two, its board's window
#: (two in MPICH), and `COLLECTIVE_SLOTS` more once ``mpi_native`` runs on it
MPI_COMMS_EACH = 4


def mpi_error(rank: int, what: str, exc: Any) -> TransportError | CommunicatorLimit:
    """The collops error for MPI's error ``exc`` on ``rank`` while doing ``what``:
    `CommunicatorLimit` when MPI has no communicator left, else `TransportError`."""
    try:
        message = exc.Get_error_string()
    except Exception:  # noqa: BLE001 - any description will do
        message = str(exc)
    if _OUT_OF_CONTEXTS in message:
        return CommunicatorLimit(
            f"rank {rank}: {what} failed: MPI has no communicator left (each collops "
            f"communicator holds {MPI_COMMS_EACH} of MPI's, {MPI_COMMS_EACH + COLLECTIVE_SLOTS} "
            "once mpi_native runs on it): free() the communicators no longer used. MPI error: "
            f"{message}")
    return TransportError(f"rank {rank}: {what} failed: MPI error: {message}")


def returning_errors(MPI: Any, comm: Any) -> Any:
    """``comm`` with MPI's errors returned to the caller (mpi4py raises them), not fatal."""
    comm.Set_errhandler(MPI.ERRORS_RETURN)
    return comm


class NativeComms:
    """The pools, boards and channels of MPI's own collectives, per collops communicator."""

    rank: int
    _MPI: Any
    _collective_base: Any
    _pools: dict[tuple[tuple[int, ...], int], list[Any]]
    _boards: dict[tuple[tuple[int, ...], int], Board | None]
    #: the boards of freed communicators, by group and serial, for the next over that group
    _spare_boards: dict[tuple[int, ...], dict[int, Board]]
    #: boards made over each group (a board's serial: the same on every member)
    _boards_made: dict[tuple[int, ...], int]
    _channels: dict[tuple[tuple[int, ...], int], Channel]
    _links: dict[tuple[tuple[int, ...], int], Any]
    #: pools being made: their MPI communicators and ``MPI_Comm_idup`` requests
    _making_pools: dict[tuple[tuple[int, ...], int], tuple[list[Any], list[Any]]]
    _hier: dict[int, tuple[Any, Any]]
    _capabilities: Any
    #: a guard for a blocking MPI call (`MpiTransport.blocking`)
    blocking: Callable[[str], BlockingGuard]
    watch: Callable[..., None]
    unwatch: Callable[[Any], None]

    def collective_comm(self, group: tuple[int, ...], context: int, slot: int) -> Any:
        """An MPI communicator over ``group`` (world ranks, in order) for MPI's collectives;
        None while the pool is being made (`pool_wait` waits for it).

        Each collops communicator (``group``, ``context``) gets `COLLECTIVE_SLOTS` MPI
        communicators; ``slot`` is taken modulo their number. MPI requires collectives on one
        communicator to start in the same order on every rank: the caller (``mpi_native``)
        keeps that order, by giving all of a call's operations one slot and starting a call's
        operations only once the earlier calls sharing its slot have finished. The world's
        pool is made with the transport. Another communicator's is begun by its first
        ``mpi_native`` call, without blocking (`_begin_pool`): that call may be non-blocking,
        and ranks may begin such calls on two communicators in opposite orders.
        """
        key = (group, context)
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pool_made(key)
            if pool is None:
                return None
        return pool[slot % len(pool)]

    def pool_wait(self, group: tuple[int, ...], context: int) -> PoolWait | None:
        """What to wait for (progressing the other calls) until ``collective_comm`` of
        ``(group, context)`` is made; None when it is."""
        if self.collective_comm(group, context, 0) is not None:
            return None
        return PoolWait(self, group, context)

    def _pool_made(self, key: tuple[tuple[int, ...], int]) -> list[Any] | None:
        """The pool of ``key`` once made: begun here if it was not, None while MPI makes
        it."""
        pending = self._making_pools.get(key)
        if pending is None:
            from .p2p import link_comm
            parent = link_comm(self._links, *key)
            if parent is None:  # a communicator with no MPI communicator of its own
                return self._pool_blocking(key)
            pending = self._making_pools[key] = self._begin_pool(key, parent)
        try:
            done = self._MPI.Request.Testall(pending[1])
        except self._MPI.Exception as exc:
            raise mpi_error(self.rank, f"making MPI communicators over ranks {list(key[0])}",
                            exc) from exc
        if not done:
            return None
        del self._making_pools[key]
        for request in pending[1]:
            self.unwatch(request)
        comms = [returning_errors(self._MPI, comm) for comm in pending[0]]
        pool = self._pools[key] = comms[:COLLECTIVE_SLOTS]
        if len(comms) > COLLECTIVE_SLOTS:
            self._channels[key] = Channel(comms[COLLECTIVE_SLOTS])
        return pool

    def _begin_pool(self, key: tuple[tuple[int, ...], int], parent: Any
                    ) -> tuple[list[Any], list[Any]]:
        """``MPI_Comm_idup`` of ``parent`` (the communicator's own point-to-point MPI
        communicator, on which no other collective runs) for each slot of the pool, and for
        the agreement channel when there is no board: ``(communicators, requests)``. Every
        member begins the same duplications at its first ``mpi_native`` call, so their order
        on ``parent`` is the same on every rank whichever call begins them."""
        group = key[0]
        wanted = COLLECTIVE_SLOTS + (self._boards.get(key) is None and len(group) > 1)
        comms, requests = [], []
        try:
            for _ in range(wanted):
                comm, request = parent.Idup()
                comms.append(comm)
                requests.append(request)
        except self._MPI.Exception as exc:
            raise mpi_error(self.rank, "making MPI communicators over ranks "
                            f"{list(group)} (MPI_Comm_idup)", exc) from exc
        for request in requests:
            self.watch(request, group)
        return comms, requests

    def _pool_blocking(self, key: tuple[tuple[int, ...], int]) -> list[Any]:
        """The pool of a communicator with no MPI communicator of its own (a create_group's
        agreement among the group), made by ``MPI_Comm_create_group`` on the spot."""
        group, context = key
        base = self._collective_base
        members = base.Get_group().Incl(list(group))
        try:
            with self.blocking("MPI_Comm_create_group"):
                first = returning_errors(self._MPI,
                                          base.Create_group(members, context & 0x7FFF))
                pool = [first] + [first.Dup() for _ in range(COLLECTIVE_SLOTS - 1)]
                board = self._boards[key] = self._board_for(group, first)
                if board is None and len(group) > 1:
                    self._channels[key] = Channel(returning_errors(self._MPI, first.Dup()))
        except self._MPI.Exception as exc:
            raise mpi_error(self.rank, f"making an MPI communicator over ranks "
                            f"{list(group)}", exc) from exc
        finally:
            members.Free()
        self._pools[key] = pool
        return pool

    def board_made(self, group: tuple[int, ...], context: int, comm: Any) -> None:
        """Make the fingerprint board of collops communicator ``(group, context)`` over
        ``comm`` (its own MPI communicator), where the communicator is made: collective over
        its ranks, at the same point on each, unlike a first ``mpi_native`` call (`Board`);
        under the caller's `MpiTransport.blocking` guard."""
        try:
            self._boards[(group, context)] = self._board_for(group, comm)
        except self._MPI.Exception as exc:
            raise mpi_error(self.rank, "making the fingerprint board over ranks "
                            f"{list(group)}", exc) from exc

    def release_comm(self, context: int, group: tuple[int, ...],
                     timeout: float | None) -> None:
        """Free the MPI communicators a freed collops communicator had for MPI's own
        collectives (every member frees the same pool: MPI_Comm_free is collective)."""
        from .p2p import free_link
        self._pool_settled(tuple(group), context, timeout)
        free_link(self, self._links, tuple(group), context)
        late = self._settle_board(tuple(group), context, timeout)
        board = self._boards.get((tuple(group), context))
        if board is not None and board.broken is not None:
            # a message of MPI's collective left unmatched on its MPI communicators: kept,
            # never freed, so MPI cannot give their context to a new communicator that would
            # meet it
            self._pools.pop((tuple(group), context), None)
            if late is not None:
                raise late
            return
        if board is not None:  # its shared window serves the next board over the group
            del self._boards[(tuple(group), context)]
            self._spare_boards.setdefault(tuple(group), {})[board.serial] = board
        pool = self._pools.pop((tuple(group), context), None)
        channel = self._channels.pop((tuple(group), context), None)
        if channel is not None:
            channel.close()
            pool = [*(pool or ()), channel.comm]
        # the pool's node and leader communicators go with it (`hier_comms` finds them by the
        # pool's objects, whose ids a later pool's objects may take). The board's shared window
        # stays, for the next communicator over the group (`_board_for`): MPI_Win_free
        # synchronises its node, which a free must not.
        freed = [comm for mc in pool or () for comm in self._hier.pop(id(mc), ())
                 if comm is not None]
        for mc in [*freed, *(pool or ())]:
            try:
                mc.Free()
            except self._MPI.Exception as exc:
                raise mpi_error(self.rank, "freeing an MPI communicator", exc) from exc
    def _pool_settled(self, group: tuple[int, ...], context: int, timeout: float | None
                      ) -> None:
        """Let a pool still being made for a freed communicator (its first call given up)
        finish, for up to ``timeout`` (10 s if None), so it is freed with the rest; one that
        does not finish (a member never began it) is left to MPI."""
        key = (group, context)
        end = time.monotonic() + (10.0 if timeout is None else timeout)
        while key in self._making_pools and self._pool_made(key) is None:
            if time.monotonic() > end:
                for request in self._making_pools.pop(key)[1]:
                    self.unwatch(request)
                return
            time.sleep(1e-3)

    def _settle_board(self, group: tuple[int, ...], context: int, timeout: float | None
                      ) -> CollectiveMismatch | None:
        """Check the call this rank deferred last on the board of ``group`` (`Board.settle`)
        before its communicator goes, for up to ``timeout`` (10 s if None); the mismatch found
        late, if any."""
        board = self._boards.get((group, context))
        if board is None or not board.pending[0]:
            return None
        others = [r for r in range(board.size) if r != board.rank]
        end = time.monotonic() + (10.0 if timeout is None else timeout)
        try:
            while not board.settle(others, board.rank, "freeing the communicator"):
                if time.monotonic() > end:
                    return None  # a rank that never came: nothing to check against
                time.sleep(1e-3)
        except CollectiveMismatch as exc:
            return exc
        return None

    def hier_comms(self, mc: Any, node: int, leader: bool) -> tuple[Any, Any]:
        """The MPI communicators of ``hier``'s phases under ``mc`` (one of `collective_comm`'s):
        this rank's node's, and the node leaders' (None off the leaders). Made by
        ``MPI_Comm_split`` on their first use, at the same point of ``mc``'s calls on every
        rank (a call's operations start in order on its MPI communicator)."""
        got = self._hier.get(id(mc))
        if got is None:
            MPI = self._MPI
            rank = mc.Get_rank()
            node_comm = returning_errors(MPI, mc.Split(node, rank))
            leaders = mc.Split(0 if leader else MPI.UNDEFINED, rank)
            got = self._hier[id(mc)] = (
                node_comm, None if leaders == MPI.COMM_NULL else returning_errors(MPI, leaders))
        return got

    def _board_for(self, group: tuple[int, ...], comm: Any) -> Board | None:
        """A board over ``comm`` (collective over it) when ``group`` lies on one node — as
        `capabilities` has the nodes, so ``COLLOPS_RANKS_PER_NODE`` splits one machine into
        nodes that agree across them as real ones do — else None."""
        nodes = self._capabilities.node_of_rank
        if len({nodes[r] for r in group}) > 1 or len(group) < 2:
            return None
        spares = self._spare_boards.get(group, {})
        # the members freed the same communicators, so they hold the same spares: they agree
        # on the newest (the least and the greatest of the members' newest), else make a new board
        mine = max(spares, default=0)
        MPI = self._MPI
        low, high = comm.allreduce(mine, op=MPI.MIN), comm.allreduce(mine, op=MPI.MAX)
        if low == high and low:
            return spares.pop(low).reuse(comm)
        made = self._boards_made[group] = self._boards_made.get(group, 0) + 1
        return Board.for_comm(self._MPI, comm, made)

    def agreement_channel(self, group: tuple[int, ...], context: int) -> Channel:
        """The agreement channel of ``collective_comm``'s pool over ``group`` (spanning
        nodes)."""
        return self._channels[(group, context)]

    def board(self, group: tuple[int, ...], context: int) -> Board | None:
        """The fingerprint board of ``collective_comm``'s pool over ``group`` (made with it;
        None when its ranks span nodes or there is one)."""
        return self._boards.get((group, context))


class PoolWait:
    """A wait for a communicator's pool (`NativeComms.pool_wait`), polled like an
    `Execution` by the progress engine, which progresses the other calls meanwhile; past
    ``COLLOPS_TIMEOUT`` (if set) a `CollectiveTimeout`."""

    left = 1

    def __init__(self, comms: NativeComms, group: tuple[int, ...], context: int) -> None:
        self.comms, self.group, self.context = comms, group, context
        timeout = config.settings.timeout
        self.timeout = timeout
        self.deadline = None if timeout is None else time.monotonic() + timeout

    def poll(self) -> bool:
        """Whether the pool is made."""
        if self.comms.collective_comm(self.group, self.context, 0) is not None:
            self.left = 0
            return True
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise CollectiveTimeout(
                f"rank {self.comms.rank}: the MPI communicators of mpi_native's first call on "
                f"the communicator over ranks {list(self.group)} were not made within "
                f"{self.timeout} s (MPI_Comm_idup: a member has not begun its first "
                "mpi_native call)")
        return False
