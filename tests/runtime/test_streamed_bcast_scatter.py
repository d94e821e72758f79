"""Large ``bcast`` and ``scatter`` on ``shm`` called again and again, as a benchmark calls them:
an envelope, then the data streamed (``shm_stream``) in a phase of its own, which each rank
finds from the envelope's cached view entry after the first call of a signature
(`FastPaths._data_call`) and which runs its roll call beside the data (`RollCall`, woken by
the stream plan's ``wake``).

Every call's result against numpy, at 2 and 3 ranks, 1 MiB and 4 MiB, with ``out=`` given
and not, the benchmark's own call shape (`collops.bench.measure.collops_call`), signatures
alternating through one envelope, compiled and Python loops; then, after warm calls, a root
disagreement is still `CollectiveMismatch` naming both roots, a wrong ``out`` still
`ArgumentError` naming ``out``, and a dead peer still `PeerFailed` naming it.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import collops
from collops import CollectiveMismatch
from tests.support.failures import peer_failures, record_peer_failed
from tests.support.runners import compiled_runners

MIB = 1 << 20
SIZES = {"1MiB": MIB, "4MiB": 4 * MIB}
#: calls of each signature: the first prepares the data phase, the rest find it cached
ROUNDS = 4


@pytest.fixture(params=["compiled", "python"])
def mode(request):
    """The compiled stream loop and the Python one (children fork with the setting)."""
    with compiled_runners(request.param == "compiled"):
        yield request.param


def _whole(collective, p, nbytes, i, root, dtype=np.float64):
    """The root's array of round ``i``: a bcast's ``nbytes``, a scatter's ``nbytes`` a rank."""
    n = nbytes // np.dtype(dtype).itemsize * (p if collective == "scatter" else 1)
    return (np.arange(n) % 1000 * (i + 1) + root).astype(dtype)


def _want(collective, p, rank, nbytes, i, root, dtype=np.float64):
    whole = _whole(collective, p, nbytes, i, root, dtype)
    return whole if collective == "bcast" else np.split(whole, p)[rank]


def _shapes(comm, collective, nbytes, i, root, dtype):
    """One round's calls, ``(name, call)``: ``out=`` given, not given, the benchmark's."""
    p, r = comm.size, comm.rank
    whole = _whole(collective, p, nbytes, i, root, dtype)
    mine = whole if r == root else None
    n = whole.size // (p if collective == "scatter" else 1)
    out = np.empty(n, dtype)
    fn = getattr(comm, collective)
    if collective == "bcast":
        own = whole.copy() if r == root else np.full(n, -1, dtype)  # every rank's send buffer
        bench = ("bench", lambda: fn(own, root, out=own if r == root else out))
    else:
        bench = ("bench", lambda: fn(mine, root, out=out))
    return [("out", lambda: fn(mine, root, out=out)), ("no out", lambda: fn(mine, root)),
            bench]


def _rounds(comm, collective, sizes, dtypes, root):
    """ROUNDS rounds of every call shape, signatures alternating within each round: the
    calls whose result differs from numpy, and the algorithms that ran."""
    wrong, ran = [], set()
    for i in range(ROUNDS):
        for nbytes in sizes:
            for dtype in dtypes:
                for name, call in _shapes(comm, collective, nbytes, i, root, dtype):
                    got = call()
                    ran.add(comm.last_algorithm)
                    want = _want(collective, comm.size, comm.rank, nbytes, i, root, dtype)
                    if got.dtype != want.dtype or not np.array_equal(got.reshape(-1), want):
                        wrong.append((i, nbytes, np.dtype(dtype).name, name))
    return wrong, sorted(ran)


@pytest.mark.timeout(200)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("collective", ["bcast", "scatter"])
@pytest.mark.parametrize("p", [2, 3])
def test_repeated_large_calls_match_numpy_in_every_call_shape(p, collective, size, mode):
    got = collops.spawn(_rounds, p, collective, [SIZES[size]], [np.float64], p - 1,
                        transport="shm", timeout=180)
    for rank, (wrong, ran) in enumerate(got):
        assert wrong == [], (rank, wrong)
        if p == 2:  # the data phase these tests are about streams at 2 ranks
            assert "shm_stream" in ran, (rank, ran)


@pytest.mark.timeout(200)
@pytest.mark.parametrize("collective", ["bcast", "scatter"])
def test_signatures_alternating_through_one_envelope_each_find_their_own_data_phase(
        collective):
    got = collops.spawn(_rounds, 2, collective, list(SIZES.values()),
                        [np.float64, np.float32], 0, transport="shm", timeout=180)
    assert [wrong for wrong, _ in got] == [[], []], got


def _warm_then(comm, collective, nbytes, last):
    """Warm calls with root 0, then ``last(comm)``'s outcome; the communicator still works."""
    wrong, _ = _rounds(comm, collective, [nbytes], [np.float64], 0)
    assert wrong == [], wrong
    try:
        last(comm)
        outcome = "no error"
    except CollectiveMismatch as exc:
        outcome = "mismatch: " + str(exc)
    except collops.ArgumentError as exc:
        outcome = "argument: " + str(exc)
    total = comm.allreduce(np.ones(3), timeout=30)
    assert np.array_equal(total, np.full(3, float(comm.size)))
    return outcome


def _each_its_own_root(collective, nbytes):
    def last(comm):
        getattr(comm, collective)(_whole(collective, comm.size, nbytes, 9, comm.rank),
                                  comm.rank, timeout=30)
    return last


@pytest.mark.timeout(200)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("collective", ["bcast", "scatter"])
def test_a_root_disagreement_after_warm_calls_is_a_mismatch_naming_both_roots(collective,
                                                                               size):
    got = collops.spawn(_warm_then, 2, collective, SIZES[size],
                        _each_its_own_root(collective, SIZES[size]), transport="shm",
                        timeout=180)
    for text in got:
        assert text.startswith("mismatch") and "root=0" in text and "root=1" in text, got


def _wrong_out_at_a_non_root(collective, nbytes):
    def last(comm):
        n = nbytes // 8
        out = np.empty(n, np.float32) if comm.rank == 1 else np.empty(n)  # wrong dtype
        x = _whole(collective, comm.size, nbytes, 9, 0) if comm.rank == 0 else None
        got = getattr(comm, collective)(x, 0, out=out, timeout=30)
        assert np.array_equal(got, _want(collective, comm.size, comm.rank, nbytes, 9, 0))
    return last


@pytest.mark.timeout(200)
@pytest.mark.parametrize("collective", ["bcast", "scatter"])
def test_a_wrong_out_after_warm_calls_still_names_out(collective):
    got = collops.spawn(_warm_then, 2, collective, MIB,
                        _wrong_out_at_a_non_root(collective, MIB), transport="shm",
                        timeout=180)
    assert got[0] == "no error", got  # the root's call completes: the non-root took part
    assert got[1].startswith("argument") and "out" in got[1], got


def _reader_dies(comm, folder, collective, nbytes):
    wrong, _ = _rounds(comm, collective, [nbytes], [np.float64], 0)
    assert wrong == [], wrong
    if comm.rank == 1:  # the reader is gone before the root's next call
        os._exit(3)
    x = _whole(collective, comm.size, nbytes, 9, 0)
    record_peer_failed(folder, comm.rank, lambda: getattr(comm, collective)(x, 0, timeout=20))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("collective", ["bcast", "scatter"])
def test_a_dead_reader_after_warm_calls_is_peer_failed_at_the_root(tmp_path, collective,
                                                                   size):
    seen = peer_failures(_reader_dies, 2, tmp_path, collective, SIZES[size])
    assert sorted(seen) == [0], seen
    assert seen[0]["failed"] == 1 and seen[0]["seconds"] < 2.0, seen
