"""The MPI transport's communicators for MPI's own collectives (``mpi_native``, ``hier``).

Each collops communicator gets a small pool of MPI communicators, made where it is first
used; on one node a fingerprint board beside it, across nodes an agreement channel (see
`collective_comm`). `NativeComms` is the part of `MpiTransport` that keeps them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..errors import CollectiveMismatch, TransportError
from .board import Board
from .channel import Channel
from .liveness import BlockingGuard

#: MPI communicators per collops communicator for MPI's own collectives (see `collective_comm`)
COLLECTIVE_SLOTS = 8


def mpi_error(rank: int, what: str, exc: Any) -> TransportError:
    """The collops error for MPI's error ``exc`` on ``rank`` while doing ``what``."""
    try:
        message = exc.Get_error_string()
    except Exception:  # noqa: BLE001 - any description will do
        message = str(exc)
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
    _hier: dict[int, tuple[Any, Any]]
    _capabilities: Any
    #: a guard for a blocking MPI call (`MpiTransport.blocking`)
    blocking: Callable[[str], BlockingGuard]

    def collective_comm(self, group: tuple[int, ...], context: int, slot: int) -> Any:
        """An MPI communicator over ``group`` (world ranks, in order) for MPI's collectives.

        Each collops communicator (``group``, ``context``) gets `COLLECTIVE_SLOTS` MPI
        communicators; ``slot`` is taken modulo their number. MPI requires collectives on one
        communicator to start in the same order on every rank: the caller (``mpi_native``)
        keeps that order, by giving all of a call's operations one slot and starting a call's
        operations only once the earlier calls sharing its slot have finished. The world's
        pool is made with the transport; another group's on its first use (a blocking step,
        collective over the group's ranks).
        """
        key = (group, context)
        pool = self._pools.get(key)
        if pool is None:
            base = self._collective_base
            members = base.Get_group().Incl(list(group))
            try:
                with self.blocking("MPI_Comm_create_group"):
                    first = returning_errors(self._MPI,
                                              base.Create_group(members, context & 0x7FFF))
                    pool = [first] + [first.Dup() for _ in range(COLLECTIVE_SLOTS - 1)]
                    board = self._boards[key] = self._board_for(group, first)
                    if board is None and len(group) > 1:
                        self._channels[key] = Channel(returning_errors(self._MPI,
                                                                        first.Dup()))
            except self._MPI.Exception as exc:
                raise mpi_error(self.rank, f"making an MPI communicator over ranks "
                                f"{list(group)}", exc) from exc
            finally:
                members.Free()
            self._pools[key] = pool
        return pool[slot % len(pool)]

    def release_comm(self, context: int, group: tuple[int, ...],
                     timeout: float | None) -> None:
        """Free the MPI communicators a freed collops communicator had for MPI's own
        collectives (every member frees the same pool: MPI_Comm_free is collective)."""
        from .p2p import free_link
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
