"""Seed 000's alltoallv (random order, chunked round-robin, pruning), checked on the schedule.

The correctness of the data moved is the matrix test's job; here each mechanism is read off
the send steps a rank's schedule issues, in step order (the order its messages leave).
"""

from __future__ import annotations

import numpy as np
import pytest

from collops.algorithms import get_algorithm, make_spec
from collops.algorithms.allgather import as_alltoallv
from collops.schedule import Buffer, Schedule, StepKind

RANDOM_CHUNKED = get_algorithm("alltoallv", "random_chunked")
AS_ALLTOALLV = get_algorithm("allgatherv", "alltoallv")


def uneven_alltoallv(p: int, seed: int, most: int = 40) -> list:
    """Per-rank alltoallv specs with random counts, zeros included, default displacements."""
    matrix = np.random.default_rng(seed).integers(0, most + 1, (p, p))
    matrix[np.random.default_rng(seed + 1).random((p, p)) < 0.15] = 0
    return [make_spec("alltoallv", p, np.int16, sendcounts=matrix[r].tolist(),
                      recvcounts=matrix[:, r].tolist()) for r in range(p)]


def sends(schedule: Schedule) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Step ids, peers, source offsets and counts of the send steps, in step order."""
    idx = np.nonzero(schedule.kind == StepKind.SEND)[0]
    return idx, schedule.peer[idx], schedule.src_off[idx], schedule.count[idx]


def first_visits(schedule: Schedule) -> list[int]:
    """Peers in the order the schedule first sends to them."""
    _, peers, _, _ = sends(schedule)
    seen: list[int] = []
    for peer in peers.tolist():
        if peer not in seen:
            seen.append(peer)
    return seen


def build(rank: int, spec, seed: int = 0, chunk: int = 1024) -> Schedule:
    return RANDOM_CHUNKED.build(rank, spec, {"seed": seed, "chunk": chunk})


# -- random order ---------------------------------------------------------------------------
def test_destination_order_differs_between_ranks():
    p = 9
    spec = make_spec("alltoall", p, np.float64, count=3)
    orders = [first_visits(build(r, spec, seed=7)) for r in range(p)]
    for r, order in enumerate(orders):
        assert sorted(order) == [q for q in range(p) if q != r]
    for a in range(p):
        for b in range(a + 1, p):
            common = [q for q in orders[a] if q not in (a, b)]
            assert common != [q for q in orders[b] if q not in (a, b)], (a, b)
    assert len({order[0] for order in orders}) > 1, "every rank starts at the same rank"


def test_destination_order_differs_between_seeds_and_repeats_for_one():
    p = 12
    spec = make_spec("alltoall", p, np.float64, count=3)
    for rank in (0, 5, 11):
        by_seed = {seed: first_visits(build(rank, spec, seed=seed)) for seed in (0, 1, 2)}
        assert len({tuple(o) for o in by_seed.values()}) == 3
        again = build(rank, spec, seed=1)
        once = build(rank, spec, seed=1)
        for column in ("kind", "peer", "src_off", "dst_off", "count", "dep_from", "dep_to"):
            np.testing.assert_array_equal(getattr(again, column), getattr(once, column))


# -- chunks, cursors, pruning, round-robin --------------------------------------------------
@pytest.mark.parametrize("chunk", [1, 2, 6, 16, 33, 1024])
def test_no_send_exceeds_a_chunk_and_cursors_cover_each_segment(chunk):
    p = 7
    specs = uneven_alltoallv(p, seed=chunk)
    itemsize = specs[0].itemsize
    for rank, spec in enumerate(specs):
        _, peers, offsets, counts = sends(build(rank, spec, chunk=chunk))
        assert (counts * itemsize <= max(chunk, itemsize)).all()
        assert (counts > 0).all()
        for peer in range(p):
            mine = peers == peer
            if peer == rank or spec.sendcounts[peer] == 0:
                assert not mine.any()
                continue
            starts, lengths = offsets[mine], counts[mine]
            expected_starts = spec.sdispls[peer] + np.r_[0, np.cumsum(lengths)[:-1]]
            np.testing.assert_array_equal(starts, expected_starts)
            assert lengths.sum() == spec.sendcounts[peer]


@pytest.mark.parametrize("chunk", [2, 8, 20])
def test_finished_segments_are_pruned_and_the_rest_visited_round_robin(chunk):
    p = 7
    specs = uneven_alltoallv(p, seed=100 + chunk)
    for rank, spec in enumerate(specs):
        _, peers, _, counts = sends(build(rank, spec, seed=rank, chunk=chunk))
        peers = peers.tolist()
        sent = dict.fromkeys(peers, 0)
        for i, peer in enumerate(peers):
            sent[peer] += int(counts[i])
            if sent[peer] == spec.sendcounts[peer]:  # its last chunk: never visited again
                assert peer not in peers[i + 1:], f"rank {rank}: segment {peer} revisited"
        for i, peer in enumerate(peers):
            if peer not in peers[i + 1:]:
                continue
            j = peers.index(peer, i + 1)
            between = peers[i + 1: j]
            unfinished_after_i = set(peers[i + 1:]) - {peer}
            for other in unfinished_after_i:
                assert between.count(other) == 1, (rank, i, j, other)
            assert set(between) == unfinished_after_i


def test_sends_are_chained_in_issue_order_and_receives_posted_upfront():
    p = 6
    specs = uneven_alltoallv(p, seed=3)
    for rank, spec in enumerate(specs):
        schedule = build(rank, spec, chunk=10)
        idx, _, _, _ = sends(schedule)
        edges = set(zip(schedule.dep_from.tolist(), schedule.dep_to.tolist(), strict=True))
        for earlier, later in zip(idx[:-1].tolist(), idx[1:].tolist(), strict=True):
            assert (earlier, later) in edges
        receives = set(np.nonzero(schedule.kind == StepKind.RECV)[0].tolist())
        assert receives
        assert not receives & set(schedule.dep_to.tolist())


def test_own_segment_is_a_local_copy():
    p = 5
    spec = make_spec("alltoall", p, np.int32, count=9)
    for rank in range(p):
        schedule = build(rank, spec, chunk=8)
        copies = np.nonzero(schedule.kind == StepKind.COPY)[0]
        assert len(copies) == 1
        c = copies[0]
        assert schedule.src_buf[c] == Buffer.SEND and schedule.src_off[c] == 9 * rank
        assert schedule.dst_buf[c] == Buffer.RECV and schedule.dst_off[c] == 9 * rank
        assert rank not in sends(schedule)[1].tolist()


# -- allgather as alltoallv -----------------------------------------------------------------
@pytest.mark.parametrize("chunk", [3, 16, 1024])
def test_allgather_alltoallv_sends_only_the_callers_segment(chunk):
    p = 8
    counts = [5, 0, 17, 3, 9, 1, 0, 12]
    spec = make_spec("allgatherv", p, np.float32, counts=counts)
    for rank in range(p):
        params = {"seed": 4, "chunk": chunk}
        schedule = AS_ALLTOALLV.build(rank, spec, params)
        idx, peers, offsets, lengths = sends(schedule)
        assert (schedule.src_buf[idx] == Buffer.SEND).all()
        assert (offsets >= 0).all() and (offsets + lengths <= counts[rank]).all()
        for peer in range(p):
            mine = peers == peer
            assert lengths[mine].sum() == (counts[rank] if peer != rank else 0)
        equivalent = as_alltoallv(rank, spec)
        assert set(equivalent.sdispls) == {0}
        assert set(equivalent.sendcounts) == {counts[rank]}
        direct = RANDOM_CHUNKED.build(rank, equivalent, params)
        for column in ("kind", "peer", "src_buf", "src_off", "dst_off", "count"):
            np.testing.assert_array_equal(getattr(schedule, column), getattr(direct, column))
        own = (schedule.kind == StepKind.COPY) & (schedule.dst_buf == Buffer.RECV)
        assert int(schedule.count[own].sum()) == counts[rank]
