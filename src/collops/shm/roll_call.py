"""Roll call: every member of a rooted streamed call meets the word of the root it named.

A bcast or scatter root hears from no one, and ranks that each believe another the root of a
gather or reduce write their blocks for a root that reads none: ranks that disagree on the
root would return different data or hang. ``shm_stream`` therefore runs its rooted calls with
a roll call beside the data: each member stores its word for the call (call number and
fingerprint, which holds the root) as the call begins; a root completes only once every
other member's word for the call is its own, a non-root once its root's is. Ranks that
disagree meet a word with the call's number and another fingerprint: `CollectiveMismatch`
naming both roots — a rank that named a rank that is no root meets that rank's word, a root
the word of every rank that named another; a waiting rank looks at every member's word, not
only those it waits for. A non-root whose root agrees with it may complete while a third
rank that named another root raises, as an MPI non-root would (waiting for every member
instead costs every call a wait for the last rank, see `collops.shm.direct_area`). Waiting
for the root's word costs no round trip: the root stores it as the call begins. A gather's or
reduce's non-root writes its chunks only once it has its root's word (`root_heard`): a rank
that named as the root a rank that is none would otherwise leave chunks in its ring that
rank never reads, holding the ring's slots for ever.

The words are not the direct slots (`DirectArea`): a word there waits for the slot's previous
call to be acknowledged, in the direct area's one write order, and a member's word queued
behind a later call's acknowledgement could deadlock. Each rank has `ROLL_SLOTS` words of its
own in its stream area's control page, written by nobody else and waited for by nobody but
the roll call: phase ``ph`` of call ``seq`` uses word ``(2 seq + ph) mod ROLL_SLOTS``. A rank
overwrites its word for an earlier call there only once it and every peer have said they are
done with that call (a *done* word per slot holds the number of the last call the rank is
done with there, written whatever ended the call: success or error), so no peer misses a
word. A rank may finish a later call in the slot before a peer is done with the earlier one
(a non-root hears only its root), so a done word counts if it holds that call *or a later
one*; and as a rank writes its word only once its own earlier call there is done, its done
words only grow. That wait is for a call half the slots
(32 calls) earlier, which never waits for this one — unless a rank begins a phase more than
32 calls after later ones (a non-blocking bcast's data phase waits for its envelope): then
the call waits until the earlier one is done everywhere, or its timeout. A rank that gives a
call up before it could store its word (its slot still busy) stores none; its peers then
raise for their own reasons or at their timeout. The fingerprint beside each word is for the
error message. A call's stream plan holds the first indices of the words it waits for
(`heard_words`): its compiled loop spins for them once the call's data is done, within its
spin budget, before `RollCall` checks them and waits on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..algorithms.fingerprint import mismatch
from ..errors import CollectiveMismatch
from .direct_area import DirectArea, held_word
from .direct_vector import regular
from .segment import ROLL_SLOTS

if TYPE_CHECKING:
    from ..algorithms.spec import CallSpec
    from .stream_area import StreamArea

#: the collectives with a root
ROOTED = frozenset({"bcast", "scatter", "gather", "reduce"})


def has_roll_call(spec: CallSpec) -> bool:
    """Whether a streamed call of ``spec`` (a call of its own, not a phase of another) runs a
    roll call: a rooted one, on more than one rank."""
    return regular(spec.collective) in ROOTED and spec.size > 1


def heard_words(area: StreamArea, group: Sequence[int], me: int, root: int
                ) -> tuple[tuple[int, int], ...]:
    """``(member, first word index)`` of the members whose word member ``me`` of a roll call
    rooted at ``root`` waits for: the root's, at the root every other member's."""
    return tuple((m, area.roll_held[group[m]]) for m in range(len(group))
                 if m != me and (me == root or m == root))


class RollShape:
    """Where the words of one root's roll calls sit, for every slot: each index below plus
    the call's slot is a word in the control pages (made once per root, not per call)."""

    __slots__ = ("others", "theirs", "fps", "dones", "heard", "root_word", "my_held", "my_fp",
                 "my_done")

    def __init__(self, direct: DirectArea, area: StreamArea, root: int) -> None:
        group, me = direct.group, direct.index
        #: the other members (group ranks) and their words' first indices
        self.others = tuple(m for m in range(len(group)) if m != me)
        self.theirs = tuple(area.roll_held[group[m]] for m in self.others)
        self.fps = tuple(area.roll_fps[group[m]] for m in self.others)
        self.dones = tuple(area.roll_done[group[m]] for m in self.others)
        #: the members whose word the call waits for (`heard_words`)
        self.heard = heard_words(area, group, me, root)
        #: the root's first word index at a non-root (-1 at the root)
        self.root_word = -1 if me == root else area.roll_held[group[root]]
        self.my_held = area.roll_held[group[me]]
        self.my_fp = area.roll_fps[group[me]]
        self.my_done = area.roll_done[group[me]]


class RollBook:
    """One rank's roll calls on one communicator: the call whose word each slot holds."""

    __slots__ = ("last", "shapes")

    def __init__(self) -> None:
        #: per slot: the number of the call this rank last wrote there (0: none)
        self.last = [0] * ROLL_SLOTS
        #: per root: where its calls' words are
        self.shapes: dict[int, RollShape] = {}


def book_of(direct: DirectArea, area: StreamArea) -> RollBook:
    """The `RollBook` of ``direct``'s communicator on this rank (kept on the stream area, for
    the life of the job: a memo that forgets it would let a word be overwritten early)."""
    group = tuple(direct.group)
    book = area.roll_books.get(group)
    if book is None:
        book = area.roll_books[group] = RollBook()
    assert isinstance(book, RollBook)
    return book


class RollCall:
    """One member's part of a roll call: store its word, then wait until the words it needs
    for the call (its root's; at the root, every other member's) are the same."""

    __slots__ = ("direct", "book", "words", "k", "slot", "fingerprint", "word", "shape",
                 "written", "left", "wake")

    def __init__(self, direct: DirectArea, area: StreamArea, seq: int, phase: int,
                 word: int, fingerprint: int, root: int, wake: Callable[[], None]) -> None:
        """``word``: the call's `held_word` for phase ``phase`` of call ``seq`` (its stream
        plan's, which holds ``fingerprint``); ``wake``: its plan's, which fences, then wakes
        the peers asleep."""
        self.direct = direct
        book = direct.roll_book
        if book is None:
            book = direct.roll_book = book_of(direct, area)
        self.book = book
        shape = book.shapes.get(root)
        if shape is None:
            shape = book.shapes[root] = RollShape(direct, area, root)
        self.shape = shape
        self.words = direct.words
        self.k = word >> 24
        self.slot = (2 * seq + phase) % ROLL_SLOTS
        self.fingerprint = fingerprint
        self.word = word
        self.wake = wake
        self.written = False
        self.left = 1
        # the word wakes the peers asleep: a root's, the non-roots that wait for it before
        # they write (`root_heard`); a non-root's, its root, which may sleep once its chunks
        # are out (the reader's stream part would wake it only as its advance ends, after the
        # data: the root could not write the next call's chunks meanwhile); a word whose slot
        # is still busy is stored as the call moves (`poll`, `store`)
        self.store()

    def _free(self) -> bool:
        """Whether this rank and every peer are done with the call whose word this rank's
        slot holds (or a later call there)."""
        slot = self.slot
        last = self.book.last[slot]
        if not last:
            return True
        words, shape = self.words, self.shape
        if words[shape.my_done + slot] < last:
            return False
        for d in shape.dones:  # a loop, not all(): this runs on every call
            if words[d + slot] < last:
                return False
        return True

    def store(self) -> bool:
        """Store this rank's word once its slot is free, waking the peers asleep (they may
        wait for it); whether it is stored."""
        if not self.written and self._free():
            words, shape, slot = self.words, self.shape, self.slot
            words[shape.my_fp + slot] = self.fingerprint
            words[shape.my_held + slot] = self.word
            self.book.last[slot] = self.k
            self.written = True
            self.wake()
        return self.written

    def ready(self) -> bool:
        """Whether `poll` can move: the word may be stored, or every peer's word has come."""
        if not self.written:
            return self._free()
        words, word, slot = self.words, self.word, self.slot
        return all(words[w + slot] == word for _, w in self.shape.heard)

    def root_heard(self) -> bool:
        """Whether this rank's root stored its word for the call and it is this rank's (at
        the root: always). A non-root writes its chunks only then: ranks that named it the
        root while it was none would otherwise leave chunks in their rings that it never
        reads, holding the rings' slots for ever."""
        root_word = self.shape.root_word
        return root_word < 0 or self.words[root_word + self.slot] == self.word

    def awaited(self) -> list[int]:
        """The members (group ranks) this rank waits for: those yet to finish the slot's last
        call, or those whose word for this call has not come."""
        words, shape, slot = self.words, self.shape, self.slot
        if not self.written:
            last = self.book.last[slot]
            return [m for m, d in zip(shape.others, shape.dones, strict=True)
                    if words[d + slot] < last]
        return [m for m, w in shape.heard if words[w + slot] != self.word]

    def poll(self) -> bool:
        """Advance without blocking; True once the words it waits for are this rank's (the
        call is then done with here)."""
        if not self.left:
            return True
        if not self.written and not self.store():
            return False
        words, word, slot = self.words, self.word, self.slot
        for _, w in self.shape.heard:
            if words[w + slot] != word:
                return False
        self.end()
        return True

    def check(self, what: str) -> None:
        """Raise `CollectiveMismatch` if a member's word is for this call with another
        fingerprint (each word read once, and its fingerprint only if it is the one the word
        was made from: a word read across a peer's store is looked at again next round)."""
        words, k, shape, slot = self.words, self.k, self.shape, self.slot
        for m, w, f in zip(shape.others, shape.theirs, shape.fps, strict=True):
            theirs = int(words[w + slot])
            if theirs >> 24 != k or theirs == self.word:
                continue
            fingerprint = int(words[f + slot])
            if held_word(k, fingerprint) == theirs == int(words[w + slot]):
                raise CollectiveMismatch(
                    f"{what}: {mismatch(self.fingerprint, fingerprint, f'rank {m}')}")

    def end(self) -> None:
        """This rank is done with the call (whatever ended it): say so, so the peers may
        store their words for a later call in the slot (no wake: a peer waits for this only
        when it runs half the slots ahead, and looks again within its sleep slice)."""
        if self.left:
            self.left = 0
            self.words[self.shape.my_done + self.slot] = self.k
