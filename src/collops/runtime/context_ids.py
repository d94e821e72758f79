"""Communicator ids: agreed when a communicator is made, given back by `free`, reused.

Every communicator has a *context* id: the top field of its tags (`transport.tags`) and the
index of its shared-memory areas. Two live communicators that share a rank must have
different ids (a rank tells their messages apart by tag alone); communicators with no rank in
common may share one. Ids are below `CONTEXT_LIMIT`: 0 is the world's, and the last one
(`BOOTSTRAP`) carries `create_group`'s agreement among a group's members only.

**How an id is agreed** (MPICH's scheme). Each rank keeps the set of ids free *on it*. A new
communicator is made collectively over a parent that holds every new member (split, dup,
create, idup; create_group over the members themselves): each participant contributes its
free ids and all take the lowest id free on every one of them — a bitwise AND of masks, the
same table on every rank giving the same answer — and the new members mark it used. As the id
was free on every member, no member has another live communicator with it: this holds for
any overlap of communicators, whatever parents they came from and in whatever order they
were made. Ranks of a split that end in different colours get the same id; their groups are
disjoint. A split's ranks with no colour take part and keep the id free.

**Cost.** A rank first contributes a *window*: its free ids from its lowest one on, 256 of
them in four words, in the same small allgather as the split's colour and key (so an 8-byte
allgather's fast path serves `dup`). Only when the windows share no id (ranks whose free sets
differ widely) does a second phase send whole masks (`CONTEXT_LIMIT` bits). If that finds
none either, `CommunicatorLimit` names the limit: an id is never wrapped or shared.

**Concurrent agreements** on one rank must not take the same id. On one communicator they
never overlap: its communicator-making calls agree one at a time, in the calls' order
(`Communicators._split`). Those of different communicators may (an `idup` on one in flight
while another makes a communicator). An agreement *locks* what it contributed until it is done;
the others contribute only unlocked ids; the winner keeps its id and unlocks the rest. A
window locks at most 256 ids, so concurrent windows leave each other room (the later one then
takes an id past the earlier window: past the ids with a direct area, on ``shm``). But windows
are locked in the order the agreements start on each rank, and two ranks that start two
agreements in opposite orders (legal: ``a.idup(); b.idup()`` here, ``b.idup(); a.idup()``
there) lock disjoint windows for each, so both go on to whole masks — which lock everything;
so may two begun in the same order, when one rank unlocks the first window before the second
agreement begins and the other after.
Whole masks therefore go as MPICH's non-blocking context ids do: one agreement at a time holds
a rank's mask (`ContextIds.whole`), the one with the lowest key (its parent's id, its call
number: the same on every rank) among those waiting; the others offer nothing in that round
and say so, and when some rank offered nothing and no id was common, every member tries again
in the next round (in the call's next phase of `WHOLE_PHASES`, in turn), a rank that offered
nothing first waiting a moment for its mask (`MASK_WAIT`). The rounds' allgather is
`ROUNDS_ALGORITHM`'s messages, tagged by phase: a transport's slots tell calls apart by their
number alone, and a rank already in round r + 2 rewrote a slot another still read for round r
(ranks that agreed on different ids, and a communicator that hung). The lowest agreement
waiting anywhere holds the mask on each of its ranks, so rounds do not go on for ever: only
when every rank offered its whole mask and none is common is the limit reached — the limit
error, never a shared id (`WHOLE_ROUNDS` caps the rounds all the same). Blocking calls on one
rank never overlap.

**Reuse is safe.** `free` lets the communicator's pending calls complete, then the transport
takes back what the id held (`Transport.release_comm`: waiting until the readers of this
rank's direct slots are done with them, freeing `mpi_native`'s MPI communicators). What
stays behind in shared memory is the call numbers the old communicator left in its slots, so
a new communicator starts its calls at the highest *floor* of the ranks that agreed on it —
a rank's floor being the highest call number a communicator it freed reached — and no old
slot can pass for a new call.
"""

from __future__ import annotations

import numpy as np

from ..transport.tags import CONTEXT_LIMIT

#: the world communicator's id (never freed)
WORLD = 0
#: the id `create_group` agrees on (among the group's members, with no parent id to use)
BOOTSTRAP = CONTEXT_LIMIT - 1
#: ids a window offers (four int64 words)
WINDOW_BITS = 256
WINDOW_WORDS = WINDOW_BITS // 64
#: words of a whole mask
MASK_WORDS = CONTEXT_LIMIT // 64
#: the phases an agreement's rounds of whole masks take in turn (after its window's): two, so
#: that no rank runs a round while another still runs the one before it in the same phase (a
#: rank starts round r + 2 only once every rank started r + 1, so finished r)
WHOLE_PHASES = 2
#: rounds of whole masks an agreement takes at most (each a small allgather)
WHOLE_ROUNDS = 10_000
#: seconds a rank that offered nothing waits for its mask before the next round (`_MaskFree`)
MASK_WAIT = 1e-3
#: the allgather of the rounds: messages tagged by phase (a transport's slots tell calls
#: apart by their number alone, and every round of an agreement is the same call)
ROUNDS_ALGORITHM = "bruck"
_ALL = ((1 << CONTEXT_LIMIT) - 1) & ~(1 << WORLD) & ~(1 << BOOTSTRAP)


def to_words(bits: int, nwords: int) -> list[int]:
    """``bits`` (below ``2**(64 * nwords)``) as int64 words, lowest first."""
    return np.frombuffer(bits.to_bytes(nwords * 8, "little"), np.int64).tolist()


def from_words(words: object) -> int:
    """The inverse of `to_words`."""
    return int.from_bytes(np.asarray(words, np.int64).tobytes(), "little")


def lowest(bits: int) -> int | None:
    """The lowest id set in ``bits`` (None: none)."""
    return (bits & -bits).bit_length() - 1 if bits else None


class ContextIds:
    """The ids free on this rank, those locked by agreements in flight, and its floor."""

    def __init__(self) -> None:
        self.free = _ALL
        self.locked = 0
        #: the highest call number a communicator this rank freed reached
        self.floor = 0
        #: the agreements in their whole-mask rounds (by key), and the one holding the mask
        self.waiting: set[tuple[int, int]] = set()
        self.holder: tuple[int, int] | None = None

    @property
    def in_use(self) -> int:
        """How many ids this rank holds (the world's and the bootstrap's included)."""
        return CONTEXT_LIMIT - self.free.bit_count()

    def window(self) -> tuple[int, int]:
        """``(base, bits)``: up to `WINDOW_BITS` unlocked free ids from the lowest one (bit i
        of ``bits`` is id ``base + i``), locked until `unlock`."""
        available = self.free & ~self.locked
        low = lowest(available)
        if low is None:
            return 0, 0
        base = low & ~63
        bits = (available >> base) & ((1 << WINDOW_BITS) - 1)
        self.locked |= bits << base
        return base, bits

    def whole(self, key: tuple[int, int]) -> int | None:
        """Every unlocked free id, locked until `put_back`, for a round of the agreement
        ``key``; None (nothing offered) while another agreement holds them, or one with a
        lower key waits for them."""
        self.waiting.add(key)
        if self.holder is not None or min(self.waiting) != key:
            return None
        self.holder = key
        available = self.free & ~self.locked
        self.locked |= available
        return available

    def put_back(self, key: tuple[int, int], bits: int) -> None:
        """The agreement ``key`` is done with a whole-mask round that offered ``bits``."""
        self.locked &= ~bits
        if self.holder == key:
            self.holder = None

    def leave(self, key: tuple[int, int]) -> None:
        """The agreement ``key`` is done with its whole-mask rounds."""
        self.waiting.discard(key)
        if self.holder == key:
            self.holder = None

    def unlock(self, bits: int) -> None:
        """An agreement is done with the ids ``bits``."""
        self.locked &= ~bits

    def take(self, context: int) -> None:
        """This rank is a member of a new communicator ``context``."""
        self.free &= ~(1 << context)

    def release(self, context: int, calls: int) -> None:
        """A communicator ``context`` that reached call number ``calls`` was freed here."""
        self.free |= 1 << context
        self.floor = max(self.floor, calls)
