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
from .idups import IdupBatch
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
    #: pools being made (`collective_comm`)
    _making_pools: dict[tuple[tuple[int, ...], int], IdupBatch]
    #: each communicator spanning nodes: its node's and its leaders' MPI communicators, made
    #: with it, the parents of ``hier``'s per slot (`hier_comms`)
    _hier_bases: dict[tuple[tuple[int, ...], int], tuple[Any, Any]]
    #: ``hier``'s communicators being made, per collops communicator
    _making_hier: dict[tuple[tuple[int, ...], int], IdupBatch]
    #: communicators made by ``idup`` whose board and ``hier`` parents wait for `made_due`
    _due: set[tuple[tuple[int, ...], int]]
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
        ``mpi_native`` call, without blocking (`IdupBatch`): that call may be non-blocking,
        and ranks may begin such calls on two communicators in opposite orders.
        """
        key = (group, context)
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pool_made(key)
            if pool is None:
                return None
        return pool[slot % len(pool)]

    def pool_wait(self, call: Any) -> PoolWait | None:
        """What ``call`` (a `NativeCall`) waits for, progressing the other calls, until
        ``collective_comm`` of its communicator is made; None when it is."""
        if self.collective_comm(call.group, call.context, 0) is not None:
            return None
        return PoolWait(self, call)

    def _pool_made(self, key: tuple[tuple[int, ...], int]) -> list[Any] | None:
        """The pool of ``key`` once made: begun here if it was not, None while MPI makes
        it."""
        pending = self._making_pools.get(key)
        if pending is None:
            from .p2p import link_comm
            parent = link_comm(self._links, *key)
            if parent is None:  # a communicator with no MPI communicator of its own
                return self._pool_blocking(key)
            # a duplicate of its own point-to-point communicator (on which nothing else is
            # collective) for each slot, and for the agreement channel when it has no board
            wanted = COLLECTIVE_SLOTS + (self._boards.get(key) is None and len(key[0]) > 1)
            pending = self._making_pools[key] = self._idups(key, [parent] * wanted)
        if not pending.done():
            return None
        del self._making_pools[key]
        pool = self._pools[key] = pending.comms[:COLLECTIVE_SLOTS]
        if len(pending.comms) > COLLECTIVE_SLOTS:
            self._channels[key] = Channel(pending.comms[COLLECTIVE_SLOTS])
        return pool

    def _idups(self, key: tuple[tuple[int, ...], int], parents: list[Any]) -> IdupBatch:
        """`IdupBatch` of ``parents`` for collops communicator ``key``."""
        rank, group = self.rank, list(key[0])
        return IdupBatch(self._MPI, parents, key[0], self.watch, self.unwatch,
                         lambda exc: mpi_error(rank, "making MPI communicators over ranks "
                                               f"{group} (MPI_Comm_idup)", exc))

    def _one_node(self, group: tuple[int, ...]) -> bool:
        """Whether the ranks of ``group`` share one node (as `capabilities` has the nodes)."""
        nodes = self._capabilities.node_of_rank
        return len({nodes[r] for r in group}) < 2

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

    def communicator_begun(self, group: tuple[int, ...], context: int) -> IdupBatch | None:
        """Begin, where an ``idup`` of collops communicator ``(group, context)`` is called,
        its new communicator's point-to-point MPI communicators: two duplicates of the
        parent's second one (on which nothing else is collective), in the parent's call
        order, polled until done (`communicator_made` takes them). None: the parent has no
        MPI communicator of its own (the new one is made the blocking way)."""
        from .p2p import link_comm
        parent = link_comm(self._links, group, context, second=True)
        return None if parent is None else self._idups((group, context), [parent, parent])

    def made_due(self, group: tuple[int, ...], context: int) -> None:
        """Make what an ``idup``'s communicator could not get without blocking — its board,
        and across nodes ``hier``'s node and leader communicators — at its first blocking
        ``mpi_native`` call (`blocking.BlockingCall`): a point every member reaches in the
        same place of its calls. Non-blocking calls before it agree through the channel and
        run ``hier`` as one MPI collective."""
        key = (group, context)
        if key not in self._due:
            return
        self._due.discard(key)
        from .p2p import link_comm
        own = link_comm(self._links, group, context)
        with self.blocking("MPI_Win_allocate_shared"):
            self.board_made(group, context, own)
            self.hier_bases_made(group, context, own)

    def due(self, group: tuple[int, ...], context: int) -> bool:
        """Whether ``(group, context)`` waits for `made_due`."""
        return (group, context) in self._due

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
        self._due.discard((tuple(group), context))
        self._pool_settled(tuple(group), context, timeout)
        free_link(self, self._links, tuple(group), context)
        for base in self._hier_bases.pop((tuple(group), context), ()):
            if base is not None:
                base.Free()
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
        self._boards.pop((tuple(group), context), None)
        if board is not None:  # its shared window serves the next board over the group
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
                 if comm is not None and comm is not mc]  # within a node: ``mc`` itself
        for mc in [*freed, *(pool or ())]:
            try:
                mc.Free()
            except self._MPI.Exception as exc:
                raise mpi_error(self.rank, "freeing an MPI communicator", exc) from exc

    def _pool_settled(self, group: tuple[int, ...], context: int, timeout: float | None
                      ) -> None:
        """Let a pool (or ``hier``'s communicators) still being made for a freed communicator
        (its first call given up) finish, for up to ``timeout`` (10 s if None), so it is freed
        with the rest; one that does not finish (a member never began it) is left to MPI."""
        key = (group, context)
        end = time.monotonic() + (10.0 if timeout is None else timeout)
        pool = self._making_pools.pop(key, None)
        if pool is not None and pool.settle(end):
            self._making_pools[key] = pool
            self._pool_made(key)  # kept, to be freed with the rest
        hier = self._making_hier.pop(key, None)
        if hier is not None and hier.settle(end):  # its communicators go with the pool's
            self._hier_installed(key, hier)

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

    def hier_comms(self, group: tuple[int, ...], context: int, mc: Any, node: int,
                   leader: bool, wait: bool = False) -> tuple[Any, Any] | None:
        """The MPI communicators of ``hier``'s phases under ``mc`` (one of `collective_comm`'s
        for collops communicator ``(group, context)``): this rank's node's, and the node
        leaders' (None off the leaders); None while they are being made (``wait``: block
        until they are, in a blocking call).

        A communicator spanning nodes has its node's and its leaders' MPI communicators from
        where it is made (`hier_bases_made`); the first ``hier`` call duplicates them for
        every slot at once (`IdupBatch`), without blocking: it may be non-blocking, begun on
        two communicators in opposite orders. Within one node the node's is ``mc`` itself (a
        call's steps go on it one after the other, and no other call starts on it meanwhile)
        and there are no leaders to join. A create_group's agreement, with no communicator of
        its own, splits ``mc`` on the spot, at the same point of ``mc``'s calls on every
        rank."""
        got = self._hier.get(id(mc))
        if got is not None:
            return got
        key = (group, context)
        if self._one_node(group):  # one node: its calls' own MPI communicator
            got = self._hier[id(mc)] = (mc, None)
            return got
        bases = self._hier_bases.get(key)
        if bases is None or key not in self._pools:
            got = self._hier[id(mc)] = self._hier_split(mc, node, leader)
            return got
        pending = self._making_hier.get(key)
        if pending is None:
            parents = [bases[0]] * COLLECTIVE_SLOTS + \
                ([bases[1]] * COLLECTIVE_SLOTS if bases[1] is not None else [])
            pending = self._making_hier[key] = self._idups(key, parents)
        if not pending.done(wait):
            return None
        self._hier_installed(key, pending)
        return self._hier[id(mc)]

    def _hier_split(self, comm: Any, node: int, leader: bool) -> tuple[Any, Any]:
        """``comm`` split into this rank's node's MPI communicator and the node leaders' (None
        off the leaders), collective over ``comm``."""
        MPI = self._MPI
        rank = comm.Get_rank()
        node_comm = returning_errors(MPI, comm.Split(node, rank))
        leaders = comm.Split(0 if leader else MPI.UNDEFINED, rank)
        return node_comm, None if leaders == MPI.COMM_NULL else returning_errors(MPI, leaders)

    def _hier_installed(self, key: tuple[tuple[int, ...], int], batch: IdupBatch) -> None:
        """``hier``'s communicators of ``batch`` (done) kept for the slots of ``key``'s pool,
        which they are freed with."""
        self._making_hier.pop(key, None)
        comms = batch.comms
        for i, slot in enumerate(self._pools.get(key, ())):
            self._hier[id(slot)] = (comms[i], comms[COLLECTIVE_SLOTS + i]
                                    if len(comms) > COLLECTIVE_SLOTS else None)

    def hier_bases_made(self, group: tuple[int, ...], context: int, comm: Any) -> None:
        """Split ``comm`` (collops communicator ``(group, context)``'s own, where it is made)
        into this rank's node's and the node leaders' MPI communicators, when ``group`` spans
        nodes: the parents of ``hier``'s (`hier_comms`)."""
        from .hier import Layout
        if self._one_node(group):
            return
        nodes = self._capabilities.node_of_rank
        layout = Layout(tuple(nodes[r] for r in group), comm.Get_rank())
        self._hier_bases[(group, context)] = self._hier_split(comm, layout.mine, layout.leader)

    def _board_for(self, group: tuple[int, ...], comm: Any) -> Board | None:
        """A board over ``comm`` (collective over it) when ``group`` lies on one node — as
        `capabilities` has the nodes, so ``COLLOPS_RANKS_PER_NODE`` splits one machine into
        nodes that agree across them as real ones do — else None."""
        if not self._one_node(group) or len(group) < 2:
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
    #: what a stall report says of it (`runtime.stall`)
    algorithm = "mpi_native"
    waits_for = "waiting for its communicator's MPI communicators to be made (MPI_Comm_idup)"

    def __init__(self, comms: NativeComms, call: Any) -> None:
        self.comms, self.group, self.context = comms, call.group, call.context
        self.spec, self.rank = call.spec, call.rank
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
