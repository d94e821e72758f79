"""The agreement on an ``mpi_native`` call among ranks on several nodes, before MPI's collective.

Ranks that share a node agree through their `Board`; ranks on several nodes exchange the
call's words instead: its fingerprint and whether it is blocking (MPI's blocking and
non-blocking collectives never match each other). This is a dissemination: in round ``k``
rank ``r`` sends what it has folded so far to rank ``r + 2**k`` and folds in what rank
``r - 2**k`` sent (the maximum of each word and of its complement), so after
``ceil(log2 p)`` rounds every rank holds every rank's words and all reach the same verdict.

It runs on the transport's own tagged messages (the phase's tag space, message numbers with
the top bit set, as `runtime.agreement`'s), not as an MPI collective, because a rank may give
a call up (an argument only it sees is wrong, a mismatch it saw) while the others wait in
the agreement. Its marker (`given_up`) then reaches the ranks that wait for its messages, who
raise `CollectiveMismatch` quoting it and give the call up in turn, so every rank is told;
and nothing is left behind, since a message of that call that nobody receives matches no
later call. An MPI collective could not be left so: the rank that gave up cannot know
whether its peers chose ``mpi_native`` (its own arguments are the wrong ones), and a
contribution nobody matches would pair with the communicator's next collective.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..algorithms import fingerprint as fp
from ..errors import CollectiveMismatch, CollectiveTimeout, CollopsError
from ..transport.base import Handle
from ..transport.tags import SEQ_BITS, make_tag_base
from . import given_up

#: the bit of a message number that marks an agreement message (`runtime.agreement`'s too)
AGREEMENT_BIT = 1 << (SEQ_BITS - 1)
_ALL = 2**64 - 1
#: the words each message carries: the maxima of fingerprint, its complement, blocking flag
#: and its complement (a rank's own words before any folding)
WORDS = 4
#: longest wait between checks of the deadline and the stall report
SLICE = 0.25


class SpanningAgreement:
    """One phase's agreement among the ranks of ``group`` (world ranks; this is ``rank``)."""

    __slots__ = ("transport", "group", "rank", "size", "tag_base", "fingerprint", "blocking",
                 "what", "folded", "inbox", "round", "receive", "told", "odd", "done")

    def __init__(self, transport: Any, group: Sequence[int], rank: int, context: int, seq: int,
                 phase: int, fingerprint: int, blocking: bool, what: str) -> None:
        self.transport, self.group, self.rank, self.size = transport, group, rank, len(group)
        self.tag_base = make_tag_base(context, seq, phase)
        self.fingerprint, self.blocking, self.what = fingerprint, blocking, what
        flag = int(blocking)
        self.folded = np.array([fingerprint, ~fingerprint & _ALL, flag, ~flag & _ALL],
                               np.uint64)
        self.inbox = np.empty(WORDS, np.uint64)
        self.round = 0
        self.receive: Handle | None = None
        #: the others have heard that this rank gave the call up
        self.told = False
        #: ``(rank, fingerprint)`` of the first message of another call, named in the error
        self.odd: tuple[int, int] | None = None
        self.done = False
        self._step()

    # -- the rounds ----------------------------------------------------------------------------
    def _step(self) -> None:
        """Send this round's message and post its receive (or finish after the last)."""
        distance = 1 << self.round
        if distance >= self.size:
            self.done = True
            return
        me, group, base = self.rank, self.group, self.tag_base | AGREEMENT_BIT
        # an eager send: its bytes are copied at once
        self.transport.isend(group[(me + distance) % self.size], base | me,
                             self.folded.data.cast("B"), self.fingerprint)
        source = (me - distance) % self.size
        self.receive = self.transport.irecv(group[source], base | source,
                                            self.inbox.data.cast("B"))

    def poll(self) -> bool:
        """Advance without blocking; True once every rank's words are in (raises
        `CollectiveMismatch` if the calls differ, or if a peer gave the call up)."""
        try:
            return self._poll()
        except CollopsError as exc:
            self.give_up(exc)
            raise

    def _poll(self) -> bool:
        if self.done:
            return True
        self.transport.progress()
        while self.receive is not None and self.receive.done:
            h, self.receive = self.receive, None
            if h.error is not None:
                raise h.error
            if h.nbytes == WORDS * 8:  # what its sender folded, its own call or not
                np.maximum(self.folded, self.inbox, out=self.folded)
            else:  # another protocol's message (a root agreement's): its call's fingerprint
                theirs = np.array([h.fingerprint, ~h.fingerprint & _ALL], np.uint64)
                np.maximum(self.folded[:2], theirs, out=self.folded[:2])
            if h.fingerprint != self.fingerprint:  # its sender named in the error
                self.odd = self.odd or ((self.rank - (1 << self.round)) % self.size,
                                        h.fingerprint)
            self.round += 1
            self._step()
        if self.done:
            self._verdict()
            return True
        given = self.transport._given_up
        if given:  # a marker: a peer gave this call up (`given_up`), tell at once
            call = self.tag_base >> given_up.CALL_SHIFT
            told = [peer for peer in self.group if (peer, call) in given]
            # the rank that gave the call up first, if its own marker is in
            told.sort(key=lambda peer: given[(peer, call)][0] != peer)
            given_up.check(self.transport.rank, [(peer, self.tag_base) for peer in told[:1]],
                           given)
        stray = self.transport.unexpected_for_call(self.tag_base >> SEQ_BITS, SEQ_BITS)
        if stray is not None and stray[1] not in (0, self.fingerprint):
            who = self.group.index(stray[0]) if stray[0] in self.group else stray[0]
            raise self._mismatch(f"rank {who}", stray[1])
        return False

    def _verdict(self) -> None:
        if self.odd is not None:
            raise self._mismatch(f"rank {self.odd[0]}", self.odd[1])
        words = [int(w) for w in self.folded]
        highest, lowest = words[0], ~words[1] & _ALL
        if highest != self.fingerprint or lowest != self.fingerprint:
            raise self._mismatch("another rank",
                                 highest if highest != self.fingerprint else lowest)
        if words[2] != (~words[3] & _ALL):  # some rank blocking, another not
            how = "blocking" if self.blocking else "non-blocking"
            other = "non-blocking" if self.blocking else "blocking"
            raise CollectiveMismatch(
                f"rank {self.rank}: made call {fp.describe(self.fingerprint)} {how} but another "
                f"rank made it {other}: MPI's blocking and non-blocking collectives never match "
                f"each other ({self.what})")

    def _mismatch(self, who: str, theirs: int) -> CollectiveMismatch:
        return CollectiveMismatch(
            f"rank {self.rank}: {fp.mismatch(self.fingerprint, theirs, who)} ({self.what})")

    # -- waiting and giving up -----------------------------------------------------------------
    def wait(self, deadline: float | None, timed_out: Callable[[], CollectiveTimeout],
             stalled: Callable[[], None]) -> None:
        """Poll until the agreement is in, waiting in the transport's ladder between polls;
        past ``deadline`` raise ``timed_out()`` (and give the call up, so the late ranks are
        told); ``stalled()`` is called between waits (the stall report)."""
        transport = self.transport
        while not self.poll():
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                error = timed_out()
                self.give_up(error)
                raise error
            stalled()
            rest = SLICE if deadline is None else min(SLICE, deadline - now)
            try:
                transport.wait_for_activity(rest)
            except CollopsError as exc:  # a peer gave the call up, or died
                self.give_up(exc)
                raise

    def give_up(self, error: BaseException) -> None:
        """This rank left the call after ``error``: its receive is dropped (a later call's
        wait must not meet it), and the others are told (`MpiTransport.give_up`) — those
        still waiting for its agreement messages, and any that runs the call another way (a
        schedule's messages: a mismatch the agreement found) and waits for its data."""
        if self.receive is not None:
            self.transport.drop_receive(self.receive)
            self.receive = None
        if not self.told:
            self.told = True
            self.transport.give_up(self.tag_base, error, self.fingerprint)


# -- a rank that runs the call without the agreement (a schedule) ------------------------------
def crossed(posted: dict[tuple[int, int], Any], tag: int) -> Any:
    """The entry of ``posted`` (``(peer, tag)`` -> receive) taken off it for a schedule's
    receive in the call and phase of the agreement message ``tag``, which arrived with no
    receive of its own, if there is one: its sender agrees on the call while this rank runs
    it without an agreement, so they make different calls, and that receive is where this
    rank's schedule hears it (its peer may not be the sender, who may send it nothing before
    the agreement ends)."""
    phase = tag >> SEQ_BITS
    for peer, posted_tag in posted:
        if posted_tag >> SEQ_BITS == phase and not posted_tag & AGREEMENT_BIT:
            return posted.pop((peer, posted_tag))
    return None


def crossing(unexpected: dict[tuple[int, int], Any], tag: int) -> tuple[int, int] | None:
    """``(size, fingerprint)`` of an agreement message in ``unexpected`` (``(peer, tag)`` ->
    ``(bytes, fingerprint)``) of the call and phase of ``tag``, a schedule's receive being
    posted: as `crossed`, the agreement message came first."""
    phase = tag >> SEQ_BITS
    for (_, arrived_tag), arrived in unexpected.items():
        if arrived_tag >> SEQ_BITS == phase and arrived_tag & AGREEMENT_BIT and \
                isinstance(arrived, tuple):
            return len(arrived[0]), arrived[1]
    return None
