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
takes an id past the earlier window: past the ids with a direct area, on ``shm``); a whole
mask locks everything, which can only leave a concurrent agreement with no common id — the
limit error, never a shared id. Blocking calls on one rank never overlap.

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

    def whole(self) -> int:
        """Every unlocked free id, locked until `unlock`."""
        available = self.free & ~self.locked
        self.locked |= available
        return available

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
