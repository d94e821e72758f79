"""Ranks that disagree on a rooted call's root raise `CollectiveMismatch` naming both roots,
on threads and over shared memory, small and large; a bcast root's bad ``out`` raises before
its data leaves, and the other ranks never receive data from that call."""

from __future__ import annotations

import numpy as np
import pytest

import collops
from collops import CollectiveMismatch, CollectiveTimeout, PeerFailed

SIZES = {"8B": 1, "8MiB": 1 << 20}  # float64 items per rank's block


def _call(comm, collective, n, root, algorithm=None):
    p, me = comm.size, comm.rank
    block = np.full(n, float(me + 1))
    whole = np.full(n * p, float(me + 1))
    if collective == "bcast":
        return comm.bcast(block, root=root, algorithm=algorithm)
    if collective == "scatter":
        return comm.scatter(whole, root=root, algorithm=algorithm)
    if collective == "scatterv":
        return comm.scatterv(whole, [n] * p, root=root, algorithm=algorithm)
    if collective == "gather":
        return comm.gather(block, root=root, algorithm=algorithm)
    return comm.reduce(block, root=root, algorithm=algorithm)


def _each_its_own_root(comm, collective, n, algorithm=None):
    try:
        _call(comm, collective, n, comm.rank, algorithm)
    except CollectiveMismatch as exc:
        # the communicator is still usable: nothing of the failed call is left in flight
        total = comm.allreduce(np.ones(3), timeout=20)
        assert np.array_equal(total, np.full(3, float(comm.size)))
        return str(exc)
    return "no error"


#: the shared-memory algorithms that check the root themselves (`Algorithm.agrees_on_root`),
#: each asked for by name at a size it takes: within a direct slot, or beyond it
NATIVE = {"shm_direct": 1, "shm_stream": 1 << 16, "shm_cma": 1 << 16}
ROOTED = ("bcast", "scatter", "gather", "reduce")
#: (collective, transport, float64 items per block, algorithm: None for selection's choice)
CASES = [(c, t, n, None) for c in ("bcast", "scatter", "scatterv", "gather", "reduce")
         for t in ("inproc", "shm") for n in SIZES.values()] + [
    (c, "shm", n, a) for c in ROOTED for a, n in NATIVE.items()]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("collective", "transport", "n", "algorithm"), CASES)
def test_a_root_disagreement_is_a_mismatch_naming_both_roots(collective, transport, n,
                                                             algorithm):
    texts = collops.spawn(_each_its_own_root, 2, collective, n, algorithm,
                          transport=transport, timeout=60)
    for text in texts:
        assert "root=0" in text and "root=1" in text, texts


def _two_agree_one_differs(comm, collective, n, algorithm=None):
    root = 2 if comm.rank == 2 else 0
    try:
        got = _call(comm, collective, n, root, algorithm)
    except CollectiveMismatch as exc:
        return ("mismatch", str(exc))
    except CollectiveTimeout:
        return ("timeout", "")
    except PeerFailed:  # a root that raised stopped feeding this rank
        return ("failed", "")
    return ("returned", None if got is None else float(np.asarray(got).reshape(-1)[0]))


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("transport", "n", "algorithm"), [
    ("inproc", 1, None), ("shm", 1, None), *(("shm", n, a) for a, n in NATIVE.items())])
@pytest.mark.parametrize("collective", ROOTED)
def test_the_odd_root_out_never_returns_quietly(collective, transport, n, algorithm):
    # ranks 0 and 1 take rank 0 as the root, rank 2 takes itself: rank 2 and the root it
    # disagrees with must raise rather than return
    got = collops.spawn(_two_agree_one_differs, 3, collective, n, algorithm,
                        transport=transport, timeout=60)
    assert got[2][0] == "mismatch" and "root=2" in got[2][1], got
    assert got[0][0] == "mismatch", got


def _bad_out_at_the_root(comm, n):
    x = np.arange(float(n))
    if comm.rank == 0:
        try:
            comm.bcast(x, 0, out=np.empty(n, np.int32))  # wrong dtype
        except collops.ArgumentError as exc:
            assert "out" in str(exc)
        try:  # the next call meets the non-root's bcast: a mismatch on both sides
            comm.barrier(timeout=2)
        except (CollectiveMismatch, CollectiveTimeout, PeerFailed):
            pass
        return "root raised"
    try:
        got = comm.bcast(None, 0, timeout=10)
    except (CollectiveMismatch, PeerFailed) as exc:
        return type(exc).__name__
    return f"received {got!r}"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("transport", ["inproc", "shm"])
def test_a_bcast_root_checks_out_before_its_data_leaves(transport, size):
    got = collops.spawn(_bad_out_at_the_root, 2, SIZES[size], transport=transport, timeout=60)
    assert got == ["root raised", "CollectiveMismatch"], got
