"""The job segment: anonymous (nothing in /dev/shm, nothing left by a SIGKILL), linear in the
ranks, and a `CollopsError` saying what to change when its memory cannot be had."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from collops.runtime.launcher import launch_function
from collops.shm import segment as seg
from collops.shm.transport import ShmTransport
from collops.transport.base import Transport
from tests.support.leaks import collops_segments, left_behind

pytestmark = pytest.mark.timeout(180)

#: a rank program: a few collectives checked against numpy, and where its segment lives
COLLECTIVES = """
import os, sys
import numpy as np
import collops

comm = collops.init()
r, n = comm.rank, comm.size
for count in (1, 1000, 70_000):
    got = comm.allreduce(np.arange(count, dtype=np.float64) + r, "sum")
    assert np.array_equal(got, n * np.arange(count) + n * (n - 1) / 2), "allreduce"
    got = comm.allgather(np.full(count, r, np.int32))
    assert np.array_equal(got, np.repeat(np.arange(n, dtype=np.int32), count)), "allgather"
    got = comm.alltoall(np.arange(n * count, dtype=np.int64) + 10**9 * r)
    want = np.concatenate([np.arange(count * r, count * (r + 1)) + 10**9 * s
                           for s in range(n)])
    assert np.array_equal(got, want), "alltoall"
    got = comm.bcast(np.arange(count, dtype=np.float32) if r == 1 % n else None, root=1 % n)
    assert np.array_equal(got, np.arange(count, dtype=np.float32)), "bcast"
maps = [line.split(None, 5)[5].strip() for line in open("/proc/self/maps") if "collops" in line]
assert not [m for m in maps if m.startswith("/dev/shm")], maps
assert any(m.startswith("/memfd:collops") for m in maps), maps
size = os.fstat(int(os.environ["COLLOPS_SHM_FD"])).st_size
if r == 0:
    print("segment", size)
"""


def _program(tmp_path: Path, body: str = COLLECTIVES) -> str:
    path = tmp_path / "program.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def _run(args: list[str], timeout: float = 150, **kwargs: object
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "collops", "run", *args], text=True,
                          capture_output=True, timeout=timeout, **kwargs)  # type: ignore


def test_the_segment_is_linear_in_the_ranks() -> None:
    for per_rank in (seg.DEFAULT_PER_RANK, 24 << 20):
        for n in (1, 2, 3, 4, 7, 8, 16, 31, 64, 65, 100):
            layout = seg.Layout.for_ranks(n, per_rank)
            assert layout.total_bytes <= seg.PAIR_RESERVE + n * per_rank + layout.ring_offset
            assert layout.nslots & (layout.nslots - 1) == 0 and layout.nslots >= seg.MIN_SLOTS
            assert layout.chunk_bytes >= seg.MIN_CHUNK_BYTES
    small, large = seg.Layout.for_ranks(2), seg.Layout.for_ranks(63)
    assert (small.nslots, small.nchunks, small.chunk_bytes) == (
        seg.DEFAULT_NSLOTS, seg.DEFAULT_NCHUNKS, seg.DEFAULT_CHUNK_BYTES)
    assert large.pair_bytes < small.pair_bytes // 16
    assert seg.Layout.for_ranks(64).total_bytes <= 1100 << 20


def test_a_budget_too_small_names_the_ranks_the_bytes_and_the_setting() -> None:
    with pytest.raises(seg.TransportError) as info:
        seg.Layout.for_ranks(8, 4 << 20)
    text = str(info.value)
    assert "8 ranks" in text and "COLLOPS_SHM_PER_RANK=4194304" in text
    least = int(text.split("at least ")[1].split()[0])
    seg.Layout.for_ranks(8, least)  # the figure it names is enough
    with pytest.raises(seg.TransportError):
        seg.Layout.for_ranks(8, least - 4096)


def test_memory_that_cannot_be_had_is_a_collops_error_saying_what_to_change(
        tmp_path: Path) -> None:
    def small_files() -> None:  # the segment cannot grow past 8 MiB
        resource.setrlimit(resource.RLIMIT_FSIZE, (8 << 20, 8 << 20))

    out = _run(["-n", "4", _program(tmp_path)], preexec_fn=small_files)
    assert out.returncode == 1
    needed = seg.Layout.for_ranks(4).total_bytes
    assert f"{needed} bytes" in out.stderr and "4 ranks" in out.stderr
    assert "COLLOPS_SHM_PER_RANK" in out.stderr and "Traceback" not in out.stderr
    out = _run(["-n", "4", _program(tmp_path)],
               env={**os.environ, "COLLOPS_SHM_PER_RANK": "1M"})
    assert out.returncode == 1 and "raise COLLOPS_SHM_PER_RANK" in out.stderr
    assert "Traceback" not in out.stderr


def test_sixteen_ranks_run_collectives_in_a_segment_linear_in_the_ranks(
        tmp_path: Path) -> None:
    out = _run(["-n", "16", _program(tmp_path)])
    assert out.returncode == 0, out.stderr[-3000:]
    size = int(out.stdout.split("segment ")[1].split()[0])
    assert size == seg.Layout.for_ranks(16).total_bytes
    assert size <= seg.PAIR_RESERVE + 16 * seg.DEFAULT_PER_RANK + (1 << 20)


def _unshare_works() -> bool:
    try:
        return subprocess.run(["unshare", "-rm", "true"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.skipif(not _unshare_works(), reason="needs unprivileged user namespaces")
def test_four_ranks_run_with_a_container_sized_dev_shm(tmp_path: Path) -> None:
    """In a mount namespace whose /dev/shm is a 64 MiB tmpfs (Docker's default)."""
    command = (f"mount -t tmpfs -o size=64m tmpfs /dev/shm && "
               f"exec {sys.executable} -m collops run -n 4 {_program(tmp_path)}")
    out = subprocess.run(["unshare", "-rm", "sh", "-c", command], text=True,
                         capture_output=True, timeout=150)
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(out.stdout.split("segment ")[1].split()[0]) > 64 << 20


ATTACH_LATE = """
import os, time
open(os.environ["PIDS"] + os.environ["COLLOPS_RANK"], "w").write(str(os.getpid()))
time.sleep(float(os.environ["ATTACH_AFTER"]))
import numpy as np
import collops
comm = collops.init()
open(os.environ["PIDS"] + "attached" + str(comm.rank), "w").write("")
while True:
    comm.allreduce(np.ones(1000), "sum")
"""


@pytest.mark.parametrize("moment", ["before attach", "while running"])
def test_sigkill_of_the_launcher_leaves_nothing(tmp_path: Path, moment: str) -> None:
    before = collops_segments()
    program = _program(tmp_path, ATTACH_LATE)
    env = {**os.environ, "PIDS": str(tmp_path / "pid"),
           "ATTACH_AFTER": "30" if moment == "before attach" else "0"}
    launcher = subprocess.Popen([sys.executable, "-m", "collops", "run", "-n", "4", program],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    waited_for = "pid" if moment == "before attach" else "pidattached"
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"{waited_for}{r}").exists() for r in range(4)):
        assert time.monotonic() < deadline and launcher.poll() is None
        time.sleep(0.05)
    launcher.send_signal(signal.SIGKILL)
    launcher.wait(timeout=30)
    pids = [int((tmp_path / f"pid{r}").read_text()) for r in range(4)]
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in pids):  # the ranks die with the launcher
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert left_behind(before) == set()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _exchange(t: Transport, sizes: list[int]) -> list[bool]:
    """Every size both ways at once, all posted before any completes; whether each arrived
    intact."""
    peer = 1 - t.rank
    sends = [np.random.default_rng(n + t.rank).integers(0, 255, n, np.uint8) for n in sizes]
    recvs = [np.zeros(n, np.uint8) for n in sizes]
    handles = [t.irecv(peer, k, memoryview(r)) for k, r in enumerate(recvs)]
    handles += [t.isend(peer, k, memoryview(s)) for k, s in enumerate(sends)]
    while not all(h.done for h in handles):
        t.wait_for_activity(1.0)
    return [bool(np.array_equal(r, np.random.default_rng(n + peer).integers(0, 255, n,
                                                                             np.uint8)))
            for n, r in zip(sizes, recvs, strict=True)]


@pytest.mark.parametrize("single_copy", [False, True])
def test_the_smallest_pair_areas_carry_every_protocol(single_copy: bool) -> None:
    """The smallest pair areas (4 ring slots, 4 KiB bulk chunks) between 2 ranks: more
    eager messages than slots, and pipelined and single-copy ones, arrive intact."""
    layout = replace(seg.Layout.for_ranks(2), nslots=seg.MIN_SLOTS,
                     chunk_bytes=seg.MIN_CHUNK_BYTES)
    job, _ = seg.create_job(2, layout, single_copy=single_copy)
    sizes = [0, 1, 100, 8128, 8129, 40_000, 300_000, 3_000_000] + [64] * 12

    def worker(t: Transport) -> list[bool]:
        mine = ShmTransport(job, t.rank, 2)
        try:
            return _exchange(mine, sizes)
        finally:
            mine.close()

    try:
        results = launch_function(worker, 2, timeout=120)
    finally:
        seg.release_job(job)
    assert results == [[True] * len(sizes)] * 2


def test_small_bulk_chunks_send_large_messages_single_copy() -> None:
    """Where single copy is permitted, a job whose bulk chunks are small (many ranks) does not
    pipeline through them; a job of few ranks keeps the selection table's thresholds."""
    for layout, pipelined in ((seg.Layout.for_ranks(2), True),
                              (seg.Layout.for_ranks(32), False)):
        job, _ = seg.create_job(2, replace(layout, size=2), single_copy=True)
        try:
            t = ShmTransport(job, 0, 2, single_copy=True)
            upto, origin = t.protocol_settings()["shm.single_copy_max"]
            low, _ = t.protocol_settings()["shm.single_copy_min"]
            t.close()
        finally:
            seg.release_job(job)
        assert (upto < low) == pipelined
        assert ("bulk chunks" in origin) != pipelined


def _owes_a_fin_when_it_returns(t: Transport) -> bool:
    """Rank 1 fills its ring to rank 0 with eager messages, then receives rank 0's large
    message, whose FIN must wait for room in that ring; rank 1 returns at once."""
    n_eager = seg.Layout.for_ranks(2).nslots + 2
    if t.rank == 1:
        for k in range(n_eager):
            t.isend(0, 1000 + k, memoryview(np.full(8, k, np.uint8)))
        out = np.zeros(100_000, np.uint8)
        h = t.irecv(0, 1, memoryview(out))
        while not h.done:
            t.wait_for_activity(1.0)
        return bool((out == 7).all())
    send = t.isend(1, 1, memoryview(np.full(100_000, 7, np.uint8)))
    time.sleep(1.0)  # rank 1 receives, queues its FIN and returns meanwhile
    got = [np.zeros(8, np.uint8) for _ in range(n_eager)]
    handles = [t.irecv(1, 1000 + k, memoryview(g)) for k, g in enumerate(got)] + [send]
    while not all(h.done for h in handles):
        t.wait_for_activity(1.0)
    return all((g == k).all() for k, g in enumerate(got))


def test_a_rank_that_returns_delivers_what_waits_for_room_in_a_full_ring() -> None:
    """`close` (at a rank's end) flushes the messages queued behind a full ring: without it
    rank 0's send never learns that rank 1 read it."""
    assert launch_function(_owes_a_fin_when_it_returns, 2, timeout=60) == [True, True]
