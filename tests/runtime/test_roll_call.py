"""The roll call of ``shm_stream``'s rooted calls (`collops.shm.roll_call`): more rooted calls
in flight than the roll-call words hold, so a rank reuses its word for a call only once every
peer is done with the earlier one, and every result still matches numpy."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import collops
from collops.shm.direct_area import call_number, held_word
from collops.shm.roll_call import RollCall
from collops.shm.segment import ROLL_SLOTS

#: float64 items of each rank's block: 1 MiB, large enough to stream
N = 1 << 17
COLLECTIVES = ("gather", "reduce", "bcast", "scatter")
#: rooted calls in flight at once: more than the calls a rank's roll-call words serve
CALLS = ROLL_SLOTS // 2 + 8


def _block(collective: str, size: int, rank: int, i: int) -> np.ndarray:
    return np.arange(float(N * (size if collective == "scatter" else 1))) * (i + 1) + rank


def _expected(collective: str, size: int, rank: int, i: int, root: int) -> np.ndarray | None:
    blocks = [_block(collective, size, r, i) for r in range(size)]
    if collective == "bcast":
        return blocks[root]
    if collective == "scatter":
        return blocks[root][rank * N:(rank + 1) * N]
    if rank != root:
        return None
    return np.concatenate(blocks) if collective == "gather" else np.sum(blocks, axis=0)


def _many_in_flight(comm: collops.Comm) -> list[int]:
    """CALLS non-blocking rooted calls, roots in turn, waited for last-first: the calls
    whose result differs from numpy's."""
    requests = []
    for i in range(CALLS):
        collective, root = COLLECTIVES[i % len(COLLECTIVES)], i % comm.size
        x = _block(collective, comm.size, comm.rank, i)
        if collective == "reduce":
            req = comm.ireduce(x, "sum", root, algorithm="shm_stream", timeout=60)
        else:
            req = getattr(comm, "i" + collective)(x, root, algorithm="shm_stream", timeout=60)
        requests.append((i, collective, root, req))
    wrong = []
    for i, collective, root, req in reversed(requests):
        got, want = req.wait(), _expected(collective, comm.size, comm.rank, i, root)
        if not (got is None if want is None else np.array_equal(got, want)):
            wrong.append(i)
    return wrong


@pytest.mark.timeout(240)
@pytest.mark.parametrize("p", [2, 3])
def test_more_rooted_calls_in_flight_than_roll_call_words(p):
    assert collops.spawn(_many_in_flight, p, transport="shm", timeout=200) == [[]] * p


def test_every_members_word_wakes_the_peers_asleep():
    """A root may sleep once its chunks are out, waiting for its readers' words: a reader's
    word wakes it (else the root woke only as the reader's compiled pass ended, after all
    the data), as a root's wakes the writers that wait for it."""
    woken: list[int] = []
    for me, root in ((1, 0), (0, 0)):  # a non-root, then a root
        words = memoryview(bytearray(8 * 1024)).cast("Q")
        direct = SimpleNamespace(group=[0, 1], index=me, words=words, roll_book=None)
        area = SimpleNamespace(roll_held=[100, 400], roll_fps=[164, 464],
                               roll_done=[228, 528], roll_books={})
        word = held_word(call_number(1, 0), 12345)
        call = RollCall(direct, area, 1, 0, word, 12345, root, lambda me=me: woken.append(me))
        assert call.written and words[area.roll_held[me] + call.slot] == word
        assert words[area.roll_fps[me] + call.slot] == 12345
    assert woken == [1, 0]
