"""Displacements of the v-collectives (``displs=``, ``sdispls=``, ``rdispls=``; rows) through
the public API on threads and on shared-memory processes, against numpy: gaps, overlapping
send blocks, zero counts, a given ``out`` whose gaps are kept, and the errors MPI's rules
call for (overlapping receive blocks, blocks past the buffer)."""

from __future__ import annotations

import numpy as np
import pytest

import collops
from collops import ArgumentError

pytestmark = pytest.mark.timeout(120)

TRANSPORTS = ["inproc", "shm"]


def _rows_of(rank: int, n: int) -> np.ndarray:
    """Rank ``rank``'s ``n`` rows of two columns, distinct across ranks."""
    return (np.arange(2 * n, dtype=np.int64) + 100 * rank).reshape(n, 2)


def _on_2_and_3_ranks(body, transport: str) -> None:
    """Run ``body`` on 2 and then 3 ranks; every rank must return True."""
    for p in (2, 3):
        assert all(collops.spawn(body, p, transport=transport, timeout=100))


def _placed(blocks: list[np.ndarray], displs: list[int], fill: np.ndarray) -> np.ndarray:
    """``fill`` with each block written at its row displacement (numpy's answer)."""
    out = fill.copy()
    for d, b in zip(displs, blocks, strict=True):
        out[d: d + len(b)] = b
    return out


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_allgatherv_and_gatherv_place_blocks_at_displacements(transport):
    def body(comm):
        p, r = comm.size, comm.rank
        counts = [(j + 1) % 3 for j in range(p)]  # a zero count among them
        displs = [4 * (p - 1 - j) + 1 for j in range(p)]  # reversed order, gaps of rows
        x = _rows_of(r, counts[r])
        blocks = [_rows_of(j, counts[j]) for j in range(p)]
        rows = max(d + c for d, c in zip(displs, counts, strict=True) if c)
        want = _placed(blocks, displs, np.zeros((rows, 2), np.int64))
        got = comm.allgatherv(x, counts, displs=displs)
        assert got.shape == want.shape and np.array_equal(got, want), (got, want)
        # the same with counts exchanged, and non-blocking
        assert np.array_equal(comm.allgatherv(x, None, displs=displs), want)
        assert np.array_equal(comm.iallgatherv(x, counts, displs=displs).wait(), want)
        # a given out: rows outside every block keep what they held
        out = np.full((rows, 2), -7, np.int64)
        got = comm.allgatherv(x, counts, displs=displs, out=out)
        assert got is out or np.shares_memory(got, out)
        assert np.array_equal(out, _placed(blocks, displs, np.full((rows, 2), -7, np.int64)))
        root = p - 1
        # displs significant at the root only (MPI): the others pass None
        g = comm.gatherv(x, root, counts, displs=displs if r == root else None)
        if r == root:
            assert np.array_equal(g, want), (g, want)
        else:
            assert g is None
        return True

    _on_2_and_3_ranks(body, transport)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_scatterv_sends_overlapping_blocks_from_displacements(transport):
    def body(comm):
        p, r = comm.size, comm.rank
        data = np.arange(20, dtype=np.float32).reshape(10, 2)
        counts = [3, 0, 2][:p]
        displs = [1, 9, 2][:p]  # blocks 0 and 2 overlap, row 0 is never sent
        root = 1 % p
        at_root = r == root
        got = comm.scatterv(data if at_root else None, counts if at_root else None, root,
                            displs=displs if at_root else None)
        want = data[displs[r]: displs[r] + counts[r]]
        assert got.shape == want.shape and np.array_equal(got, want), (got, want)
        req = comm.iscatterv(data if at_root else None, counts if at_root else None, root,
                             displs=displs if at_root else None)
        assert np.array_equal(req.wait(), want)
        return True

    _on_2_and_3_ranks(body, transport)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_alltoallv_honours_sdispls_and_rdispls(transport):
    def body(comm):
        p, r = comm.size, comm.rank
        x = _rows_of(r, 5)
        sendcounts = [2 if j != r else 1 for j in range(p)]
        sdispls = [1] * p  # every block starts at row 1: they overlap
        recvcounts = [2 if j != r else 1 for j in range(p)]
        rdispls = [3 * (p - 1 - j) for j in range(p)]
        blocks = [_rows_of(j, 5)[1: 1 + recvcounts[j]] for j in range(p)]
        rows = max(d + c for d, c in zip(rdispls, recvcounts, strict=True))
        want = _placed(blocks, rdispls, np.zeros((rows, 2), np.int64))
        got = comm.alltoallv(x, sendcounts, sdispls, recvcounts, rdispls=rdispls)
        assert np.array_equal(got, want), (got, want)
        got = comm.alltoallv(x, sendcounts, sdispls, None, rdispls=rdispls)  # counts exchanged
        assert np.array_equal(got, want), (got, want)
        req = comm.alltoallv_init(x, sendcounts, sdispls, recvcounts, rdispls=rdispls)
        for _ in range(2):
            req.start()
            assert np.array_equal(req.wait(), want)
        return True

    _on_2_and_3_ranks(body, transport)


#: case -> (call, the call named, the argument named, text in the reason)
BAD = {
    "allgatherv receive blocks overlap": (
        lambda c: c.allgatherv(np.ones(2), [2, 2], displs=[0, 1]), "allgatherv", "displs",
        "receive regions of ranks 0 [0:2] and 1 [1:3] overlap"),
    "gatherv receive blocks overlap at the root": (
        lambda c: c.gatherv(np.ones(2), 0, [2, 2], displs=[3, 2] if c.rank == 0 else None),
        "gatherv", "displs", "overlap"),
    "alltoallv rdispls overlap": (
        lambda c: c.alltoallv(np.ones(4), [2, 2], None, [2, 2], rdispls=[1, 0]), "alltoallv",
        "rdispls", "overlap"),
    "displs negative": (lambda c: c.allgatherv(np.ones(1), [1, 1], displs=[0, -1]),
                        "allgatherv", "displs", "negative"),
    "displs too short": (lambda c: c.allgatherv(np.ones(1), [1, 1], displs=[0]),
                         "allgatherv", "displs", "one entry per rank"),
    "sdispls past x": (lambda c: c.alltoallv(np.ones(4), [2, 2], [0, 3], [2, 2]), "alltoallv",
                       "sdispls", "past the 4 rows"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_displacements_are_argument_errors(case):
    call, name, argument, reason = BAD[case]

    def body(comm):
        # only gatherv's root sees its displs: the others hear that it gave the call up
        told = name == "gatherv" and comm.rank != 0
        with pytest.raises(collops.CollopsError) as info:
            call(comm)
        error = info.value
        if told:
            assert not isinstance(error, ArgumentError), str(error)
        else:
            assert isinstance(error, ArgumentError), str(error)
            assert (error.call, error.argument, error.rank) == (name, argument, comm.rank)
            assert reason in str(error), str(error)
        # every rank ends the call: the communicator still works
        return int(comm.allreduce(np.array([1]), "sum")[0])

    assert collops.spawn(body, 2, timeout=60) == [2, 2]


def test_scatterv_root_displs_past_x_fail_on_every_rank():
    """A root's displs that run past ``x`` are its mistake: its peers are told and raise."""
    def body(comm):
        at_root = comm.rank == 0
        with pytest.raises(collops.CollopsError) as info:
            comm.scatterv(np.ones(4) if at_root else None, [2, 2] if at_root else None, 0,
                          displs=[0, 3] if at_root else None, timeout=30)
        return "displs=[0, 3] on rank 0: block 1 [3:5] runs past" in str(info.value)

    assert collops.spawn(body, 2) == [True, True]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_scatterv_too_large_for_its_envelope_sends_counts_then_data(transport):
    """Rows beyond the envelope follow it (counts, then data); a non-root's wrong ``out`` is
    reported once it has taken part, so the root is not left waiting."""
    def body(comm):
        p, r = comm.size, comm.rank
        data = np.arange(3000 * 4, dtype=np.int32).reshape(3000, 4)
        counts = [1000 + 500 * j for j in range(p)]
        displs = [2999 - c for c in counts]  # overlapping, ending at the last row
        at_root = r == 0
        args = (data if at_root else None, counts if at_root else None, 0)
        got = comm.scatterv(*args, displs=displs if at_root else None)
        assert np.array_equal(got, data[displs[r]: displs[r] + counts[r]])
        if at_root:
            comm.scatterv(*args, displs=displs)
            return True
        with pytest.raises(ArgumentError) as info:
            comm.scatterv(*args, out=np.empty(3, np.int32))
        return info.value.argument == "out"

    assert all(collops.spawn(body, 2, transport=transport, timeout=100))


def test_allgatherv_ranks_whose_displacements_differ_meet_a_mismatch():
    """MPI lets each rank place the blocks where it likes; collops's schedules may merge
    neighbouring blocks into one message, so it asks for the same displacements everywhere
    and says so (threads run the schedules) rather than mismatching message sizes."""
    def body(comm):
        displs = [0, 1] if comm.rank == 0 else [1, 0]
        with pytest.raises((collops.CollectiveMismatch, collops.PeerFailed)) as info:
            comm.allgatherv(np.ones(1), [1, 1], displs=displs, algorithm="recursive_doubling",
                            timeout=20)
        return type(info.value).__name__

    got = collops.spawn(body, 2, timeout=60)
    # whoever sees the other's message first says why; the other may see it gone already
    assert "CollectiveMismatch" in got, got


def test_scatterv_counts_that_do_not_fit_the_envelope_follow_it():
    """On threads an envelope block has 128 bytes after its header: 17 ranks' counts do not
    fit it, so they follow in a broadcast of their own before the data."""
    def body(comm):
        p, r = comm.size, comm.rank
        counts = [20 + j for j in range(p)]  # 160+ bytes each: not inline either
        data = np.arange(sum(counts), dtype=np.float64)
        at_root = r == 3
        got = comm.scatterv(data if at_root else None, counts if at_root else None, 3)
        start = sum(counts[:r])
        return bool(np.array_equal(got, data[start: start + counts[r]]))

    assert all(collops.spawn(body, 17, timeout=60))
