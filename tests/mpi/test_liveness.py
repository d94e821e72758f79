"""The pid checks behind the MPI transport's dead-rank detection (no MPI needed)."""

from __future__ import annotations

import array
import fcntl
import os
import subprocess
import sys
import termios
import threading
import time

import pytest

from collops.mpi.abort import wait_until_read
from collops.mpi.liveness import BlockingGuard, NodePeers, alive, unlink_mpich_segments


def _child() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])


@pytest.mark.timeout(30)
def test_a_killed_process_is_dead_even_before_it_is_reaped():
    child = _child()
    try:
        assert alive(child.pid) and alive(os.getpid())
        peers = NodePeers({3: os.getpid(), 5: child.pid})
        assert peers.first_dead() is None
        child.kill()
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # a zombie now, not reaped
        assert not alive(child.pid)
        assert peers.first_dead() == 5 and peers.first_dead([3]) is None
        assert peers.first_dead([5, 7]) == 5  # ranks of other nodes are not checked
    finally:
        child.kill()
        child.wait()
    assert not alive(child.pid)


@pytest.mark.timeout(30)
def test_the_guard_of_a_blocking_call_aborts_once_a_node_peer_dies():
    child = _child()
    aborted = threading.Event()
    said: list[str] = []

    def abort(message: str) -> None:
        said.append(message)
        aborted.set()

    try:
        with BlockingGuard(NodePeers({1: child.pid}), 0, "MPI_Comm_create_group",
                           abort, interval=0.01):
            assert not aborted.wait(0.1)
            child.kill()
            assert aborted.wait(10)
    finally:
        child.kill()
        child.wait()
    assert said == [f"collops: MPI rank 1 (pid {child.pid}) died while rank 0 was blocked in "
                    "MPI_Comm_create_group; aborting the job"]


@pytest.mark.timeout(30)
def test_an_aborted_job_waits_until_its_message_is_read():
    # MPI_Abort makes mpiexec kill every rank: what still sat in the stderr pipe was lost,
    # and the job ended with exit code 1 and no reason (seen in the fault campaign)
    read, write = os.pipe()
    taken: list[bytes] = []

    def reader() -> None:
        time.sleep(0.3)  # a slow launcher
        taken.append(os.read(read, 1 << 16))

    thread = threading.Thread(target=reader)
    thread.start()
    os.write(write, b"collops: rank 1 aborts the job\n")
    wait_until_read(write)
    unread = array.array("i", [0])
    fcntl.ioctl(write, termios.FIONREAD, unread)
    thread.join()
    os.close(read)
    os.close(write)
    assert unread[0] == 0  # it did not return while the message sat in the pipe
    assert taken == [b"collops: rank 1 aborts the job\n"]


def test_the_names_of_mpich_segments_this_process_maps_are_removed(tmp_path):
    # MPICH removes its segment's name only in MPI_Finalize: a SIGKILLed rank left it behind
    name = f"mpich_shm_collopstest_{os.getpid()}"
    other = f"collopstest_not_mpich_{os.getpid()}"
    for n in (name, other):
        with open(f"/dev/shm/{n}", "wb") as f:
            f.write(b"\0" * 4096)
    try:
        maps = tmp_path / "maps"
        maps.write_text(f"7f00-7f01 rw-s 00000000 00:1a 12 /dev/shm/{name}\n"
                        f"7f01-7f02 rw-s 00000000 00:1a 13 /dev/shm/{other}\n"
                        f"7f02-7f03 rw-s 00000000 00:1a 14 /dev/shm/mpich_shm_gone (deleted)\n")
        assert unlink_mpich_segments(str(maps)) == [name]
        assert not os.path.exists(f"/dev/shm/{name}") and os.path.exists(f"/dev/shm/{other}")
        assert unlink_mpich_segments(str(maps)) == []  # already gone: nothing to do
    finally:
        for n in (name, other):
            if os.path.exists(f"/dev/shm/{n}"):
                os.unlink(f"/dev/shm/{n}")


def test_a_finished_rank_and_the_cause_it_noted_are_seen_by_its_node_peers():
    # ranks 3, 5, 8 on one node share three words (a bytearray standing in for MPI's window)
    words = memoryview(bytearray(3 * 8)).cast("Q")
    index = {3: 0, 5: 1, 8: 2}
    seen_by_3 = NodePeers({5: os.getpid(), 8: os.getpid()}, words, index)
    rank_5 = NodePeers({3: os.getpid(), 8: os.getpid()}, words, index)
    rank_8 = NodePeers({3: os.getpid(), 5: os.getpid()}, words, index)
    assert seen_by_3.first_finished({5, 8}) is None
    rank_5.note_cause(5, 8)  # rank 5 failed because of rank 8 ...
    assert seen_by_3.first_finished({5, 8}) is None  # ... but has not finished yet
    rank_5.mark_finished(5)
    rank_8.mark_finished(8)
    assert seen_by_3.first_finished({5, 8}) == 5 and seen_by_3.first_finished({8}) == 8
    assert seen_by_3.cause(5) == 8 and seen_by_3.cause(8) is None
    rank_5.note_cause(5, 3)  # only the first cause is kept
    assert seen_by_3.cause(5) == 8 and seen_by_3.first_finished({5}) == 5
    assert NodePeers({5: os.getpid()}).first_finished({5}) is None  # no window: never told


def test_a_dead_rank_that_noted_a_cause_is_reported_as_that_cause():
    # rank 3 waits for rank 5, whose process is gone after it failed because of rank 8 (it
    # raised and exited): rank 3's error names rank 8, as for a rank that returned early
    from collops.errors import PeerFailed
    from collops.mpi.transport import MpiTransport

    words = memoryview(bytearray(3 * 8)).cast("Q")
    index = {3: 0, 5: 1, 8: 2}
    child = _child()
    child.kill()
    child.wait()

    class Waiter:  # the part of an MpiTransport `dead_error` reads
        rank = 3
        _peers = NodePeers({5: child.pid, 8: os.getpid()}, words, index)
        dead_error = MpiTransport.dead_error
        _failed = MpiTransport._failed
        noted = MpiTransport.noted
        note_cause = MpiTransport.note_cause

    waiter = Waiter()
    assert waiter._peers.first_dead({5}) == 5
    plain = waiter.dead_error(5, "for a barrier")
    assert isinstance(plain, PeerFailed) and plain.failed_rank == 5
    NodePeers({3: os.getpid(), 8: os.getpid()}, words, index).note_cause(5, 8)
    named = waiter.dead_error(5, "for a barrier")
    assert named.failed_rank == 8 and "rank 5, failing because of it, is gone" in str(named)
    NodePeers({5: 0, 8: 0}, words, index).note_cause(8, 3)
    assert waiter.dead_error(8, "x").failed_rank == 8  # a cause that is the waiter itself
