"""alltoallv through the direct slots (`collops.shm.direct_alltoallv`) against numpy, on
threads and on ``shm`` (compiled and ``COLLOPS_COMPILED=0``), 2 to 4 ranks: zero counts,
send and receive displacements with gaps, counts given and exchanged, blocks too large for a
slot (read out of the writer's memory, or sent as messages, by the writer that overflows,
alone or among writers that fit), and
ranks whose counts disagree (`CollectiveMismatch` on both ranks of the pair, no hang)."""

from __future__ import annotations

import numpy as np
import pytest

import collops

pytestmark = pytest.mark.timeout(240)

REPEATS = 3  # the first call prepares, the second binds, the third runs bound


def _matrix(p: int, seed: int, big: int = 0) -> np.ndarray:
    """rows[i, j]: rows rank i sends to rank j (zeros among them; ``big`` rows from rank 0
    to every other rank when given: more than a slot holds)."""
    rows = np.random.default_rng(seed).integers(0, 4, (p, p))
    rows[0, p - 1] = 0
    if big:
        rows[0, 1:] = big
    return rows


def _send(rank: int, total: int) -> np.ndarray:
    return (np.arange(2 * total, dtype=np.float64) + 10000.0 * rank).reshape(total, 2)


def _case(p: int, r: int, rows: np.ndarray, gaps: bool):
    """(x, sendcounts, sdispls, recvcounts, rdispls, want) of rank ``r``: with ``gaps``,
    blocks a row apart in x (in reverse order) and two rows apart in the result."""
    def sdispls(i: int) -> list[int]:
        at, out = 0, [0] * p
        for j in reversed(range(p)) if gaps else range(p):
            out[j] = at
            at += int(rows[i, j]) + (1 if gaps else 0)
        return out

    def total(i: int) -> int:
        return sum(int(c) for c in rows[i]) + (p if gaps else 0)

    rcounts = [int(rows[j, r]) for j in range(p)]
    rdispls = [sum(rcounts[:j]) + 2 * j for j in range(p)] if gaps else None
    span = max((d + c for d, c in zip(rdispls, rcounts, strict=True) if c), default=0) \
        if rdispls else sum(rcounts)  # blocks of no rows take no room
    want = np.zeros((span, 2))
    for j in range(p):
        block = _send(j, total(j))[sdispls(j)[r]: sdispls(j)[r] + rcounts[j]]
        at = rdispls[j] if rdispls else sum(rcounts[:j])
        want[at: at + rcounts[j]] = block
    return (_send(r, total(r)), [int(c) for c in rows[r]], sdispls(r) if gaps else None,
            rcounts, rdispls, want)


def _body(seed: int, big: int = 0):
    def body(comm):
        p, r = comm.size, comm.rank
        algorithms = set()
        for gaps in (False, True):
            x, sc, sd, rc, rd, want = _case(p, r, _matrix(p, seed, big), gaps)
            for given in (True, False):
                for k in range(REPEATS):
                    got = comm.alltoallv(x, sc, sd, rc if given else None, rdispls=rd)
                    assert got.shape == want.shape and np.array_equal(got, want), (
                        gaps, given, k)
                    algorithms.add(comm.last_algorithm)
        return algorithms
    return body


@pytest.mark.parametrize("compiled", ["1", "0"])
@pytest.mark.parametrize("p", [2, 3, 4])
def test_alltoallv_on_shm_matches_numpy(p, compiled, monkeypatch):
    monkeypatch.setenv("COLLOPS_COMPILED", compiled)
    for seed in (1, 2):
        chosen = collops.spawn(_body(seed), p, transport="shm", timeout=200)
        assert all(a == {"shm_direct"} for a in chosen), chosen


@pytest.mark.parametrize("single_copy", ["1", "0"])
@pytest.mark.parametrize("compiled", ["1", "0"])
@pytest.mark.parametrize("p", [2, 3])
def test_blocks_that_do_not_fit_a_slot_go_around_it(p, compiled, single_copy, monkeypatch):
    """Rank 0's blocks exceed its slot (64 KiB), the others' fit: every rank still takes
    ``shm_direct`` and gets numpy's result, its readers copying rank 0's blocks out of its
    memory (single copy) or receiving them as messages (``COLLOPS_SHM_SINGLE_COPY=0``)."""
    monkeypatch.setenv("COLLOPS_COMPILED", compiled)
    monkeypatch.setenv("COLLOPS_SHM_SINGLE_COPY", single_copy)
    chosen = collops.spawn(_body(3, big=5000), p, transport="shm", timeout=200)
    assert all(a == {"shm_direct"} for a in chosen), chosen


@pytest.mark.parametrize("p", [2, 4])
def test_alltoallv_on_threads_matches_numpy(p):
    collops.spawn(_body(4), p, transport="inproc", timeout=200)


def _disagreeing(comm):
    """Rank 1 expects one row fewer from rank 0 than rank 0 sends it."""
    p, r = comm.size, comm.rank
    sc = [2] * p
    rc = [2] * p
    for _ in range(REPEATS):  # prepared, bound, run bound: the mismatch meets every route
        comm.alltoallv(np.ones((2 * p, 1)), sc, None, rc, timeout=30)
    if r == 1:
        rc = [1] + [2] * (p - 1)
    try:
        comm.alltoallv(np.ones((2 * p, 1)), sc, None, rc, timeout=30)
    except collops.CollectiveMismatch as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("compiled", ["1", "0"])
@pytest.mark.parametrize("p", [2, 3])
def test_counts_that_disagree_are_a_mismatch_on_both_ranks(p, compiled, monkeypatch):
    monkeypatch.setenv("COLLOPS_COMPILED", compiled)
    said = collops.spawn(_disagreeing, p, transport="shm", timeout=100)
    assert said[0] is not None and said[1] is not None, said
    assert "rank 0 sends 2 elements to rank 1, which expects 1" in said[0], said
    assert "rank 0 sends 2 elements to rank 1, which expects 1" in said[1], said
    assert all(s is None for s in said[2:]), said  # a third rank cannot tell


def test_overlapping_receive_regions_are_an_argument_error():
    def body(comm):
        p = comm.size
        with pytest.raises(collops.ArgumentError, match="rdispls"):
            comm.alltoallv(np.ones(p), [1] * p, None, [1] * p, rdispls=[0] * p)
        return True

    assert collops.spawn(body, 2, transport="shm", timeout=60) == [True, True]


@pytest.mark.parametrize("reader_compiled", ["1", "0"])
def test_a_header_placing_a_block_outside_the_slot_is_a_mismatch(reader_compiled,
                                                                  monkeypatch):
    """Rank 0's header (corrupted here) puts its block for rank 1 past the end of its slot:
    rank 1 raises instead of reading past it, compiled or not."""
    monkeypatch.setenv("COLLOPS_COMPILED", reader_compiled)

    def body(comm):
        import os

        from collops import config
        from collops.shm import direct_alltoallv

        x = np.ones((2 * 3, 1))
        if comm.rank == 0:
            os.environ["COLLOPS_COMPILED"] = "0"
            config.reload_settings()
            write = direct_alltoallv.AlltoallvExecution._write

            def corrupt(self):  # type: ignore[no-untyped-def]
                write(self)
                slot = self.area.slots[self.area.index][self.slot]
                words = slot[: self.layout.head.nbytes].view("<u8")
                words[1 + 2 * comm.size + 1] = self.area.capacity - 8

            direct_alltoallv.AlltoallvExecution._write = corrupt
        try:
            comm.alltoallv(x, [3, 3], None, [3, 3], timeout=30)
        except collops.CollectiveMismatch as exc:
            return str(exc)
        return None

    said = collops.spawn(body, 2, transport="shm", timeout=100)
    assert said[0] is None and "outside its slot" in said[1], said
