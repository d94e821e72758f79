"""``shm_cma``: what is particular to cross-memory reads, on real processes.

Its results against numpy for every case are the registry contract's (`tests/contract`);
here: large vectors folded through the scratch, a dead peer, what selection takes, and
multi-phase calls in flight queued with ``shm_direct`` calls for the same slots.
"""

from __future__ import annotations

import numpy as np
import pytest

import collops
from collops.shm import cma as shm_cma
from tests.support.failures import assert_survivors_name_the_dead, record_peer_failed
from tests.support.tuning import user_table

NAME = shm_cma.NAME


def _large(comm):
    """Calls beyond a direct slot: what selection takes, and the results."""
    n = 300_000
    x = np.arange(n, dtype=np.float64) * (comm.rank + 1)
    got = {}
    got["allreduce"] = (comm.allreduce(x, algorithm=NAME), comm.last_algorithm)
    got["reduce"] = (comm.reduce(x, "max", comm.size - 1, algorithm=NAME), None)
    got["allgather"] = (comm.allgather(x[:1000], algorithm=NAME), None)
    return got


@pytest.mark.timeout(60)
@pytest.mark.parametrize("p", [2, 4])
def test_large_vectors_fold_in_pieces_through_the_scratch(p):
    """A 2.4 MB vector is folded through the 1 MiB scratch in several pieces."""
    per_rank = collops.spawn(_large, p, transport="shm", timeout=50)
    n = 300_000
    xs = [np.arange(n, dtype=np.float64) * (r + 1) for r in range(p)]
    for r, got in enumerate(per_rank):
        assert got["allreduce"][1] == NAME
        assert np.array_equal(got["allreduce"][0], sum(xs))
        if r == p - 1:
            assert np.array_equal(got["reduce"][0], np.max(xs, axis=0))
        else:
            assert got["reduce"][0] is None
        assert np.array_equal(got["allgather"][0], np.concatenate([x[:1000] for x in xs]))


def _reduce_with_scratch(comm):
    """A 2.4 MB reduce through shm_cma, and the scratch bytes the call's table rule gives."""
    from collops.algorithms.spec import make_spec
    n = 300_000
    x = np.arange(n, dtype=np.float64) * (comm.rank + 1)
    got = comm.reduce(x, "sum", 0, algorithm=NAME)
    spec = make_spec("reduce", comm.size, np.dtype(np.float64), count=n, root=0,
                     op=collops.ops.SUM)
    return got, shm_cma.scratch_bytes(spec)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("scratch", [None, 4096, 65536 + 8])
def test_the_scratch_is_the_selection_tables_and_a_user_table_overrides_it(scratch, tmp_path):
    """``protocols.shm_cma.scratch_bytes``: the built-in 1 MiB, or a user's (any size, an
    odd one too: the pieces are whole items), reaches the fold, whose result stays numpy's."""
    rules = None if scratch is None else (
        f'[[protocols.shm_cma.scratch_bytes]]\nvalue = {scratch}\nsource = "mine"\n')
    with user_table(tmp_path / "tuning.toml", rules):
        per_rank = collops.spawn(_reduce_with_scratch, 2, transport="shm", timeout=50)
    n = 300_000
    expected = sum(np.arange(n, dtype=np.float64) * (r + 1) for r in range(2))
    assert np.array_equal(per_rank[0][0], expected) and per_rank[1][0] is None
    assert [used for _, used in per_rank] == [scratch or 1 << 20] * 2


def _dies_before_a_read(comm, folder):
    import os
    x = np.arange(50_000.0)
    comm.allreduce(x, algorithm=NAME)
    if comm.rank == 1:
        os._exit(3)
    record_peer_failed(folder, comm.rank, lambda: comm.allreduce(x, algorithm=NAME, timeout=10))


@pytest.mark.timeout(60)
def test_the_survivors_raise_peer_failed_naming_the_dead_rank_within_2_s(tmp_path):
    assert_survivors_name_the_dead(_dies_before_a_read, tmp_path)


def _chosen(comm):
    x = np.arange(1_000_000.0)  # 8 MB: beyond what shm_stream reduces unasked on 2 ranks
    comm.reduce(x, "sum", 0)
    reduce_alg = comm.last_algorithm
    comm.gather(x, 0)
    gather_alg = comm.last_algorithm
    comm.bcast(x, 0)  # 8 MB: beyond what shm_stream broadcasts unasked on 2 ranks
    return reduce_alg, gather_alg, comm.last_algorithm


@pytest.mark.timeout(60)
def test_selection_offers_it_unasked_only_where_it_measured_faster():
    reduce_alg, gather_alg, bcast_alg = collops.spawn(_chosen, 2, transport="shm",
                                                      timeout=50)[0]
    assert reduce_alg == NAME
    assert gather_alg == "shm_stream"  # measured faster at every size
    assert bcast_alg not in (NAME, "shm_stream")  # a schedule's single-copy messages


def _small_reduce(comm):
    comm.reduce(np.arange(100.0), "sum", 0)
    return comm.last_algorithm


@pytest.mark.timeout(60)
def test_calls_that_fit_a_direct_slot_stay_direct():
    assert collops.spawn(_small_reduce, 2, transport="shm", timeout=50)[0] == "shm_direct"


# -- multi-phase calls in flight with later calls queued for the same slots --------------------
class _Queued:
    def __init__(self, name):
        self.name = name


def test_writes_are_queued_in_call_number_order_not_arrival_order():
    from collections import deque

    from collops.shm.direct_area import DirectArea
    area = DirectArea.__new__(DirectArea)  # only its queue is used here
    area.unwritten = deque()
    # a later call's first phase arrives, then an earlier allreduce's second phase, then more
    for name, k in [("c", 17), ("d", 25), ("a2", 10), ("e", 33), ("b", 9)]:
        area.queue_write(_Queued(name), k)
    assert [q.name for q in area.unwritten] == ["b", "a2", "c", "d", "e"]
    assert [q.write_k for q in area.unwritten] == [9, 10, 17, 25, 33]


def _crowd(comm, rounds):
    """Two-phase shm_cma allreduces and ibcasts (envelope, then data) with small direct
    allreduces in between, all in flight at once, waited last-first: later calls queue for
    the slots the earlier calls' second phases need."""
    me, p = comm.rank, comm.size
    wrong = []
    for r in range(rounds):
        requests = []
        for i in range(5):
            big = np.arange(50_000.0) * (me + 1) + r + i
            requests.append(("big", i, comm.iallreduce(big, algorithm=NAME, timeout=20)))
            requests.append(("small", i, comm.iallreduce(np.full(3, float(me + i)),
                                                         algorithm="shm_direct", timeout=20)))
            requests.append(("bcast", i, comm.ibcast(np.arange(3000.0) + i if me == 0 else None,
                                                     0, timeout=20)))
        for kind, i, req in reversed(requests):
            got = req.wait()
            if kind == "big":
                want = np.arange(50_000.0) * sum(range(1, p + 1)) + p * (r + i)
            elif kind == "small":
                want = np.full(3, float(sum(range(p)) + p * i))
            else:
                want = np.arange(3000.0) + i
            if not np.array_equal(got, want):
                wrong.append((r, kind, i))
    return wrong


@pytest.mark.timeout(120)
@pytest.mark.parametrize("p", [2, 3])
def test_crowds_of_multi_phase_calls_in_flight_complete(p):
    # before writes were queued in call-number order this deadlocked now and then (the
    # allreduce's second phase queued behind later calls waiting for the slots it frees)
    assert collops.spawn(_crowd, p, 12, transport="shm", timeout=110) == [[]] * p
