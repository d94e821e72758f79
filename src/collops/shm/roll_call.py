"""Roll call: the members of a rooted native call meet the root's word for the call.

A bcast or scatter root hears from no one, and two ranks that each believe themselves the
root of a gather or reduce wait for data nobody sends: ranks that disagree on the root would
return different data or hang. ``shm_stream`` runs its rooted calls with a roll call beside
the data: the root stores its held word for the call (call number and fingerprint, which
holds the root) in its direct slot; every other member waits for that word and acknowledges
it; the root completes once every member has. Two ranks that each believe themselves the root
both store a word, and each meets the other's — the call's number with another fingerprint —
while it waits: `CollectiveMismatch` naming both calls (`DirectArea.check`, with the call's
``expect``). Only the root writes: a member's word in its own slot could wait behind the
acknowledgement of a later call whose execution started first, and deadlock.
"""

from __future__ import annotations

from .direct_area import DirectArea, call_number, held_word, slot_of

#: the collectives with a root
ROOTED = frozenset({"bcast", "scatter", "gather", "reduce"})


class RollCall:
    """One member's part of a roll call: the root stores its word and waits for every
    member's acknowledgement; the others wait for the root's word and acknowledge it."""

    __slots__ = ("area", "slot", "k", "word", "fingerprint", "root", "is_root", "others",
                 "written", "left", "write_k")

    def __init__(self, area: DirectArea, size: int, root: int, rank: int, seq: int,
                 phase: int, fingerprint: int) -> None:
        self.area = area
        self.k = k = call_number(seq, phase)
        self.slot = slot_of(seq, phase)
        self.fingerprint = fingerprint
        self.word = held_word(k, fingerprint)
        self.root = root
        self.is_root = is_root = rank == root
        #: the root: the members that acknowledge its word; the others: the root
        self.others = tuple(j for j in range(size) if j != rank) if is_root else (root,)
        self.written = not is_root
        self.left = 1
        if is_root:
            if not area.unwritten and area.writable(self.slot):
                self._write()
            else:
                area.inflight += 1
                area.queue_write(self, k)
        else:
            self.poll()  # the root's word may be there already: acknowledge before the data

    def _write(self) -> None:
        self.area.publish(self.slot, self.k, self.fingerprint, self.others)
        self.written = True

    def ready(self) -> bool:
        """Whether `poll` can move: the word may be stored, or the awaited words have come."""
        area = self.area
        if not self.written:
            return area.unwritten[0] is self and area.writable(self.slot)
        return not self.awaited()

    def awaited(self) -> list[int]:
        """The members this rank waits for: readers of the slot's last call, the members
        yet to acknowledge the root's word, or (elsewhere) the root."""
        area = self.area
        if not self.written or self.is_root:
            return area.unacknowledged(self.slot)
        return area.missing(self.slot, self.word, self.others)

    def poll(self) -> bool:
        """Advance without blocking; True once the root's word is stored and every member
        has acknowledged it (the root), or this rank has (the others)."""
        if not self.left:
            return True
        area = self.area
        if not self.written:
            if not (area.unwritten[0] is self and area.writable(self.slot)):
                return False
            area.unwritten.popleft()
            area.inflight -= 1
            self._write()
        if self.is_root:
            if area.unacknowledged(self.slot):
                return False
        else:
            if area.missing(self.slot, self.word, self.others):
                return False
            area.acknowledge(self.slot, self.k, self.others)
        self.left = 0
        return True

    def end(self) -> None:
        """Give up (the call failed): leave the write queue."""
        if self.left:
            self.left = 0
            if not self.written:
                self.area.unwritten.remove(self)
                self.area.inflight -= 1
