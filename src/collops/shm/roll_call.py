"""Roll call: the root of a rooted native call hears every member's word for the call.

A bcast or scatter root hears from no one, and two ranks that each believe themselves the
root of a gather or reduce wait for data nobody sends: ranks that disagree on the root would
return different data or hang. ``shm_stream`` runs its rooted calls with a roll call beside
the data: every member stores its held word for the call (call number and fingerprint, which
holds the root) in its direct slot for the call, and the root waits for every member's word
before it completes. A word with the call's number and another fingerprint is
`CollectiveMismatch` naming both calls (`DirectArea.check`, with the call's ``expect``).
The words are written in call-number order with the direct calls' (`DirectArea.unwritten`).
"""

from __future__ import annotations

from .direct_area import DirectArea, call_number, held_word, slot_of

#: the collectives with a root
ROOTED = frozenset({"bcast", "scatter", "gather", "reduce"})


class RollCall:
    """One member's part of a roll call: store its word; at the root, wait for the others'."""

    __slots__ = ("area", "slot", "k", "word", "fingerprint", "readers", "others", "written",
                 "left", "write_k")

    def __init__(self, area: DirectArea, size: int, root: int, rank: int, seq: int,
                 phase: int, fingerprint: int) -> None:
        self.area = area
        self.k = k = call_number(seq, phase)
        self.slot = slot_of(seq, phase)
        self.fingerprint = fingerprint
        self.word = held_word(k, fingerprint)
        is_root = rank == root
        #: the members whose words this rank waits for (the root: every other one)
        self.others = tuple(j for j in range(size) if j != rank) if is_root else ()
        #: the members that read this rank's word (a non-root's: the root)
        self.readers = () if is_root else (root,)
        self.written = False
        self.left = 1
        if not area.unwritten and area.writable(self.slot):
            self._write()
        else:
            area.inflight += 1
            area.queue_write(self, k)

    def _write(self) -> None:
        self.area.publish(self.slot, self.k, self.fingerprint, self.readers)
        self.written = True

    def ready(self) -> bool:
        """Whether `poll` can move: the word may be stored, or the others' have come."""
        area = self.area
        if not self.written:
            return area.unwritten[0] is self and area.writable(self.slot)
        return not area.missing(self.slot, self.word, self.others)

    def awaited(self) -> list[int]:
        """The members this rank waits for: readers of the slot's last call, or absentees."""
        if not self.written:
            return self.area.unacknowledged(self.slot)
        return self.area.missing(self.slot, self.word, self.others)

    def poll(self) -> bool:
        """Advance without blocking; True once the word is stored and, at the root, every
        member's has come (and been acknowledged)."""
        if not self.left:
            return True
        area = self.area
        if not self.written:
            if not (area.unwritten[0] is self and area.writable(self.slot)):
                return False
            area.unwritten.popleft()
            area.inflight -= 1
            self._write()
        if self.others:
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
