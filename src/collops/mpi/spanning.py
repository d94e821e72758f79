"""The agreement on an ``mpi_native`` call among ranks on several nodes, before MPI's collective.

Ranks that share a node agree through their `Board`; ranks on several nodes exchange the
call's words instead: its fingerprint and whether it is blocking (MPI's blocking and
non-blocking collectives never match each other). This is a dissemination: in round ``k``
rank ``r`` sends what it has folded so far to rank ``r + 2**k`` and folds in what rank
``r - 2**k`` sent (the maximum of each word and of its complement), so after
``ceil(log2 p)`` rounds every rank holds every rank's words and all reach the same verdict.

Its messages travel on MPI's own non-blocking point-to-point, on a communicator of their own
(`channel.Channel`: preallocated words, one standing receive per round polled with
``MPI_Test``), not on collops' message layer and not as an MPI collective, because a rank may
give a call up (an argument only it sees is wrong, a mismatch it saw) while the others wait
in the agreement. Its marker (`given_up`, a collops message) then reaches the ranks that wait
for its words, who raise `CollectiveMismatch` quoting it and give the call up in turn, so
every rank is told; and nothing is left behind, since the channel drops the messages of a
call given up. An MPI collective could not be left so: the rank that gave up cannot know
whether its peers chose ``mpi_native`` (its own arguments are the wrong ones), and a
contribution nobody matches would pair with the communicator's next collective.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from ..algorithms import fingerprint as fp
from ..errors import CollectiveMismatch, CollectiveTimeout, CollopsError
from ..transport.tags import (
    CALL_BITS,
    CONTEXT_LIMIT,
    PHASE_BITS,
    SEQ_BITS,
    call_of_tag_base,
    is_point_to_point,
    make_tag_base,
)
from . import given_up
from .board import call_key
from .channel import WORDS, Channel

#: the bit of a message number that marks an agreement message (`runtime.agreement`'s too)
AGREEMENT_BIT = 1 << (SEQ_BITS - 1)
_ALL = 2**64 - 1
#: longest wait between checks of the deadline and the stall report
SLICE = 0.25


class SpanningAgreement:
    """One phase's agreement among the ranks of ``group`` (world ranks; this is ``rank``)."""

    __slots__ = ("transport", "group", "rank", "size", "tag_base", "fingerprint", "blocking",
                 "what", "folded", "round", "told", "odd", "done", "channel", "key", "call",
                 "polls")

    def __init__(self, transport: Any, group: Sequence[int], rank: int, context: int, seq: int,
                 phase: int, fingerprint: int, blocking: bool, what: str) -> None:
        self.transport, self.group, self.rank, self.size = transport, group, rank, len(group)
        self.tag_base = make_tag_base(context, seq, phase)
        self.fingerprint, self.blocking, self.what = fingerprint, blocking, what
        flag = int(blocking)
        self.folded = [fingerprint, ~fingerprint & _ALL, flag, ~flag & _ALL]
        self.key = call_key(seq, phase, blocking)
        self.call = self.key >> 1
        self.channel: Channel = transport.agreement_channel(tuple(group), context)
        self.round = self.polls = 0
        #: the others have heard that this rank gave the call up
        self.told = False
        #: ``(rank, fingerprint)`` of the first message of another call, named in the error
        self.odd: tuple[int, int] | None = None
        self.done = False
        transport._wakers.append(self)
        self._step()

    # -- the rounds ----------------------------------------------------------------------------
    def _step(self) -> None:
        """Send this round's message (or finish after the last)."""
        if 1 << self.round >= self.size:
            self._leave()
            self.done = True
            return
        self.channel.send(self.round, [self.key, self.fingerprint, *self.folded])

    def _leave(self) -> None:
        """This rank takes no more messages of the call."""
        wakers = self.transport._wakers
        if self in wakers:
            wakers.remove(self)

    def poll(self) -> bool:
        """Advance without blocking; True once every rank's words are in (raises
        `CollectiveMismatch` if the calls differ, or if a peer gave the call up)."""
        try:
            return self._poll()
        except CollopsError as exc:
            self.give_up(exc)
            raise
        except self.transport._MPI.Exception as exc:
            from .transport import mpi_error  # (the transport imports this module)
            error = mpi_error(self.rank, f"{self.what}: agreeing on the call", exc)
            self.give_up(error)
            raise error from exc

    def _poll(self) -> bool:
        if self.done:
            return True
        channel = self.channel
        while True:
            words = channel.take(self.round, self.call)
            if words is None:
                break
            folded = self.folded
            for i in range(4):
                if words[2 + i] > folded[i]:
                    folded[i] = words[2 + i]
            if words[1] != self.fingerprint:  # its sender named in the error
                self.odd = self.odd or (channel.source(self.round), words[1])
            self.round += 1
            self._step()
            if self.done:
                self._verdict()
                return True
        self.polls += 1
        transport = self.transport
        if self.polls & 15 == 0:  # markers and strays come through collops' own messages
            transport.progress()
        given = transport._given_up
        if given:  # a marker: a peer gave this call up (`given_up`), tell at once
            call = self.tag_base >> given_up.CALL_SHIFT
            told = [peer for peer in self.group if (peer, call) in given]
            # the rank that gave the call up first, if its own marker is in
            told.sort(key=lambda peer: given[(peer, call)][0] != peer)
            given_up.check(transport.rank, [(peer, self.tag_base) for peer in told[:1]],
                           given)
        if transport._unexpected:
            stray = transport.unexpected_for_call(self.tag_base >> SEQ_BITS, SEQ_BITS)
            if stray is not None and stray[1] not in (0, self.fingerprint):
                who = self.group.index(stray[0]) if stray[0] in self.group else stray[0]
                raise self._mismatch(f"rank {who}", stray[1])
        return False

    def ready(self) -> bool:
        """Whether a message of this round may be in (it ends a `wait_for_activity`)."""
        return self.done or self.channel.pump(self.round) or \
            any(words[0] >> 1 == self.call for words in self.channel.stash[self.round])

    def not_posted(self) -> list[int]:
        """The world rank whose message this rank awaits (`MpiTransport.check_peers`)."""
        return [] if self.done else [self.group[self.channel.source(self.round)]]
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
        spin_until = time.monotonic() + transport._spin_seconds
        while not self.poll():
            now = time.monotonic()
            if now < spin_until:  # the channel alone first: its poll is one MPI_Test
                continue
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
        """This rank left the call after ``error``: it takes no more of its messages (those
        still coming are dropped from the channel later), and the others are told
        (`MpiTransport.give_up`) — those still waiting for its agreement messages, and any
        that runs the call another way (a schedule's messages: a mismatch the agreement found)
        and waits for its data."""
        if not self.done:
            self.channel.abandon(self.call)
        self._leave()
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


def cross_channels(channels: dict[tuple[tuple[int, ...], int], Channel],
                   posted: dict[tuple[int, int], Any]) -> None:
    """Complete each receive of ``posted`` (``(peer, tag)`` -> ``(handle, buffer)``) of a call
    and phase whose agreement messages are on one of ``channels`` with the agreeing sender's
    fingerprint, as `crossed` does: this rank runs that call without the agreement (a
    schedule, or a root agreement), so the calls differ, and the receive is where this rank's
    schedule hears it (the agreeing peers send it nothing before their agreement ends)."""
    for peer, tag in list(posted):
        if is_point_to_point(tag):
            continue
        context, call = call_of_tag_base(tag)
        phase = (tag >> SEQ_BITS) & ((1 << PHASE_BITS) - 1)
        for (_, their_context), channel in channels.items():
            if their_context & (CONTEXT_LIMIT - 1) != context:
                continue
            theirs = channel.seen(call, phase, CALL_BITS)
            if theirs is not None:
                h = posted.pop((peer, tag))[0]
                h.nbytes, h.fingerprint, h.done = WORDS * 8, theirs, True
                break
