"""The shared-memory transport, driven directly through `launch_function` (2–4 processes)."""

from __future__ import annotations

import json
import os
import signal
import stat
import time
from pathlib import Path

import numpy as np
import pytest

from collops.errors import PeerFailed, RankFailed
from collops.runtime.launcher import launch_function
from collops.shm import segment as seg
from collops.shm.transport import ShmTransport
from collops.transport.base import Handle, Transport

pytestmark = pytest.mark.timeout(60)

EAGER_LIMIT = seg.Layout(2).eager_limit
#: sizes around every protocol boundary, zero and ≥ 4 MiB included
SIZES = [0, 1, 8, 1000, EAGER_LIMIT, EAGER_LIMIT + 1, 70_000, 300_001, (4 << 20) + 3]


def payload(src: int, dst: int, tag: int, nbytes: int) -> np.ndarray:
    """The bytes rank ``src`` sends ``dst`` under ``tag``: reproducible from the three."""
    return np.random.default_rng([src, dst, tag]).integers(0, 256, nbytes, dtype=np.uint8)


def wait_all(t: Transport, handles: list[Handle]) -> None:
    """Block until every handle is done."""
    while not all(h.done for h in handles):
        t.wait_for_activity(1.0)


def exchange_everything(t: Transport) -> list[tuple[int, int, int, int]]:
    """Send every size to every peer under its own tag; receive in a shuffled tag order."""
    peers = [p for p in range(t.size) if p != t.rank]
    sends = {(p, tag): payload(t.rank, p, tag, n) for p in peers for tag, n in enumerate(SIZES)}
    handles = [t.isend(p, tag, memoryview(a), fingerprint=tag + 1) for (p, tag), a in sends.items()]
    order = np.random.default_rng(t.rank).permutation(len(SIZES))
    received: dict[tuple[int, int], tuple[np.ndarray, Handle]] = {}
    for p in peers:
        for tag in order.tolist():
            out = np.full(SIZES[tag], 0xEE, dtype=np.uint8)
            received[p, tag] = (out, t.irecv(p, tag, memoryview(out)))
    wait_all(t, handles + [h for _, h in received.values()])
    bad = []
    for (p, tag), (out, h) in received.items():
        expected = payload(p, t.rank, tag, SIZES[tag])
        if h.nbytes != SIZES[tag] or h.fingerprint != tag + 1 or not np.array_equal(out, expected):
            bad.append((p, tag, h.nbytes, h.fingerprint))
    return bad


@pytest.mark.parametrize("single_copy", ["1", "0", "default"],
                         ids=["single-copy", "pipelined", "default"])
@pytest.mark.parametrize("nprocs", [2, 3])
def test_tagged_messages_of_every_size_both_ways(nprocs: int, single_copy: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    if single_copy == "default":  # the mix of protocols the transport picks by size
        monkeypatch.delenv("COLLOPS_SHM_SINGLE_COPY", raising=False)
        monkeypatch.delenv("COLLOPS_SHM_SINGLE_COPY_MIN", raising=False)
    else:
        monkeypatch.setenv("COLLOPS_SHM_SINGLE_COPY", single_copy)
        monkeypatch.setenv("COLLOPS_SHM_SINGLE_COPY_MIN", "0")  # every large one single-copy
    assert launch_function(exchange_everything, nprocs) == [[]] * nprocs


def ping_pong(t: Transport) -> int:
    """100 round trips of 8 bytes, each checked; returns the count of correct replies."""
    other, good = 1 - t.rank, 0
    out = np.zeros(1, dtype=np.int64)
    for i in range(100):
        if t.rank == 0:
            h = t.isend(other, i, memoryview(np.array([i], dtype=np.int64)).cast("B"))
            r = t.irecv(other, i, memoryview(out).cast("B"))
            wait_all(t, [h, r])
            good += int(out[0]) == -i
        else:
            r = t.irecv(other, i, memoryview(out).cast("B"))
            wait_all(t, [r])
            good += int(out[0]) == i
            h = t.isend(other, i, memoryview(np.array([-i], dtype=np.int64)).cast("B"))
            wait_all(t, [h])
    return good


def test_ping_pong() -> None:
    assert launch_function(ping_pong, 2) == [100, 100]


def flood(t: Transport) -> bool:
    """More small messages than a ring holds, received only after all were sent."""
    other, count = 1 - t.rank, 3 * seg.DEFAULT_NSLOTS
    sends = [t.isend(other, i, memoryview(np.array([i, t.rank], dtype=np.int32)))
             for i in range(count)]
    outs = [np.zeros(2, dtype=np.int32) for _ in range(count)]
    recvs = [t.irecv(other, i, memoryview(o)) for i, o in reversed(list(enumerate(outs)))]
    wait_all(t, sends + recvs)
    return all(o.tolist() == [i, other] for i, o in enumerate(outs))


def test_more_messages_than_ring_slots() -> None:
    assert launch_function(flood, 2) == [True, True]


def oversized(t: Transport) -> list[tuple[int, bool]]:
    """A message larger than the posted buffer: its true size, nothing copied, sender freed."""
    other, result = 1 - t.rank, []
    for tag, n in enumerate([16, 2 * EAGER_LIMIT, 1 << 20]):
        h = t.isend(other, tag, memoryview(payload(t.rank, other, tag, n)))
        out = np.full(8, 7, dtype=np.uint8)
        r = t.irecv(other, tag, memoryview(out))
        wait_all(t, [h, r])
        result.append((r.nbytes, bool((out == 7).all())))
    return result


def test_oversized_message_reports_its_size_and_copies_nothing() -> None:
    expected = [(16, True), (2 * EAGER_LIMIT, True), (1 << 20, True)]
    assert launch_function(oversized, 2) == [expected, expected]


def test_results_come_back_by_rank() -> None:
    assert launch_function(lambda t: (t.rank, t.size, t.capabilities().name), 4) == [
        (r, 4, "shm") for r in range(4)]


def raise_on_rank_2(t: Transport) -> None:
    if t.rank == 2:
        raise ValueError("rank two disagrees")
    out = bytearray(8)
    wait_all(t, [t.irecv(2, 0, memoryview(out))])  # never sent: must end with PeerFailed


def test_an_exception_names_its_rank_and_traceback() -> None:
    start = time.monotonic()
    with pytest.raises(RankFailed) as info:
        launch_function(raise_on_rank_2, 3)
    assert info.value.rank == 2
    assert info.value.exc_type == "ValueError"
    assert "rank two disagrees" in info.value.traceback_text
    assert "raise_on_rank_2" in info.value.traceback_text
    assert time.monotonic() - start < 10


def killed_mid_receive(t: Transport, record: Path) -> None:
    if t.rank == 0:
        time.sleep(0.3)  # let rank 1 reach its sleeping wait
        record.with_suffix(".killed").write_text(str(time.time()))
        os.kill(os.getpid(), signal.SIGKILL)
    out = bytearray(8)
    try:
        wait_all(t, [t.irecv(0, 0, memoryview(out))])
    except PeerFailed as exc:
        record.write_text(json.dumps({"rank": exc.failed_rank, "at": time.time()}))
        raise


def test_a_rank_killed_mid_receive_fails_its_peer_within_two_seconds(tmp_path: Path) -> None:
    record = tmp_path / "peer.json"
    with pytest.raises(RankFailed) as info:
        launch_function(lambda t: killed_mid_receive(t, record), 2)
    assert info.value.rank == 0
    assert "SIGKILL" in info.value.traceback_text
    seen = json.loads(record.read_text())
    assert seen["rank"] == 0
    assert seen["at"] - float(record.with_suffix(".killed").read_text()) < 2.0


def test_a_named_segment_is_private_unguessable_and_removed() -> None:
    job, layout = seg.create_job(2, named=True)
    job2, _ = seg.create_job(2, named=True)
    assert isinstance(job, str) and isinstance(job2, str)
    try:
        path = seg.segment_path(job)
        info = os.stat(path)
        assert stat.S_IMODE(info.st_mode) == 0o600
        assert "collops" in os.path.basename(path)
        assert len(job) == 32 and job != job2
        assert info.st_size == layout.total_bytes
    finally:
        seg.release_job(job)
        seg.release_job(job2)
    assert not os.path.exists(path)


def test_an_anonymous_segment_has_no_name_and_cannot_be_resized() -> None:
    before = set(os.listdir("/dev/shm"))
    job, layout = seg.create_job(2)
    try:
        assert isinstance(job, int)
        assert os.readlink(f"/proc/self/fd/{job}").startswith("/memfd:collops")
        assert os.fstat(job).st_size == layout.total_bytes
        assert not {n for n in set(os.listdir("/dev/shm")) - before if "collops" in n}
        with pytest.raises(PermissionError):  # sealed: no rank can shrink it under the others
            os.ftruncate(job, 4096)
    finally:
        seg.release_job(job)


def test_transport_attaches_and_reports_capabilities() -> None:
    job, _ = seg.create_job(2, single_copy=False)
    try:
        t = ShmTransport(job, 1, 2)
        caps = t.capabilities()
        assert (caps.name, caps.node_of_rank, caps.single_copy) == ("shm", (0, 0), False)
        t.close()
        t.close()
    finally:
        seg.release_job(job)


def sleepy_receive(t: Transport) -> float:
    """Rank 1 waits a second for rank 0's message; the CPU seconds it spent waiting."""
    if t.rank == 0:
        time.sleep(1.0)
        wait_all(t, [t.isend(1, 0, memoryview(b"late"))])
        return 0.0
    out = bytearray(4)
    before = time.process_time()
    wait_all(t, [t.irecv(0, 0, memoryview(out))])
    assert out == b"late"
    return time.process_time() - before


def test_a_blocked_rank_sleeps_instead_of_spinning() -> None:
    cpu_seconds = launch_function(sleepy_receive, 2)[1]
    assert cpu_seconds < 0.25  # a busy-polling wait would burn about 1 s
