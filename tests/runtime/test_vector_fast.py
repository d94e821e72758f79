"""The v-collectives with their counts given take the blocking fast path like their regular
forms: repeated calls of one signature are bound to a compiled runner (on ``shm``), their
results match numpy whichever route a call took, a change of counts, displacements or root
between calls is a new signature, and ranks whose counts differ meet a `CollectiveMismatch`
instead of wrong data."""

from __future__ import annotations

import numpy as np
import pytest

import collops

pytestmark = pytest.mark.timeout(120)

REPEATS = 4  # the first call prepares, the second binds, the rest run bound


def _block(rank: int, rows: int) -> np.ndarray:
    return (np.arange(3 * rows, dtype=np.float64) + 1000 * rank).reshape(rows, 3)


def _calls(comm):
    """(name, call, numpy's answer on this rank) for several v-signatures."""
    p, r = comm.size, comm.rank
    out = []
    for counts in ([1] * p, [(j + 2) % 3 for j in range(p)]):
        x = _block(r, counts[r])
        whole = np.concatenate([_block(j, counts[j]) for j in range(p)])
        out.append(("allgatherv", lambda x=x, c=counts: comm.allgatherv(x, c), whole))
        root = p - 1
        out.append(("gatherv", lambda x=x, c=counts, root=root: comm.gatherv(x, root, c),
                    whole if r == root else None))
        # a displacement order that leaves no gap: blocks in reverse rank order
        displs = [sum(counts[j + 1:]) for j in range(p)]
        flipped = np.concatenate([_block(j, counts[j]) for j in reversed(range(p))])
        out.append(("allgatherv", lambda x=x, c=counts, d=displs: comm.allgatherv(
            x, c, displs=d), flipped))
        vector = np.arange(3 * sum(counts), dtype=np.float64).reshape(-1, 3) * (r + 1)
        total = np.arange(3 * sum(counts), dtype=np.float64).reshape(-1, 3) * sum(
            range(1, p + 1))
        start = sum(counts[:r])
        out.append(("reduce_scatter", lambda v=vector, c=counts: comm.reduce_scatter(
            v, "sum", c), total[start: start + counts[r]]))
        for displs in (None, [2 * j for j in range(p)]):  # back to back; overlapping
            at = displs or [sum(counts[:j]) for j in range(p)]
            source = _block(7, sum(counts) + (2 if displs else 0))
            out.append(("scatterv", lambda s=source, c=counts, d=displs: comm.scatterv(
                s if r == 0 else None, c if r == 0 else None, 0,
                displs=d if r == 0 else None), source[at[r]: at[r] + counts[r]]))
        big = _block(8, 600 * p)  # rows beyond the envelope: counts and data follow it
        out.append(("scatterv", lambda b=big: comm.scatterv(
            b if r == 0 else None, [600] * p if r == 0 else None, 0),
            big[600 * r: 600 * (r + 1)]))
        sendcounts = [counts[(r + j) % p] for j in range(p)]
        recvcounts = [counts[(j + r) % p] for j in range(p)]
        send = _block(r, sum(sendcounts))
        pieces = []
        for j in range(p):
            before = sum(counts[(j + k) % p] for k in range(r))
            pieces.append(_block(j, sum(counts[(j + k) % p] for k in range(p)))[
                before: before + recvcounts[j]])
        out.append(("alltoallv", lambda s=send, sc=sendcounts, rc=recvcounts: comm.alltoallv(
            s, sc, None, rc), np.concatenate(pieces)))
    return out


@pytest.mark.usefixtures("compiled_on")  # a test of the compiled route
@pytest.mark.parametrize("transport", ["inproc", "shm"])
def test_repeated_v_calls_match_numpy_on_every_route(transport):
    def body(comm):
        for name, call, want in _calls(comm):
            for k in range(REPEATS):
                got = call()
                if want is None:
                    assert got is None, (name, k)
                else:
                    assert got.shape == want.shape and np.array_equal(got, want), (name, k)
        return comm.bound_calls()

    for p in (2, 3):
        bound = collops.spawn(body, p, transport=transport, timeout=100)
        if transport == "shm":  # a direct slot holds them: bound to the compiled runner
            for name in ("allgatherv", "gatherv", "reduce_scatter"):
                assert all(b.get(name) == "shm_direct" for b in bound), (name, bound)


def test_v_calls_whose_counts_differ_between_ranks_are_a_mismatch():
    def body(comm):
        counts = [1, 1] if comm.rank == 0 else [1, 2]
        for _ in range(3):  # the first call prepares, the second binds, the third runs bound
            comm.allgatherv(np.ones(1), [1, 1])
        with pytest.raises(collops.CollectiveMismatch):
            comm.allgatherv(np.ones(counts[comm.rank]), counts, timeout=20)
        return True

    assert collops.spawn(body, 2, transport="shm", timeout=60) == [True, True]


@pytest.mark.usefixtures("compiled_on")  # a test of the compiled route
@pytest.mark.parametrize("transport", ["inproc", "shm"])
def test_v_calls_with_gaps_between_blocks_take_the_fast_path(transport):
    """Received blocks with gaps between them: a result the call makes holds zeros there, a
    caller's ``out`` keeps what it held; on every route, and bound like blocks back to back."""
    def body(comm):
        p, r = comm.size, comm.rank
        counts = [j + 1 for j in range(p)]
        displs = [sum(counts[:j]) + 2 * j + 1 for j in range(p)]  # a gap before each block
        rows = displs[-1] + counts[-1]
        x = _block(r, counts[r])
        for filler in (None, -1.0):
            want = np.full((rows, 3), 0.0 if filler is None else filler)
            for j in range(p):
                want[displs[j]: displs[j] + counts[j]] = _block(j, counts[j])
            rwant = np.full((rows, 3), 0.0 if filler is None else filler)
            send = np.concatenate([_block(100 * r + j, counts[r]) for j in range(p)])
            for j in range(p):
                rwant[displs[j]: displs[j] + counts[j]] = _block(100 * j + r, counts[j])
            for k in range(REPEATS):
                out = None if filler is None else np.full((rows, 3), filler)
                got = comm.allgatherv(x, counts, displs=displs, out=out)
                assert np.array_equal(got, want), (filler, k)
                out = None if filler is None else np.full((rows, 3), filler)
                got = comm.alltoallv(send, [counts[r]] * p, None, counts, rdispls=displs,
                                     out=out)
                assert np.array_equal(got, rwant), (filler, k)
        return comm.bound_calls()

    bound = collops.spawn(body, 3, transport=transport, timeout=100)
    if transport == "shm":
        assert all(b.get("allgatherv") == "shm_direct" for b in bound), bound
