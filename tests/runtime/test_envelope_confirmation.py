"""A large bcast's or scatter's root over shared memory: its envelope goes through a direct slot
and its data follows in a phase whose algorithm checks the root itself (``shm_stream``'s roll
call), so the envelope's root does not also wait for its readers to find the envelope — and
ranks that disagree on the root still raise `CollectiveMismatch` naming both roots, whether
each one's data is inline in the envelope or follows it, on the fast path as on the first call.
An ``shm_cma`` reader, like a direct one, says it found the call (``ARRIVED``) before it copies.
"""

from __future__ import annotations

import numpy as np
import pytest

import collops
from collops import CollectiveMismatch
from collops.shm.direct_area import DirectArea

LARGE = 1 << 17  # float64 items: 1 MiB, beyond the envelope, streamed
MID = 1 << 13  # 64 KiB: beyond the envelope, the data in a direct slot of its own
SMALL = 1  # inline in the envelope


def _call(comm, collective, n, root):
    if collective == "bcast":
        return comm.bcast(np.full(n, float(comm.rank + 1)), root=root, timeout=30)
    return comm.scatter(np.full(n * comm.size, float(comm.rank + 1)), root=root, timeout=30)


def _root_confirmations(comm, collective, calls, n):
    """How often the root of ``calls`` repeated calls of ``n`` items (after two that prepare
    the fast path) asks whether its envelope's readers found it (a first phase's slot, an
    even one), and the algorithm of the data."""
    asked = [0]
    unconfirmed = DirectArea.unconfirmed

    def counting(area, slot):
        asked[0] += slot % 2 == 0
        return unconfirmed(area, slot)

    for _ in range(2):
        _call(comm, collective, n, 0)
    DirectArea.unconfirmed = counting
    try:
        for _ in range(calls):
            got = _call(comm, collective, n, 0)
            assert np.array_equal(got, np.full(n, 1.0))
    finally:
        DirectArea.unconfirmed = unconfirmed
    return asked[0], comm.last_algorithm


@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [LARGE, MID])
@pytest.mark.parametrize("collective", ["bcast", "scatter"])
def test_a_large_root_does_not_wait_for_its_envelope_to_be_found(collective, n, monkeypatch):
    # the Python protocol (the compiled runner's twin) shows the root's waits
    monkeypatch.setenv("COLLOPS_COMPILED", "0")
    got = collops.spawn(_root_confirmations, 2, collective, 5, n, transport="shm", timeout=90)
    asked, algorithm = got[0]
    # the data phase's algorithm checks the root itself
    assert algorithm in ("shm_stream", "shm_direct"), got
    assert asked == 0, got


def _roots_after_good_calls(comm, collective, sizes):
    """Two agreeing calls of this rank's size (the fast path prepared), then each rank its own
    root with its own size: the error's text, then whether the communicator still works."""
    n = sizes[comm.rank]
    for _ in range(3):
        _call(comm, collective, n, 0)
    try:
        _call(comm, collective, n, comm.rank)
        text = "no error"
    except CollectiveMismatch as exc:
        text = str(exc)
    total = comm.allreduce(np.ones(3), timeout=20)
    return text, bool(np.array_equal(total, np.full(3, float(comm.size))))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sizes", [(LARGE, LARGE), (LARGE, SMALL), (SMALL, LARGE),
                                   (MID, SMALL), (SMALL, MID), (MID, LARGE)],
                         ids=["both-large", "root0-large", "root1-large", "root0-mid",
                              "root1-mid", "mid-large"])
@pytest.mark.parametrize("collective", ["bcast", "scatter"])
def test_roots_disagreeing_on_the_fast_path_raise_naming_both(collective, sizes):
    got = collops.spawn(_roots_after_good_calls, 2, collective, sizes, transport="shm",
                        timeout=90)
    for text, usable in got:
        assert "root=0" in text and "root=1" in text, got
        assert usable, got


def _ack_words_while_reading(comm, collective):
    """The acknowledgement words an ``shm_cma`` reader shows its writers while it copies."""
    from collops.shm.cma import CmaExecution

    seen = []
    read = CmaExecution._read

    def reading(ex, member, remote, local, nbytes):
        slot, k, _ = ex._slot_word()
        area = ex.area
        seen.append((int(area.words[area.ack[area.index][member][slot]]), k))
        return read(ex, member, remote, local, nbytes)

    CmaExecution._read = reading
    try:
        n = 1 << 14
        x = np.full(n * (comm.size if collective == "scatter" else 1), 1.0)
        if collective == "bcast":
            got = comm.bcast(x, root=0, algorithm="shm_cma", timeout=30)
        else:
            got = comm.scatter(x, root=0, algorithm="shm_cma", timeout=30)
        assert np.array_equal(got, np.full(n, 1.0))
    finally:
        CmaExecution._read = read
    return seen


@pytest.mark.timeout(120)
@pytest.mark.parametrize("collective", ["bcast", "scatter"])
def test_an_shm_cma_reader_says_it_found_the_call_before_it_copies(collective):
    from collops.shm.direct_area import ARRIVED

    got = collops.spawn(_ack_words_while_reading, 2, collective, transport="shm", timeout=90)
    assert got[1], got  # the reader copied
    assert all(word == k | ARRIVED for word, k in got[1]), got
