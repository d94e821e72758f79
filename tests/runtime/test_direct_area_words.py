"""A direct area's words: the mismatch check reads a peer's slot while the peer may publish its
next call there (a slot serves every other call), and a word read across that publish is no
mismatch; a root that gives its bcast up frees its slot without its readers; who waits for
whose word when ranks may disagree on the root."""

from __future__ import annotations

import numpy as np

from collops.algorithms.spec import CallSpec
from collops.shm import direct_roles as roles
from collops.shm.direct import call_fingerprint
from collops.shm.direct_area import DirectArea, Occupancy, held_word


class _Publishing:
    """Words of shared memory where a peer publishes ``later`` (word, fingerprint) into the
    watched slot just after the checker first reads the slot's control word."""

    def __init__(self, words: np.ndarray, held: int, fps: int, later: tuple[int, int]) -> None:
        self.words, self.held, self.fps, self.later = words, held, fps, later
        self.reads = 0

    def __getitem__(self, index: int) -> int:
        value = int(self.words[index])
        if index == self.held:
            self.reads += 1
            if self.reads == 1:  # the peer publishes right after this read
                self.words[self.fps], self.words[self.held] = self.later[1], self.later[0]
        return value


def _area(words: object) -> DirectArea:
    area = DirectArea.__new__(DirectArea)
    area.words = words  # type: ignore[assignment]
    area.held = [[0, 2], [4, 6]]
    area.fps = [[1, 3], [5, 7]]
    return area


def test_a_peer_publishing_its_next_call_during_the_check_is_no_mismatch():
    mine, later_fp = 0x1234_5678_9ABC, 0x0FED_CBA9_8765
    k = 9
    words = np.zeros(8, np.uint64)
    words[5], words[4] = mine, held_word(k, mine)  # member 1's slot 0 holds the same call
    later = (held_word(k + 16, later_fp), later_fp)  # its call two calls on, same slot
    area = _area(_Publishing(words, 4, 5, later))
    assert area.mismatched(0, held_word(k, mine), [1]) == []


def test_a_peer_that_made_another_call_is_a_mismatch_with_its_fingerprint():
    mine, theirs = 0x1234_5678_9ABC, 0x1234_5678_9ABD
    k = 9
    words = np.zeros(8, np.uint64)
    words[5], words[4] = theirs, held_word(k, theirs)
    assert _area(words).mismatched(0, held_word(k, mine), [1]) == [(1, theirs)]
    words[5], words[4] = mine, held_word(k, mine)
    assert _area(words).mismatched(0, held_word(k, mine), [1]) == []


class _Transport:
    def wake_sleepers(self, group: object) -> None:
        return None


def _bcast_area(root: int, size: int, k: int) -> tuple[DirectArea, memoryview]:
    """Rank ``root``'s view of a 1-slot direct area of ``size`` ranks whose slot 0 holds its
    bcast's call ``k`` for every other rank to read."""
    spec = CallSpec("bcast", size, count=1, root=root)
    fingerprint = call_fingerprint(spec)
    words = memoryview(bytearray(8 * (4 * size + size * size))).cast("Q")  # as the segment's
    area = DirectArea.__new__(DirectArea)
    area.words, area.group = words, list(range(size))
    area.transport = _Transport()  # type: ignore[assignment]
    area.index = root
    area.held = [[4 * m] for m in range(size)]
    area.fps = [[4 * m + 1] for m in range(size)]
    # ack[reader][writer][slot]
    area.ack = [[[4 * size + r * size + w] for w in range(size)] for r in range(size)]
    area.own_pending, area.unreleased = [0], [[]]
    readers = tuple(m for m in range(size) if m != root)
    words[area.fps[root][0]], words[area.held[root][0]] = fingerprint, held_word(k, fingerprint)
    area.occupant = Occupancy()
    area.occupant[0] = (k, readers)
    return area, words


def test_a_root_that_gives_up_its_bcast_frees_its_slot_without_its_readers():
    # root 2's readers 0 and 1 never came: once it gives the call up its slot is its own
    # again, and the stand-ins it wrote read as "read call k", never as an arrival still due
    k = 9
    area, words = _bcast_area(2, 3, k)
    assert not area.writable(0) and area.unconfirmed(0) == [0, 1]
    area.release(0, k)
    assert area.writable(0)
    assert [int(words[area.ack[r][2][0]]) for r in (0, 1)] == [k, k]


def test_who_waits_for_whom_when_ranks_may_disagree_on_the_root():
    for size in (2, 3, 4):
        for root in range(size):
            for rank in range(size):
                others = [m for m in range(size) if m != rank]
                for collective in ("gather", "reduce"):
                    spec = CallSpec(collective, size, count=1, root=root)
                    # the root reads every slot; a non-root waits for its root's word, so
                    # ranks that each name another as the root never all return None
                    want = others if rank == root else [root]
                    assert roles.waits_for(spec, rank) == want
                    assert roles.names_its_root(spec, rank) == (rank != root)
                    assert roles.readers(spec, rank) == (
                        tuple(others) if rank == root else (root,))
                    assert roles.publishes(spec, rank)
                for collective in ("bcast", "scatter"):
                    spec = CallSpec(collective, size, count=1, root=root)
                    # a reader reads its root's slot; the root waits for every reader's arrival
                    assert roles.waits_for(spec, rank) == ([] if rank == root else [root])
                    assert roles.confirms(spec, rank) == (rank == root)
                    assert roles.announces(spec, rank) == (rank != root)
