"""The ranks of the event-driven models with a window: steps, CPUs and sends in flight.

The flow model and the buffered packet model execute the schedules the same way and differ
only in how a message crosses the network. This mixin holds what they share: a step is ready
when its local dependencies are done (a receive also waits for its message); each rank has one
CPU, a send costing ``overhead`` and a copy or reduce ``bytes × gamma`` of it; a rank keeps at
most ``window`` sends in flight (0: no limit), from their issue until their message has arrived
(end-to-end), issuing the next ready send in schedule order when one arrives. A send's local
successors wait for its issue only. A model supplies the clock and two hooks: what happens when
a send has been issued (`_issued`, at the time given) and when a local step is due.
"""

from __future__ import annotations

import heapq

from ..schedule import StepKind
from .program import Program, step_lists

SEND, RECV = int(StepKind.SEND), int(StepKind.RECV)


class WindowedRanks:
    """Steps, CPUs and windows of the ranks (a mixin; see the module docstring)."""

    window: int
    overhead: float
    gamma: float

    def _init_ranks(self, program: Program) -> None:
        steps = step_lists(program)
        self.kind, self.step_bytes, self.step_rank = steps.kind, steps.nbytes, steps.rank
        self.succ_ptr, self.succ_idx, self.waiting = steps.succ_ptr, steps.succ_idx, steps.waiting
        self.msg_of_send, self.send_of_msg = steps.msg_of_send, steps.send_of_msg
        self.recv_of_msg = steps.recv_of_msg
        self.cpu_free = [0.0] * program.nranks
        self.in_flight = [0] * program.nranks
        self.pending: list[list[int]] = [[] for _ in range(program.nranks)]
        self.steps_done = 0
        self.finished = 0.0

    # -- what a model supplies -------------------------------------------------------------
    def _clock(self) -> float:
        """The simulated time now."""
        raise NotImplementedError

    def _issue_at(self, time: float, step: int) -> None:
        """Send ``step`` is issued (its overhead paid) at ``time``."""
        raise NotImplementedError

    def _local_done_at(self, time: float, step: int) -> None:
        """Copy or reduce ``step`` ends at ``time`` (then call `_complete`)."""
        raise NotImplementedError

    # -- the life cycle ----------------------------------------------------------------------
    def _ready(self, step: int) -> None:
        kind, rank = self.kind[step], self.step_rank[step]
        if kind == SEND:
            heapq.heappush(self.pending[rank], step)
            self._issue(rank)
        elif kind == RECV:
            self._complete(step)  # its message is in (one of its waits)
        else:
            start = max(self._clock(), self.cpu_free[rank])
            self.cpu_free[rank] = start + self.step_bytes[step] * self.gamma
            self._local_done_at(self.cpu_free[rank], step)

    def _issue(self, rank: int) -> None:
        """Issue the rank's ready sends, in schedule order, while its window has room."""
        pending = self.pending[rank]
        while pending and (self.window == 0 or self.in_flight[rank] < self.window):
            step = heapq.heappop(pending)
            self.in_flight[rank] += 1
            self.cpu_free[rank] = max(self._clock(), self.cpu_free[rank]) + self.overhead
            self._issue_at(self.cpu_free[rank], step)

    def _complete(self, step: int) -> None:
        self.steps_done += 1
        self.finished = max(self.finished, self._clock())
        for i in range(self.succ_ptr[step], self.succ_ptr[step + 1]):
            nxt = self.succ_idx[i]
            self.waiting[nxt] -= 1
            if self.waiting[nxt] == 0:
                self._ready(nxt)

    def _message_arrived(self, msg: int) -> None:
        """``msg`` has arrived: its sender's window frees a place, its receive may complete."""
        self.finished = max(self.finished, self._clock())
        rank = self.step_rank[self.send_of_msg[msg]]
        self.in_flight[rank] -= 1
        self._issue(rank)
        recv = self.recv_of_msg[msg]
        self.waiting[recv] -= 1
        if self.waiting[recv] == 0:
            self._ready(recv)
