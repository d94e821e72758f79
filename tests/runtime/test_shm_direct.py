"""``shm_direct``: what is particular to the direct slots, on real processes.

Its results against numpy (blocking, prepared, bound, in place, and every call in flight twice
over so that slots are reused) are the registry contract's (`tests/contract`); here: when
selection takes it, refusals, mismatches, late and dead peers, sub-communicators, ``out=``,
shapes, sleeping waiters and multi-phase requests completed in any order.
"""

from __future__ import annotations

import numpy as np
import pytest

import collops
from collops.errors import CollectiveMismatch, CollectiveTimeout
from collops.shm import direct as shm_direct
from tests.support.failures import assert_survivors_name_the_dead, outcome, record_peer_failed

NAME = shm_direct.NAME


def _default_choice(comm):
    x = np.arange(4.0)
    comm.allreduce(x)
    small = comm.last_algorithm
    comm.allreduce(np.arange(100_000.0))
    return small, comm.last_algorithm


@pytest.mark.timeout(60)
def test_selected_for_small_calls_only():
    small, large = collops.spawn(_default_choice, 2, transport="shm", timeout=50)[0]
    assert small == NAME
    assert large != NAME


def _too_large(comm):
    try:
        comm.allreduce(np.zeros(10_000), algorithm=NAME)
    except collops.CollopsError as exc:
        return type(exc).__name__, str(exc)
    return None


@pytest.mark.timeout(60)
def test_a_call_that_does_not_fit_is_refused_with_the_reason():
    name, text = collops.spawn(_too_large, 2, transport="shm", timeout=50)[0]
    assert name == "AlgorithmIneligible"
    assert "slot" in text


def _mismatch(comm):
    x = np.arange(4.0)
    return outcome(lambda: comm.allreduce(x) if comm.rank == 0 else comm.bcast(x),
                   CollectiveMismatch)


@pytest.mark.timeout(60)
def test_mismatched_direct_calls_raise_saying_what_each_called():
    texts = collops.spawn(_mismatch, 2, transport="shm", timeout=50)
    assert any("allreduce" in t and "bcast" in t for t in texts), texts
    assert "no error" not in texts


def _crossed(comm):
    """Rank 0 makes a direct allreduce; rank 1 the same call with messages (bigger count)."""
    x = np.arange(4.0) if comm.rank == 0 else np.arange(100_000.0)
    return outcome(lambda: comm.allreduce(x), CollectiveMismatch)


@pytest.mark.timeout(60)
def test_a_direct_call_against_a_message_call_is_a_mismatch_not_a_hang():
    texts = collops.spawn(_crossed, 2, transport="shm", timeout=50)
    assert "no error" not in texts
    assert any("allreduce" in t and "shm_direct" in t for t in texts), texts


def _late(comm):
    if comm.rank == 1:
        import time
        time.sleep(1.5)
        return "slept"
    return outcome(lambda: comm.allreduce(np.arange(4.0), timeout=0.5), CollectiveTimeout)


@pytest.mark.timeout(60)
def test_a_late_rank_times_the_call_out_naming_it():
    text = collops.spawn(_late, 2, transport="shm", timeout=50)[0]
    assert "allreduce[shm_direct]" in text and "[1]" in text, text


def _dies(comm, folder):
    import os
    if comm.rank == 1:
        os._exit(3)
    record_peer_failed(folder, comm.rank, lambda: comm.allreduce(np.arange(4.0)))


@pytest.mark.timeout(60)
def test_a_dead_peer_is_named_by_peer_failed_within_2_s(tmp_path):
    assert_survivors_name_the_dead(_dies, tmp_path)


def _split_and_many_contexts(comm):
    sub = comm.split(comm.rank % 2)
    got = [sub.allreduce(np.array([comm.rank + 1.0]))[0], sub.last_algorithm]
    dups = [comm.dup() for _ in range(40)]  # beyond the direct areas: schedules take over
    got.append(dups[-1].allreduce(np.array([1.0]))[0])
    got.append(dups[-1].last_algorithm)
    return got


@pytest.mark.timeout(60)
def test_sub_communicators_have_their_own_area_until_areas_run_out():
    results = collops.spawn(_split_and_many_contexts, 4, transport="shm", timeout=50)
    for rank, (value, alg, ones, last) in enumerate(results):
        assert value == sum(r + 1.0 for r in range(4) if r % 2 == rank % 2)
        assert alg == NAME
        assert ones == 4.0
        assert last != NAME


def _bcast_into_out(comm):
    got = []
    for i in range(4):
        out = np.empty((2, 3))
        x = np.arange(6.0).reshape(2, 3) + i if comm.rank == 1 else None
        r = comm.bcast(x, 1, out=out)
        got.append((r is out or np.shares_memory(r, out), r.tolist(), comm.last_algorithm))
    return got


@pytest.mark.timeout(60)
def test_a_small_bcast_into_out_fills_it_on_every_rank():
    for per_rank in collops.spawn(_bcast_into_out, 3, transport="shm", timeout=50):
        for i, (same, values, alg) in enumerate(per_rank):
            assert same
            assert values == (np.arange(6.0).reshape(2, 3) + i).tolist()
            assert alg == NAME


def _two_dimensional(comm):
    p, r = comm.size, comm.rank
    got = []
    for it in range(3):  # the general path first, then the prepared fast path
        x = np.arange(p * 2 * 3, dtype=np.float64).reshape(p * 2, 3) * (r + 1) + it
        got.append({"allreduce": comm.allreduce(x), "scan": comm.scan(x),
                    "reduce_scatter_block": comm.reduce_scatter_block(x),
                    "allgather": comm.allgather(x), "alltoall": comm.alltoall(x),
                    "algorithm": comm.last_algorithm})
    return got


@pytest.mark.timeout(60)
def test_arrays_of_several_dimensions_keep_their_shape_and_values():
    p = 3
    per_rank = collops.spawn(_two_dimensional, p, transport="shm", timeout=50)
    for it in range(3):
        xs = [np.arange(p * 2 * 3, dtype=np.float64).reshape(p * 2, 3) * (q + 1) + it
              for q in range(p)]
        for r in range(p):
            got = per_rank[r][it]
            assert got["algorithm"] == NAME
            np.testing.assert_array_equal(got["allreduce"], sum(xs))
            np.testing.assert_array_equal(got["scan"], sum(xs[: r + 1]))
            np.testing.assert_array_equal(got["reduce_scatter_block"], sum(xs)[2 * r: 2 * r + 2])
            np.testing.assert_array_equal(got["allgather"], np.concatenate(xs))
            np.testing.assert_array_equal(got["alltoall"],
                                          np.concatenate([x[2 * r: 2 * r + 2] for x in xs]))


def _blocked_in_barrier(comm):
    comm.barrier()
    comm.barrier()  # the fast path is prepared
    if comm.rank == 1:
        import time
        time.sleep(1.0)
        comm.barrier()
        return 0.0
    import time
    before = time.process_time()
    comm.barrier()
    return time.process_time() - before


@pytest.mark.timeout(60)
def test_a_rank_blocked_in_a_direct_barrier_sleeps_instead_of_spinning():
    cpu_seconds = collops.spawn(_blocked_in_barrier, 2, transport="shm", timeout=50)[0]
    assert cpu_seconds < 0.25  # busy-polling for the second would burn about 1 s of CPU


def _reverse_order(comm, algorithm, k):
    """``k`` two-phase calls (scatter: shapes first, then data) completed last first."""
    x = np.arange(8.0 * comm.size).reshape(comm.size * 2, 4) if comm.rank == 0 else None
    big = np.arange(40_000.0 * comm.size) if comm.rank == 0 else None
    reqs = []
    for i in range(k):
        reqs.append(comm.iscatter(None if x is None else x + i, 0, algorithm=algorithm,
                                  timeout=20))
        reqs.append(comm.ibcast(None if big is None else big[:1000] * i, 0,
                                algorithm=algorithm, timeout=20))
    got = [r.wait() for r in reversed(reqs)][::-1]
    return [g.tolist() for g in got]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("algorithm", [NAME, "shm_cma", "linear"])
@pytest.mark.parametrize("p", [2, 3])
def test_multi_phase_requests_complete_in_any_order(algorithm, p):
    """A rank waiting on its last request first must not hold back its peers' phases."""
    k = 3
    per_rank = collops.spawn(_reverse_order, p, algorithm, k, transport="shm", timeout=100)
    x = np.arange(8.0 * p).reshape(p * 2, 4)
    big = np.arange(40_000.0 * p)
    for r, got in enumerate(per_rank):
        for i in range(k):
            assert got[2 * i] == (x + i)[2 * r: 2 * r + 2].tolist()
            assert got[2 * i + 1] == (big[:1000] * i).tolist()


def _root_returns_while_its_reader_copies(comm, folder):
    """Rank 1's copy of the root's slot waits until rank 0 has returned from the bcast (a
    file rank 0 writes then): the root must not wait for its readers' copies."""
    import os
    import time
    returned = os.path.join(folder, "root returned")
    if comm.rank == 1:
        make_reader = shm_direct._reader_for

        def slow_reader_for(area, spec, rank):
            read = make_reader(area, spec, rank)

            def read_after_the_root_returned(slot, send, recv):
                deadline = time.monotonic() + 20
                while not os.path.exists(returned) and time.monotonic() < deadline:
                    time.sleep(0.005)
                read(slot, send, recv)
            return read_after_the_root_returned

        shm_direct._reader_for = slow_reader_for
    x = np.arange(16.0) if comm.rank == 0 else None
    got = comm.bcast(x, 0, algorithm="shm_direct", timeout=10)
    if comm.rank == 0:
        open(returned, "w").close()
    comm.barrier(timeout=30)
    return got.tolist()


@pytest.mark.timeout(90)
def test_a_bcast_root_waits_for_its_readers_arrival_not_their_copies(tmp_path):
    from tests.support.runners import compiled_runners
    with compiled_runners(False):  # the Python protocol, whose reader the test slows
        got = collops.spawn(_root_returns_while_its_reader_copies, 2, str(tmp_path),
                            transport="shm", timeout=60)
    assert got == [list(np.arange(16.0))] * 2
