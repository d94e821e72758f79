"""Ranks as threads behave like processes: a rank whose function returns or raises fails the
calls of its peers that still need it, with `PeerFailed` naming it, instead of leaving them
waiting; `spawn(timeout=)` names the ranks not heard from and stops every thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import collops
from collops import CollectiveTimeout, PeerFailed, RankFailed

pytestmark = pytest.mark.timeout(60)


def seen(call: Callable[[], Any]) -> dict[str, Any]:
    """What ``call`` raised: the failed rank, the message and how long it took."""
    start = time.monotonic()
    try:
        call()
    except PeerFailed as exc:
        return {"failed": exc.failed_rank, "text": str(exc),
                "seconds": time.monotonic() - start}
    return {"failed": None}


def survivors(fn: Callable[..., Any], nprocs: int, *args: Any) -> list[Any]:
    """Run ``fn`` on ``nprocs`` threads with a spawn timeout (a hang fails the test)."""
    return collops.spawn(fn, nprocs, *args, timeout=20)


def assert_names(record: dict[str, Any], rank: int, words: str) -> None:
    assert record["failed"] == rank, record
    assert words in record["text"] and record["seconds"] < 2.0, record


def test_a_rank_that_returns_early_fails_the_collective_of_the_others():
    def body(comm):
        if comm.rank == 1:
            return None
        return seen(lambda: comm.allreduce(np.ones(3)))
    got = survivors(body, 3)
    for rank in (0, 2):
        assert_names(got[rank], 1, "exited while an operation with it was pending")


def test_a_rank_that_raises_fails_the_collectives_of_the_others_with_its_error():
    failed: dict[int, dict[str, Any]] = {}

    def body(comm):
        if comm.rank == 1:
            raise KeyError("lost key")
        failed[comm.rank] = seen(lambda: comm.bcast(np.arange(4), root=1))
    with pytest.raises(RankFailed) as info:
        collops.spawn(body, 3, timeout=20)
    assert info.value.rank == 1 and info.value.exc_type == "KeyError"
    for rank in (0, 2):
        assert_names(failed[rank], 1, "it raised KeyError: 'lost key'; the job cannot continue")


@pytest.mark.parametrize("root", [0, 1])
def test_a_rank_that_skips_the_last_collective(root):
    """Everyone runs an allreduce; rank 1 then returns instead of calling bcast: the others'
    bcast fails whether rank 1 was its root (nothing comes) or a receiver (nobody takes)."""
    def body(comm):
        total = comm.allreduce(np.full(2, comm.rank + 1.0))
        if comm.rank == 1:
            return total
        return seen(lambda: comm.bcast(np.arange(5), root=root)), total
    got = survivors(body, 3)
    np.testing.assert_array_equal(got[1], np.full(2, 6.0))
    for rank in (0, 2):
        record, total = got[rank]
        np.testing.assert_array_equal(total, got[1])
        assert_names(record, 1, "exited")


def test_a_point_to_point_receive_from_a_rank_that_returned():
    """A transport receive that rank 1 never answers completes with `PeerFailed` as its error
    once rank 1 has returned, while a message it sent before returning is still received."""
    def body(comm):
        transport = comm.transport
        if comm.rank == 1:
            transport.isend(0, 7, memoryview(b"sent before returning"))
            return None
        early = bytearray(21)
        first = transport.irecv(1, 7, memoryview(early))
        never = transport.irecv(1, 8, memoryview(bytearray(4)))
        deadline = time.monotonic() + 10
        while not (first.done and never.done) and time.monotonic() < deadline:
            transport.wait_for_activity(0.5)
        return bytes(early), first.error, never.done, never.error
    got = survivors(body, 2)
    data, first_error, never_done, never_error = got[0]
    assert data == b"sent before returning" and first_error is None
    assert never_done and isinstance(never_error, PeerFailed) and never_error.failed_rank == 1


def test_a_send_to_a_rank_that_returned_fails():
    def body(comm):
        comm.barrier()
        if comm.rank == 1:
            return None
        other = [t for t in threading.enumerate() if t.name == "collops-rank-1"]
        for t in other:
            t.join(10)  # rank 1's thread has ended
        h = comm.transport.isend(1, 9, memoryview(b"nobody takes this"))
        return any(t.is_alive() for t in other), h.done, h.error
    alive, done, error = survivors(body, 2)[0]
    assert not alive and done
    assert isinstance(error, PeerFailed) and error.failed_rank == 1


def test_a_nonblocking_request_pending_when_its_peer_returns():
    started = threading.Event()

    def body(comm):
        if comm.rank == 1:
            started.wait(10)
            return None
        request = comm.iallreduce(np.ones(4))
        started.set()
        return seen(request.wait)
    assert_names(survivors(body, 2)[0], 1, "exited")


def test_the_survivors_communicator_raises_on_every_later_call():
    """Rank 2 returns: calls of the world communicator fail one after the other, while the
    survivors' own communicator (made before) keeps working."""
    def body(comm):
        pair = comm.split(0 if comm.rank < 2 else 1)
        if comm.rank == 2:
            return None
        first = seen(lambda: comm.bcast(np.ones(2), root=0))
        second = seen(lambda: comm.gather(np.ones(2), root=1))
        assert pair is not None
        return first, second, pair.allreduce(np.arange(3) * (comm.rank + 1))
    got = survivors(body, 3)
    for rank in (0, 1):
        first, second, summed = got[rank]
        assert_names(first, 2, "exited")
        assert_names(second, 2, "exited")
        np.testing.assert_array_equal(summed, np.arange(3) * 3)


def poll_until_done(request: Any) -> None:
    while not request.test():
        time.sleep(0.001)


@pytest.mark.parametrize("blocking", [True, False])
def test_a_survivor_that_gives_a_call_up_does_not_leave_the_others_waiting(blocking):
    """In a 3-rank allreduce that rank 2 left, a survivor may wait only for the other one,
    which gave the call up on seeing rank 2 gone and went on to other calls: the first one's
    call fails too, naming rank 2, instead of waiting for messages that will never come."""
    def body(comm):
        pair = comm.split(0 if comm.rank < 2 else 1)
        if comm.rank == 2:
            return None
        if blocking:
            record = seen(lambda: comm.allreduce(np.ones(2)))
        else:  # starting may fail already, else testing does
            record = seen(lambda: poll_until_done(comm.iallreduce(np.ones(2))))
        assert pair is not None
        return record, pair.allreduce(np.arange(3) * (comm.rank + 1))
    got = survivors(body, 3)
    for rank in (0, 1):
        record, summed = got[rank]
        assert_names(record, 2, "exited")
        np.testing.assert_array_equal(summed, np.arange(3) * 3)


def rank_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("collops-rank-")]


def test_spawn_timeout_names_the_rank_that_never_called_and_stops_the_others():
    release = threading.Event()

    def body(comm):
        if comm.rank == 1:
            release.wait(30)  # user code outside collops: never calls the allreduce
            return None
        return comm.allreduce(np.ones(2))
    try:
        with pytest.raises(CollectiveTimeout) as info:
            collops.spawn(body, 3, timeout=1)
        text = str(info.value)
        assert "not heard from: ranks [1]" in text, text
        assert "rank 0 in Comm.allreduce, waiting for ranks [1]" in text, text
        assert "rank 1 outside collops, in test_spawn_timeout" in text, text
        assert "ranks [1] could not be stopped" in text, text
        assert [t.name for t in rank_threads()] == ["collops-rank-1"]  # 0 and 2 were stopped
    finally:
        release.set()
    for t in rank_threads():
        t.join(10)
    assert rank_threads() == []


def test_spawn_timeout_stops_ranks_deadlocked_inside_collops():
    """Two ranks wait for each other in calls on different communicators: spawn names both,
    and no thread of the job is left when it returns."""
    ended: dict[int, str] = {}

    def body(comm):
        first, second = comm.dup(), comm.dup()
        order = (first, second) if comm.rank == 0 else (second, first)
        try:
            for c in order:
                c.allreduce(np.ones(2))
        except CollectiveTimeout as exc:
            ended[comm.rank] = str(exc)
            raise
    with pytest.raises(CollectiveTimeout) as info:
        collops.spawn(body, 2, timeout=1)
    text = str(info.value)
    assert "not heard from: ranks [0, 1]" in text and "every running rank was stopped" in text
    assert "rank 0 in Comm.allreduce" in text and "rank 1 in Comm.allreduce" in text, text
    assert rank_threads() == []
    assert sorted(ended) == [0, 1] and all("stopped the job" in t for t in ended.values())


def test_a_rank_that_died_of_a_follow_on_error_is_reported_as_its_cause():
    from collops.transport.inproc import Fabric

    fabric = Fabric(3)
    fabric.mark_failed(2, "it raised ValueError: boom")
    fabric.mark_failed(1, "it raised PeerFailed: rank 2 died", cause=2)
    error = fabric.endpoint(0)._peer_failed(1)
    assert error.failed_rank == 2
    assert "ValueError: boom" in str(error) and "rank 1 ended after it" in str(error)
