"""Small v-calls on their bound route: the key of their counts (`vector_key`) is the same for
every form of the same integers (list, tuple, numpy array, numpy integers), so a bound call is
reused whatever form the caller builds, and anything else (floats, strings) is still left to
the general path, which says what is wrong — also once the signature is bound. Results
against numpy, compiled and ``COLLOPS_COMPILED=0``."""

from __future__ import annotations

import numpy as np
import pytest

import collops
from collops.errors import ArgumentError
from collops.runtime.vector_calls import vector_key

pytestmark = pytest.mark.timeout(120)


def test_the_key_of_counts_is_one_for_every_form_of_the_same_integers():
    want = ((1, 2, 0), None)
    for counts in ([1, 2, 0], (1, 2, 0), np.array([1, 2, 0]), [np.int64(1), 2, np.uint8(0)]):
        assert vector_key(counts, None) == want, counts
    assert vector_key([1, True], [0, 3]) == ((1, 1), (0, 3))
    assert vector_key([1], [2], (3,), None) == ((1,), (2,), (3,), None)
    assert vector_key([4]) == ((4,),)


@pytest.mark.parametrize("bad", [[1.0, 1], [1, 1.5], ["1", 1], "11", b"11", [None, 1],
                                 np.array([1.0, 1.0])])
def test_counts_that_are_not_integers_have_no_key(bad):
    assert vector_key(bad, None) is None
    assert vector_key([1, 1], bad) is None
    assert vector_key([1, 1], None, bad, None) is None


def _forms(p: int, count: int) -> list[object]:
    """The same counts as a list, a tuple, a numpy array and a list of numpy integers."""
    return [[count] * p, (count,) * p, np.full(p, count), [np.int64(count)] * p]


def _gatherv_and_alltoallv(comm):
    p, r = comm.size, comm.rank
    names = []
    for count in (1, 3):
        x = np.arange(count, dtype=float) + 10 * r
        whole = np.concatenate([np.arange(count, dtype=float) + 10 * j for j in range(p)])
        blocks = np.arange(p * count, dtype=float) + 100 * r
        mine = np.concatenate([np.arange(p * count, dtype=float)[r * count:(r + 1) * count]
                               + 100 * j for j in range(p)])
        for counts in _forms(p, count) * 2:  # bound from the second call of each signature
            got = comm.gatherv(x, 0, counts)
            if r == 0:
                assert np.array_equal(got, whole), counts
            else:
                assert got is None
            got = comm.alltoallv(blocks, counts, recvcounts=counts)
            assert np.array_equal(got, mine), counts
        names.append(comm.bound_calls().get("alltoallv"))
        for bad in ([float(count)] * p, [str(count)] * p):  # the bound key never takes them
            with pytest.raises(ArgumentError):
                comm.alltoallv(blocks, bad, recvcounts=[count] * p)
            with pytest.raises(ArgumentError):
                comm.allgatherv(x, bad)
        got = comm.alltoallv(blocks, [count] * p, recvcounts=[count] * p)
        assert np.array_equal(got, mine)
    return names


@pytest.mark.parametrize("compiled", ["1", "0"])
def test_small_v_calls_take_their_bound_call_whatever_form_their_counts_have(monkeypatch,
                                                                             compiled):
    monkeypatch.setenv("COLLOPS_COMPILED", compiled)
    for p in (2, 3):
        names = collops.spawn(_gatherv_and_alltoallv, p, transport="shm", timeout=100)
        want = "shm_direct" if compiled == "1" else None
        assert names == [[want, want]] * p, (p, names)


def _scatters_beyond_the_envelope(comm):
    """scatter and scatterv whose blocks do not fit the envelope (a data phase of their own,
    where the root leaves its own block out of its slot), from every root; each against
    numpy."""
    p, r = comm.size, comm.rank
    for root in (0, p - 1):
        for rows in (600, 1500):  # 4.7 KiB and 11.7 KiB of float64 per rank
            source = np.arange(p * rows, dtype=float) * 3 + root
            for _ in range(3):  # prepared, then bound
                got = comm.scatter(source if r == root else None, root)
                assert np.array_equal(got, source[r * rows:(r + 1) * rows]), (root, rows)
            counts = [rows - 7 * j if j != 1 else 0 for j in range(p)]  # a zero count
            at = [sum(counts[:j]) for j in range(p)]
            gaps = [a + 5 * j for j, a in enumerate(at)]  # not packed: the root packs them
            wide = np.arange(gaps[-1] + counts[-1], dtype=float) + 0.5
            for displs, x in ((None, source[: sum(counts)]), (gaps, wide)):
                want = x[(displs or at)[r]: (displs or at)[r] + counts[r]]
                for _ in range(3):
                    out = np.full(counts[r], -1.0)
                    got = comm.scatterv(x if r == root else None,
                                        counts if r == root else None, root,
                                        displs=displs if r == root else None, out=out)
                    assert np.array_equal(got, want) and np.array_equal(out, want), (
                        root, rows, displs)
    return comm.last_algorithm


@pytest.mark.parametrize("compiled", ["1", "0"])
def test_scatters_beyond_the_envelope_match_numpy_from_every_root(monkeypatch, compiled):
    monkeypatch.setenv("COLLOPS_COMPILED", compiled)
    for p in (2, 3, 4):
        assert collops.spawn(_scatters_beyond_the_envelope, p, transport="shm",
                             timeout=100) == ["shm_direct"] * p
