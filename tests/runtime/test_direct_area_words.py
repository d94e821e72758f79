"""A direct area's mismatch check reads a peer's slot while the peer may publish its next call
there (a slot serves every other call): a word read across that publish is no mismatch."""

from __future__ import annotations

import numpy as np

from collops.shm.direct_area import DirectArea, held_word


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
