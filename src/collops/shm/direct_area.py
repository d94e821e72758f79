"""Direct areas: the shared memory behind the ``shm_direct`` collectives.

A small collective between processes of one machine needs no messages at all. Each
communicator context below the segment's ``direct_areas`` owns an area in the job segment;
in it every rank has ``DIRECT_SLOTS`` slots, a control line that says which call each slot
holds (its number ``k`` and the call's fingerprint), and acknowledgement words: ``ack[w][i]``
is the last call this rank read from slot ``i`` of rank ``w``.

Phase ``ph`` of the call with sequence number ``s`` on the communicator (the same on every
rank) is call ``k = 8 s + ph + 1`` and uses slot ``i = (2 s + ph) mod DIRECT_SLOTS``, so
consecutive calls use different slots and a rank may run a few calls ahead of its peers.

* **write** — a rank may overwrite its slot ``i`` once every rank that had to read the
  slot's previous call has acknowledged it (almost always true at once); it copies its
  contribution, stores the fingerprint, then the call number.
* **read** — a reader waits until the writer's slot ``i`` holds exactly call ``k`` with its
  own call's fingerprint — one word, `held_word`, packs the number with 24 bits of the
  fingerprint, so the check costs nothing on the fast path; a slot that holds call ``k``
  with another fingerprint is `CollectiveMismatch`, saying what each side called — reads,
  and acknowledges.

**Ranks that disagree on the root.** The fingerprint carries the root, so ranks that meet
each other's word for a call see the disagreement and raise `CollectiveMismatch` naming both
roots; a rank that waits looks, on every round of its wait, at every member's word for the
call, not only at those it waits for. Every rank of a rooted call meets the word of the
root it named: a reader reads its root's slot, and a gather's or reduce's non-root, which
reads nothing, waits for its root's word (`direct_roles.names_its_root`; without it, ranks
that each name another as the root would all return None). A root meets every rank's: a
gather's or reduce's reads every slot, and a bcast's or scatter's waits until every reader
said it found the call (`ARRIVED`) before it completes (`direct_roles.confirms`); a reader
that publishes nothing leaves its word while it waits (`declare`). So a disagreement never
goes unnoticed: a rank that names a rank that is no root waits for it and meets a word of
another fingerprint (that rank's own, or a root's), and a root meets the word of every rank
that named another. A rank whose root agrees with it may complete its part while a third
rank that named another root raises, as an MPI non-root would: it returns what the root it
named sent. Waiting for every rank instead, so that every rank raises, would cost every
rooted call a wait for the last rank to arrive — on more ranks than cores, a rank's time
off its core (docs/performance.md, "nothing gets slower"). A bcast's or scatter's root 0 on
the compiled route may leave its wait for the readers to its next call on the area
(`Occupancy.deferred`, `settle`): it raises a mismatch found then, naming both calls, and
gives that next call up; some rank that named another root still raises at the call.

Matching call numbers exactly, rather than trusting a counter to grow, lets non-blocking
calls publish out of call order: a multi-phase call's second phase may start after a later
call's first. A rank writes its contributions in call-number order, whatever order the calls
were begun or reached a phase in (`unwritten`, kept sorted by `queue_write`): a later call
never takes a slot that an earlier one is waiting for, and the earliest unwritten call of the
job can always go on (a queue in the order of arrival could deadlock: an allreduce's second
phase queued behind later calls that wait for slots only its completion frees).

Stores are ordered on x86 (data before the call number, reads before the
acknowledgement); a full fence (an uncontended lock) separates a rank's last store from its
check of the peers' *sleeping* flags, so a waiter asleep on its futex is always woken.

Waiting is the transport's one wait (`waiting.Ladder`: spin, yield, then sleep on the
rank's doorbell — the one the point-to-point rings ring), checking on every round for failed
or exited peers (`PeerFailed`), the deadline (`CollectiveTimeout`, naming the ranks not heard
from) and a peer that made the same call through messages instead (`CollectiveMismatch`): a
call one rank makes directly and another with messages would otherwise wait for ever.
"""

from __future__ import annotations

import time
from array import array
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import config
from ..algorithms.fingerprint import (
    called_of,
    describe,
    fields,
    given_up,
    is_given_up,
    mismatch,
)
from ..errors import CollectiveMismatch, CollectiveTimeout, PeerFailed
from ..transport.stall import report, watch_of
from ..transport.tags import call_of_tag_base
from . import segment as seg
from .segment import DIRECT_SLOTS
from .waiting import SPIN

if TYPE_CHECKING:
    from .roll_call import RollBook
    from .transport import ShmTransport

#: or-ed into an acknowledgement word by a reader that found its call and still copies it:
#: enough for a root's confirmation (`DirectArea.unconfirmed`), not for reusing the slot
ARRIVED = 1 << 62
#: bytes of each rank's slot in the direct areas of the job this process attached to last
#: (what ``shm_direct``'s restriction checks a call against; the layout's default before)
_slot_capacity = seg.DEFAULT_DIRECT_BYTES


def slot_capacity() -> int:
    """Bytes of a direct slot in this process's job (the default before it attaches)."""
    return _slot_capacity


def set_slot_capacity(nbytes: int) -> None:
    """Record the direct slot bytes of the job this process attached to (the transport's)."""
    global _slot_capacity
    _slot_capacity = nbytes


def call_number(seq: int, phase: int) -> int:
    """The number ``k`` of phase ``phase`` of call ``seq`` in a direct area (never 0)."""
    return (seq << 3 | phase) + 1


def held_word(k: int, fingerprint: int) -> int:
    """What a slot's control word holds for call ``k``: the number and 24 bits of fingerprint.

    A reader compares one word to learn both that the call arrived and that its peer made the
    same call; the full fingerprint sits beside it, for the error message.
    """
    return (k << 24) | ((fingerprint ^ (fingerprint >> 24) ^ (fingerprint >> 48)) & 0xFFFFFF)


def slot_of(seq: int, phase: int) -> int:
    """The slot that phase ``phase`` of call ``seq`` uses."""
    return (2 * seq + phase) % DIRECT_SLOTS


class Occupancy:
    """For each of this rank's slots: the call it holds and the members who must read it, as
    ``(k, readers)``. Kept so that the compiled runner records a call without allocating:
    the numbers in a u64 array (``calls``), the readers' tuples in a list (``readers``),
    where None marks a slot `hold` keeps busy for a call this rank left unread. After the
    slots' numbers, ``calls`` holds the `deferred` one."""

    __slots__ = ("calls", "readers")

    def __init__(self) -> None:
        self.calls = array("Q", bytes(8 * (DIRECT_SLOTS + 1)))
        self.readers: list[tuple[int, ...] | None] = [()] * DIRECT_SLOTS

    @property
    def deferred(self) -> int:
        """The call whose readers' arrivals this rank, its bcast's or scatter's root, left
        to check at its next call on the area (`DirectArea.settle`; 0: none)."""
        return self.calls[DIRECT_SLOTS]

    @deferred.setter
    def deferred(self, k: int) -> None:
        self.calls[DIRECT_SLOTS] = k

    def __getitem__(self, slot: int) -> tuple[int, tuple[int, ...]]:
        return self.calls[slot], self.readers[slot] or ()

    def __setitem__(self, slot: int, value: tuple[int, tuple[int, ...]]) -> None:
        self.calls[slot], self.readers[slot] = value

    def hold(self, slot: int, k: int) -> None:
        """Mark ``slot`` as holding call ``k`` with no reader left but busy to the compiled
        runner until `DirectArea._released` frees it."""
        self.calls[slot], self.readers[slot] = k, None

    def clear(self) -> None:
        """Every slot free, as when the area is new."""
        for slot in range(DIRECT_SLOTS):
            self[slot] = (0, ())
        self.deferred = 0


class DirectArea:
    """One communicator's direct area, seen from one of its ranks (group ranks throughout)."""

    def __init__(self, transport: ShmTransport, area: int, group: Sequence[int]) -> None:
        lay = transport._layout
        self.transport = transport
        self.area = area
        self.words = transport._words
        self.group = list(group)
        self.index = self.group.index(transport.rank)
        #: every member but this rank, whose words for a call it waits for or looks at
        self.others = [m for m in range(len(self.group)) if m != self.index]
        #: the roll calls' book of this communicator's group (`roll_call.book_of`), once known
        self.roll_book: RollBook | None = None
        #: bytes of each slot (``direct_bytes`` and a header line: `Layout.direct_slot_bytes`)
        self.capacity = lay.direct_slot_bytes
        base = [lay.direct_rank_offset(area, r) for r in self.group]
        #: words holding each member's slot call numbers and fingerprints: [member][slot]
        self.held = [[b // seg.WORD + 2 * i for i in range(DIRECT_SLOTS)] for b in base]
        self.fps = [[w + 1 for w in row] for row in self.held]
        acks = [b + seg.LINE for b in base]
        world = [transport._ranks[r] for r in self.group]
        #: ack[reader][writer][slot]: the word where ``reader`` acknowledges ``writer``'s slot
        self.ack = [[[a // seg.WORD + w * DIRECT_SLOTS + i for i in range(DIRECT_SLOTS)]
                     for w in world] for a in acks]
        first_slot = [b + seg.LINE + lay.direct_acks_bytes for b in base]
        buf = transport._buf
        #: byte offset in the job segment of each member's slots: [member][slot]
        self.slot_offset = [[f + i * self.capacity for i in range(DIRECT_SLOTS)]
                            for f in first_slot]
        self.slots = [[np.frombuffer(buf, np.uint8, self.capacity, o) for o in row]
                      for row in self.slot_offset]
        #: for each of this rank's slots: its call number and the members who must read it
        self.occupant = Occupancy()
        #: per slot: the call still to read this rank's own slot (0: none)
        self.own_pending = [0] * DIRECT_SLOTS
        #: per slot: the peers whose contribution to the call this rank left unread is still
        #: to be counted as read once they publish it (`release`; empty: none)
        self.unreleased: list[list[int]] = [[] for _ in range(DIRECT_SLOTS)]
        #: direct calls of this area begun without blocking and not finished
        self.inflight = 0
        #: those of them whose contribution is not yet written, in the order they were made:
        #: they write in that order, so no later call takes a slot an earlier one waits for
        self.unwritten: deque[Any] = deque()
        self._views: dict[tuple[int, int, np.dtype, int, int], np.ndarray] = {}
        #: what the algorithms using this area work out once per call signature
        self.memo: dict[object, object] = {}
        transport._segment.prefault(lay.direct_rank_offset(area, transport.rank),
                                    lay.direct_rank_bytes)
        self.oversubscribed = transport._oversubscribed
        #: how this process waits (`waiting`): one per transport
        self.ladder = transport.ladder

    # -- slots ---------------------------------------------------------------------------
    def view(self, member: int, slot: int, dtype: np.dtype, count: int, offset: int = 0
             ) -> np.ndarray:
        """``count`` items of ``dtype`` at byte ``offset`` of ``member``'s ``slot``."""
        key = (member, slot, dtype, count, offset)
        v = self._views.get(key)
        if v is None:
            v = self.slots[member][slot][offset: offset + count * dtype.itemsize].view(dtype)
            if len(self._views) > 4096:
                self._views.clear()
            self._views[key] = v
        return v

    # -- the protocol --------------------------------------------------------------------
    def queue_write(self, execution: Any, k: int) -> None:
        """Queue ``execution``'s write of call ``k`` behind the unwritten calls of lower
        numbers (``execution.write_k`` is set to ``k``)."""
        queue = self.unwritten
        i = len(queue)
        while i and queue[i - 1].write_k > k:
            i -= 1
        execution.write_k = k
        queue.insert(i, execution)

    def writable(self, slot: int) -> bool:
        """Whether every reader of this rank's ``slot`` (itself too) is done with it."""
        if self.own_pending[slot]:
            return False
        if self.unreleased[slot] and not self._released(slot):
            return False
        k, readers = self.occupant[slot]
        if not readers:
            return True
        words, ack = self.words, self.ack
        me = self.index
        return all(words[ack[r][me][slot]] == k for r in readers)

    def unacknowledged(self, slot: int) -> list[int]:
        """The readers that have not yet read this rank's ``slot``."""
        k, readers = self.occupant[slot]
        words, me = self.words, self.index
        return [r for r in readers if words[self.ack[r][me][slot]] != k]

    def unconfirmed(self, slot: int) -> list[int]:
        """The readers that have not yet found the call in this rank's ``slot`` (said so with
        `ARRIVED`, or read it)."""
        k, readers = self.occupant[slot]
        words, me = self.words, self.index
        return [r for r in readers if words[self.ack[r][me][slot]] & ~ARRIVED != k]

    def settle(self, timeout: float | None,
               next_call: tuple[int, int, int] | None = None) -> None:
        """Before this rank's next call on the area: wait until every reader found the call
        whose confirmation its root left for later (`Occupancy.deferred`, a bcast's or
        scatter's root 0 of the compiled route: `direct.root_defers`), raising
        `CollectiveMismatch`, naming both calls, if a reader made another call at that point
        or went past it without reading it. ``next_call``: ``(seq, phase, fingerprint)`` of
        the call about to begin, which a mismatch gives up (`give_up`: the peers waiting in
        it for this rank raise instead of waiting for ever), and which waits, before raising,
        until the readers that never found the deferred call moved past it (`_outlast`)."""
        k = self.occupant.deferred
        if not k:
            return
        slot = slot_of((k - 1) >> 3, (k - 1) & 7)
        try:
            if self.occupant.calls[slot] != k:  # released or taken again since
                return
            me, words = self.index, self.words
            fingerprint = int(words[self.fps[me][slot]])
            what = f"rank {me}: {fields(fingerprint).collective}[shm_direct]"
            late = (" (found at this rank's next call on the communicator: its data had "
                    "gone out without waiting for the readers)")
            deadline = None if timeout is None else time.monotonic() + timeout
            absent = self.unconfirmed(slot)

            def passed() -> list[int]:
                return [r for r in self.unconfirmed(slot)
                        if int(words[self.held[r][slot]]) >> 24 > k]

            try:
                self.wait(lambda: not self.unconfirmed(slot) or bool(passed()),
                          lambda: self.unconfirmed(slot), deadline, what, None,
                          describe, (slot, held_word(k, fingerprint), fingerprint))
                gone = passed()
                if gone:
                    self.release(slot, k)
                    raise CollectiveMismatch(
                        f"{what}: rank {gone[0]} went past call {(k - 1) >> 3} without "
                        f"reading it: it made another call there")
            except CollectiveMismatch as exc:
                if next_call is not None:
                    seq, phase, mine = next_call
                    self.give_up(seq, phase, given_up(mine))
                    self._outlast(k, absent, deadline, what)
                raise CollectiveMismatch(f"{exc}{late}") from None
        finally:
            self.occupant.deferred = 0

    def _outlast(self, k: int, members: list[int], deadline: float | None, what: str) -> None:
        """Wait until each of ``members`` has moved past call ``k`` (its word for a later
        call, published or left while it waits: `declare`), or failed: one that made another
        call there may still look for this rank's word for it, which this rank's next calls
        would overwrite once the mismatch freed its slot."""
        words = self.words

        def behind() -> list[int]:
            return [m for m in members if max(int(words[w]) >> 24 for w in self.held[m]) <= k]

        try:
            self.wait(lambda: not behind(), behind, deadline, what, None, describe)
        except (PeerFailed, CollectiveTimeout):
            pass  # the mismatch is the error to report

    def settle_before(self, seq: int, phase: int, fingerprint: int,
                      timeout: float | None) -> None:
        """`settle` before phase ``phase`` of call ``seq`` (of ``fingerprint``) begins."""
        if self.occupant.deferred:
            self.settle(timeout, (seq, phase, fingerprint))

    def publish(self, slot: int, k: int, fingerprint: int, readers: tuple[int, ...]) -> None:
        """Announce that this rank's ``slot`` holds its contribution to call ``k``."""
        words, me = self.words, self.index
        words[self.fps[me][slot]] = fingerprint
        words[self.held[me][slot]] = held_word(k, fingerprint)
        self.occupant[slot] = (k, readers)
        self.transport.wake_sleepers(self.group)

    def declare(self, slot: int, word: int, fingerprint: int) -> None:
        """Leave this rank's word for the call of ``word`` in its ``slot`` while it waits or
        once it has seen a mismatch, when the slot is free and the rank published nothing for
        the call (a bcast's reader): a peer waiting for it then sees a mismatch too."""
        me, k = self.index, word >> 24
        if self.words[self.held[me][slot]] >> 24 != k and self.writable(slot):
            self.publish(slot, k, fingerprint, ())

    def give_up(self, seq: int, phase: int, fingerprint: int) -> None:
        """This rank gave up phase ``phase`` of call ``seq``: leave its word for the call with
        ``fingerprint`` (`declare`), and count the call as read in each peer's slot unless
        that slot still holds an earlier call this rank has not read."""
        k, slot = call_number(seq, phase), slot_of(seq, phase)
        self.declare(slot, held_word(k, fingerprint), fingerprint)
        self.release(slot, k)

    def release(self, slot: int, k: int) -> None:
        """Free the slots of call ``k``, which this rank leaves unread (it gave the call up or
        saw a mismatch): it counts the call as read in each peer's ``slot``, and its own slot
        as read by every reader (a reader that gave up cannot say so once this rank has
        published). A peer that has not published the call yet cannot be told before it does
        (the word would stop it from writing): this rank's own slot counts as busy until then
        (`unreleased`: a slot `Occupancy.hold` keeps is busy to the compiled runner too), which is
        long before this rank needs the slot again; a peer that only reads in the call (a
        bcast's) publishes nothing, and is done once it has read. So the slots can be used
        again."""
        if self.own_pending[slot] == k:
            self.own_pending[slot] = 0
        words, me = self.words, self.index
        occupant, readers = self.occupant[slot]
        if occupant == k:
            for r in readers:
                words[self.ack[r][me][slot]] = k
            self.unreleased[slot] = [m for m in range(len(self.group)) if m != me]
            self.occupant.hold(slot, k)
            self._released(slot)
        else:
            row = self.ack[me]
            for m in range(len(self.group)):
                if m != me and int(words[self.held[m][slot]]) >> 24 == k \
                        and not self._confirmed_by_reading(m, slot):
                    words[row[m][slot]] = k
        self.transport.wake_sleepers(self.group)

    def _confirmed_by_reading(self, member: int, slot: int) -> bool:
        """Whether ``member``'s ``slot`` holds a bcast's or scatter's root contribution, which
        counts an acknowledgement as its reader's agreement (`direct_roles.confirms`): this rank
        never fakes one there; the root sees this rank's word for the call instead."""
        fingerprint = int(self.words[self.fps[member][slot]])
        return not is_given_up(fingerprint) and fields(fingerprint).collective in ("bcast",
                                                                              "scatter")

    def _all_write(self, slot: int) -> bool:
        """Whether every member writes in the call this rank's ``slot`` holds (its word's
        collective, or the one a given-up word was made from, is no bcast or scatter)."""
        fingerprint: int | None = int(self.words[self.fps[self.index][slot]])
        if fingerprint is not None and is_given_up(fingerprint):
            fingerprint = called_of(fingerprint)
        return fingerprint is not None and fields(fingerprint).collective not in ("bcast",
                                                                                   "scatter")

    def _released(self, slot: int) -> bool:
        """Count the call this rank left unread in ``slot`` as read in the slots of the
        `unreleased` peers that have published it since; True once none is left."""
        k = self.occupant[slot][0]
        words, me, held = self.words, self.index, self.held
        row = self.ack[me]
        # in a call every member writes in (all but a bcast's or scatter's), this rank's own
        # slot's acknowledgement of a member may be the one it wrote for it (`release`): only
        # the member's reads of the other slots say it moved on
        own = me if self._all_write(slot) else -1
        left = []
        for m in self.unreleased[slot]:
            theirs = int(words[held[m][slot]]) >> 24
            if theirs == k:
                if not self._confirmed_by_reading(m, slot):
                    words[row[m][slot]] = k
            elif theirs < k and max(int(words[a[slot]]) & ~ARRIVED
                                    for w, a in enumerate(self.ack[m]) if w != own) < k:
                left.append(m)  # else it moved on, or read call k without publishing in it
        self.unreleased[slot] = left
        if left:
            return False
        self.occupant[slot] = (k, ())
        self.transport.wake_sleepers(self.group)
        return True

    def announce(self, slot: int, k: int, writers: Sequence[int]) -> None:
        """Say that this rank found call ``k`` in the ``writers``' ``slot`` and is reading it
        (no wake: the acknowledgement that follows wakes a writer asleep)."""
        words, row = self.words, self.ack[self.index]
        for w in writers:
            words[row[w][slot]] = k | ARRIVED

    def acknowledge(self, slot: int, k: int, writers: Sequence[int]) -> None:
        """Say that this rank has read call ``k`` from the ``writers``' ``slot``."""
        words, row = self.words, self.ack[self.index]
        for w in writers:
            words[row[w][slot]] = k
        self.transport.wake_sleepers(self.group)

    def missing(self, slot: int, word: int, members: Sequence[int]) -> list[int]:
        """The members among ``members`` whose ``slot`` does not hold ``word`` (`held_word`)."""
        words, held = self.words, self.held
        return [m for m in members if words[held[m][slot]] != word]

    def mismatched(self, slot: int, word: int, members: Sequence[int]) -> list[tuple[int, int]]:
        """The members whose ``slot`` holds the same call as ``word`` with another fingerprint,
        each with that fingerprint.

        A peer may publish a later call in the slot while this rank looks (a slot serves every
        other call), so each control word is read once, and the fingerprint beside it counts
        only if it is the one the word was made from: a word read across a peer's publish is
        not a mismatch, it is looked at again on the next round of the wait.
        """
        words, held, fps = self.words, self.held, self.fps
        found = []
        for m in members:
            theirs = int(words[held[m][slot]])
            if theirs >> 24 != word >> 24 or theirs == word:
                continue
            fingerprint = int(words[fps[m][slot]])
            if held_word(theirs >> 24, fingerprint) == theirs == int(words[held[m][slot]]):
                found.append((m, fingerprint))
        return found

    def wait(self, ready: Callable[[], bool], waiting_for: Callable[[], list[int]],
             deadline: float | None, what: str, call: tuple[int, int] | None,
             describe: Callable[[int], str], expect: tuple[int, int, int] | None = None,
             start: int = SPIN, declare: bool = False) -> None:
        """Block until ``ready()``; raise on failure, timeout or a cross-path mismatch.

        ``waiting_for()`` names the group ranks still awaited (for diagnostics); ``call`` is
        ``(value, shift)``: a message whose ``tag >> shift == value`` belongs to this call;
        ``expect`` is ``(slot, word, fingerprint)`` of the call read, to tell a peer that made
        another call at the same point; ``start``: the stage of the wait to begin with
        (`waiting.SLEEP` after a compiled loop spun and yielded); ``declare``: the rank
        publishes nothing for the call, and leaves its word while it waits (`check`).
        """
        def check() -> None:
            self.check(waiting_for, deadline, what, call, describe, expect, declare)

        def sleep(timeout: float) -> None:
            self.transport.sleep_for_direct(ready, timeout)

        while not self.ladder.wait(ready, sleep, check, deadline, start):
            check()  # the deadline passed: raises

    def check(self, waiting_for: Callable[[], list[int]], deadline: float | None, what: str,
              call: tuple[int, int] | None, describe: Callable[[int], str],
              expect: tuple[int, int, int] | None = None, declare: bool = False) -> None:
        """Raise if a peer failed, the deadline passed or a peer made another call
        (``declare``: the rank publishes nothing for the call and leaves its word, `declare`)."""
        t, words = self.transport, self.words
        awaited = waiting_for()
        if expect is not None:
            slot, word, mine = expect
            if declare:  # ranks that each wait for another as their root meet their words
                self.declare(slot, word, mine)
            for m, theirs in self.mismatched(slot, word, self.others):
                self.release(slot, word >> 24)
                if slot % 2 == 0:  # a first phase: a peer may be in the call's next one
                    self.declare(slot + 1, word + (1 << 24), mine)
                raise CollectiveMismatch(f"{what}: {mismatch(mine, theirs, f'rank {m}')}")
        failed = int(words[seg.H_FAILED])
        dead = None
        if failed:
            dead = PeerFailed(failed - 1, "its process ended")
        for m in awaited:
            if dead is None and words[t._state_word[self.group[m]]] == seg.EXITED:
                t.note_cause(self.group[m])
                dead = PeerFailed(self.group[m], "it exited while this rank waited for it")
        if dead is not None:
            dead.locate_native(what, None if call is None else call_of_tag_base(
                call[0] << call[1])[1])
            raise dead
        if call is not None:
            t.progress()
            crossed = t.unexpected_for_call(*call)
            if crossed is not None:
                peer, fingerprint = crossed
                member = self.group.index(peer) if peer in self.group else peer
                called = (mismatch(expect[2], fingerprint, f"rank {member}") if expect
                          is not None else f"rank {member} called {describe(fingerprint)}")
                raise CollectiveMismatch(f"{what}: {called}, through messages")
        if deadline is not None and time.monotonic() > deadline:
            number = "" if call is None else f"call {call_of_tag_base(call[0] << call[1])[1]}"
            step = "" if expect is None else f", step: direct slot {expect[0]}"
            raise CollectiveTimeout(
                f"{what} did not complete in time; waiting at {number or 'its call'}{step}; "
                f"not heard from ranks {awaited}")
        if call is not None and config.settings.stall_report is not None:
            self._note_stall(what, call, awaited)

    def _note_stall(self, what: str, call: tuple[int, int], awaited: list[int]) -> None:
        """Tell the transport's stall watch that this rank sleeps in ``call`` (see
        `collops.transport.stall`)."""
        context, seq = call_of_tag_base(call[0] << call[1])
        threshold = config.settings.stall_report
        t = self.transport

        def describe(waited: float) -> str:
            name = what.removeprefix(f"rank {self.index}: ")
            return report(self.index, name, seq, f"waiting for ranks {awaited}", waited,
                          t.calls_started(context, self.group), threshold or 0.0)

        watch_of(t).waiting((context, seq), threshold, describe)
