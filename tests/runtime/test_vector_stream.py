"""Large v-forms stream through the rings (``shm_stream``) like their regular forms: blocks
too large for a direct slot, several chunks each, with gaps between the received blocks,
zero counts, counts at the root only (scatterv) and the root's overlapping blocks; compiled
and ``COLLOPS_COMPILED=0`` (the same protocol in Python), against numpy. A gatherv's
lengths go through the direct slots' headers first (`collops.shm.direct_gatherv`: its counts
need not be every rank's), its blocks through the rings next: every call, bound or not, is
named by its data phase (``shm_stream``)."""

from __future__ import annotations

import numpy as np
import pytest

import collops

pytestmark = pytest.mark.timeout(180)

REPEATS = 3  # the first call prepares, the others take the fast path
WIDTH = 3  # float64 elements per row: 24 bytes


def _rows(p: int) -> list[int]:
    """Rows per rank: one zero, the others beyond a 64 KiB slot, one beyond a 128 KiB chunk."""
    return [[3000, 0, 7000, 2900][j % 4] for j in range(p)]


def _block(j: int, rows: int) -> np.ndarray:
    return (np.arange(rows * WIDTH, dtype=np.float64) + 1e6 * j).reshape(rows, WIDTH)


def _placed(counts: list[int], displs: list[int], blocks: list[np.ndarray]) -> np.ndarray:
    """numpy's result of blocks at their displacements, zeros between them (as long as the
    blocks that hold rows reach)."""
    whole = np.zeros((max(d + c for d, c in zip(displs, counts, strict=True) if c), WIDTH))
    for d, c, b in zip(displs, counts, blocks, strict=True):
        whole[d: d + c] = b
    return whole


@pytest.mark.parametrize("compiled", ["1", "0"])
def test_large_v_forms_stream_and_match_numpy(monkeypatch, compiled):
    monkeypatch.setenv("COLLOPS_COMPILED", compiled)

    def body(comm):
        p, r = comm.size, comm.rank
        counts = _rows(p)
        gaps = [sum(counts[:j]) + 5 * j + 2 for j in range(p)]
        blocks = [_block(j, counts[j]) for j in range(p)]
        took = set()
        for _ in range(REPEATS):
            got = comm.allgatherv(blocks[r], counts, displs=gaps)
            assert np.array_equal(got, _placed(counts, gaps, blocks))
            took.add(("allgatherv", comm.last_algorithm))
            root = p - 1
            got = comm.gatherv(blocks[r], root, counts, displs=gaps if r == root else None)
            if r == root:
                assert np.array_equal(got, _placed(counts, gaps, blocks))
            else:
                assert got is None
            took.add(("gatherv", comm.last_algorithm))
            for displs in (None, gaps[::-1], [0] * p):  # back to back, reordered, overlapping
                at = displs or [sum(counts[:j]) for j in range(p)]
                source = _block(9, sum(counts) if displs is None else 2 * sum(counts) + 10 * p)
                mine = r == 0
                got = comm.scatterv(source if mine else None, counts if mine else None, 0,
                                    displs=displs if mine else None)
                assert np.array_equal(got, source[at[r]: at[r] + counts[r]]), displs
                took.add(("scatterv", comm.last_algorithm))
        return sorted(took)

    for p in (2, 3):
        took = collops.spawn(body, p, transport="shm", timeout=150)
        for per_rank in took:
            assert per_rank == [("allgatherv", "shm_stream"), ("gatherv", "shm_stream"),
                                ("scatterv", "shm_stream")], (
                p, per_rank)


def test_small_v_forms_stream_when_asked():
    """``algorithm="shm_stream"`` on blocks of a few bytes, one of them empty."""
    def body(comm):
        p, r = comm.size, comm.rank
        counts = [j % 2 + (j == 0) for j in range(p)]
        blocks = [_block(j, counts[j]) for j in range(p)]
        displs = [3 * j for j in range(p)]
        for _ in range(REPEATS):
            got = comm.allgatherv(blocks[r], counts, displs=displs, algorithm="shm_stream")
            assert np.array_equal(got, _placed(counts, displs, blocks))
            got = comm.gatherv(blocks[r], 0, counts, algorithm="shm_stream")
            if r == 0:
                assert np.array_equal(got, np.concatenate(blocks))
        return comm.last_algorithm

    assert collops.spawn(body, 3, transport="shm", timeout=100) == ["shm_stream"] * 3
