"""The waits of ``mpi_native``'s blocking calls (`collops.mpi.blocking`) as executions the
progress engine drives with the calls in flight: for the other ranks' entries on the node's
board (`BoardWait`, and `SettleWait` for a call a rank did not wait for), for the agreement
with the ranks of other nodes (`SpanningWait`), for an earlier call holding the same MPI
communicator (`SlotWait`); and the stall report of a call that waits too long.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from .. import config
from ..errors import CollectiveMismatch
from ..transport.stall import report, watch_of
from .board import Board
from .native import MPI_NATIVE, earlier_execution
from .spanning import SpanningAgreement

if TYPE_CHECKING:
    from .blocking import BlockingCall

#: the algorithm stall reports name for these waits (`runtime.stall` reads it)
NAME = MPI_NATIVE.name
#: where a call waits while it agrees with the ranks of other nodes (errors, stall reports)
SPANNING = "agreeing on the call with the ranks of other nodes"


def note_stall(runner: BlockingCall, where: str, seq: int | None = None) -> None:
    """A stall report (`COLLOPS_STALL_REPORT`) once ``runner``'s call has waited too long."""
    threshold = config.settings.stall_report
    if threshold is None:
        return
    watch_of(runner.transport).waiting(
        (runner.native.context, seq, runner.what), threshold,
        lambda waited: report(runner.rank, runner.what, seq, where, waited, None, threshold))


class BoardWait:
    """Waiting until the other ranks have posted a blocking call on the board, as an
    execution the progress engine drives (with the calls in flight) until it is `ready`."""

    __slots__ = ("runner", "board", "key", "seq", "context", "spec", "rank", "call", "left",
                 "deadline", "next_check")

    def __init__(self, runner: BlockingCall, board: Board, key: int, seq: int,
                 deadline: float | None) -> None:
        self.runner, self.board, self.key, self.seq = runner, board, key, seq
        self.context, self.spec, self.rank = runner.native.context, runner.spec, runner.rank
        self.call = runner.native  # its group, for stall reports
        self.left, self.deadline = 1, deadline
        self.next_check = time.monotonic() + runner.transport._check_every

    def ready(self) -> bool:
        """Whether the others have posted this call, or another one (a mismatch)."""
        posted, mismatch = self.board.compare(self.key, self.runner.fingerprint,
                                              self.runner.others)
        return posted or mismatch is not None

    def not_posted(self) -> list[int]:
        """The world ranks whose entries for this call the board does not show yet."""
        group = self.runner.native.group
        return [group[r] for r in self.board.not_posted(self.key, self.runner.others)]

    def agreed(self) -> bool:
        """Whether every rank posted this call (raises on a mismatch)."""
        runner = self.runner
        posted, mismatch = self.board.compare(self.key, runner.fingerprint, runner.others)
        if mismatch is not None:
            self.board.mismatched(mismatch, runner.rank, self.key, runner.fingerprint,
                                  runner.checked)
        return posted

    def poll(self) -> bool:
        """True once every rank posted this call; raises on a mismatch, a dead rank of this
        node, one that returned from its program without making it, or the deadline."""
        runner = self.runner
        if self.agreed():
            self.left = 0
            return True
        now = time.monotonic()
        if now >= self.next_check:
            self.next_check = now + runner.transport._check_every
            dead = runner.dead_peer()
            if dead is not None:
                raise runner.transport.dead_error(dead, f"to start {runner.what}")
            done = runner.transport._peers.first_finished(self.not_posted())
            if done is not None:
                raise runner.transport.finished_error(done, f"for it to start {runner.what}")
        if self.deadline is not None and now > self.deadline:
            raise runner.timeout_error("for the other ranks to start it")
        return False


class SettleWait(BoardWait):
    """Waiting until the other ranks have posted the call this rank deferred (a small bcast
    whose root did not wait: `Board.settle`), before it posts its next call."""

    __slots__ = ("current",)

    def __init__(self, runner: BlockingCall, board: Board, deferred: int, seq: int,
                 deadline: float | None, current: int) -> None:
        super().__init__(runner, board, deferred, seq, deadline)
        #: the key of the call that waits (posted as broken on a mismatch)
        self.current = current

    def ready(self) -> bool:
        """Whether the deferred call can be checked (or a mismatch raised)."""
        try:
            return self.agreed()
        except CollectiveMismatch:
            return True

    def agreed(self) -> bool:
        """Whether the deferred call is checked (raises on a mismatch)."""
        return self.board.settle(self.runner.others, self.rank,
                                 f"call #{self.seq} ({self.runner.what})", self.current)


class SpanningWait:
    """Waiting for a blocking call's agreement with the ranks of other nodes
    (`SpanningAgreement`), as an execution the progress engine drives with the calls in
    flight."""

    __slots__ = ("runner", "agreement", "seq", "context", "spec", "rank", "call", "left",
                 "deadline")

    def __init__(self, runner: BlockingCall, agreement: SpanningAgreement, seq: int,
                 deadline: float | None) -> None:
        self.runner, self.agreement, self.seq, self.deadline = runner, agreement, seq, deadline
        self.context, self.spec, self.rank = runner.native.context, runner.spec, runner.rank
        self.call = runner.native  # its group, for stall reports
        self.left = 1

    def poll(self) -> bool:
        """True once the ranks agree; raises on a mismatch, a call given up, the deadline."""
        if self.agreement.poll():
            self.left = 0
            return True
        if self.deadline is not None and time.monotonic() > self.deadline:
            error = self.runner.timeout_error(SPANNING)
            self.agreement.give_up(error)
            raise error
        return False


class SlotWait:
    """Waiting until no earlier call in flight shares a blocking call's MPI communicator, as
    an execution the progress engine drives (with those calls) until it completes."""

    __slots__ = ("runner", "seq", "context", "spec", "rank", "call", "left", "deadline")

    def __init__(self, runner: BlockingCall, seq: int, deadline: float | None) -> None:
        self.runner, self.seq, self.deadline, self.left = runner, seq, deadline, 1
        self.context, self.spec, self.rank = runner.native.context, runner.spec, runner.rank
        self.call = runner.native  # its group, for stall reports

    def poll(self) -> bool:
        """True once no earlier call holds the MPI communicator; raises past the deadline."""
        if earlier_execution(self.runner.native, self.seq, self) is None:
            self.left = 0
            return True
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise self.runner.timeout_error("for an earlier call on this communicator, which "
                                            "shares its MPI communicator, to finish")
        return False
