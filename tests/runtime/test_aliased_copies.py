"""Copies between buffers a few bytes apart modulo 4 KiB, and copies large enough to bypass
the cache, on real processes.

The compiled runners copy such buffers with a loop of vector loads and stores (`copy_bytes`
in ``_shm_wait.h``: glibc's ``rep movsb`` is 15x slower when the destination sits 1-63 bytes
past the source modulo a page), the Python ones in 2 KiB pieces. Here every distance class —
in the window, at its edges, outside it — meets lengths that are a multiple of neither the
loop's 64 bytes nor the piece, through the direct slots and the stream rings, and the
results are compared with numpy's. Then calls that receive enough for the stream's
non-temporal stores (`copy_streaming`), at odd alignments and lengths; the transport's own
copies between its bulk area and the user's buffers (`kernel.copy_memory`, compiled and
in Python) and its single copies (`RemoteReader`, aliased ones through a bounce buffer).
"""

from __future__ import annotations

import numpy as np
import pytest

import collops

PAGE = 4096
#: bytes past a page boundary for the user's buffers: the rings and slots start at one, so
#: these are the copies' distances modulo 4 KiB (in the window 1..63, at its edges, outside)
OFFSETS = [0, 8, 16, 40, 63, 64, 2048]
#: bytes per rank: within a direct slot, and streamed; none a multiple of the 2 KiB piece
LENGTHS = [6_000, 300_001]


def _at(offset: int, nbytes: int, fill: int) -> np.ndarray:
    """``nbytes`` of uint8 starting ``offset`` bytes past a page boundary."""
    raw = np.full(nbytes + 2 * PAGE, 255, np.uint8)
    start = -raw.ctypes.data % PAGE + offset
    view = raw[start:start + nbytes]
    view[:] = (np.arange(nbytes) * 7 + fill) % 251
    return view


def _run(comm, offset, nbytes, algorithm):
    p, me = comm.size, comm.rank
    mine = _at(offset, nbytes, me)
    got = {}
    out = _at(offset, nbytes * p, 0)
    comm.allgather(mine, out=out, algorithm=algorithm)
    got["allgather"] = (out.copy(), np.concatenate([_at(0, nbytes, r) for r in range(p)]))
    root_data = _at(offset, nbytes, 0)
    x = root_data if me == 0 else _at(offset, nbytes, 99)
    comm.bcast(x, root=0, out=x, algorithm=algorithm)
    got["bcast"] = (x.copy(), _at(0, nbytes, 0))
    send = _at(offset, nbytes * p, me + 5)
    out = _at(offset, nbytes * p, 0)
    comm.alltoall(send, out=out, algorithm=algorithm)
    blocks = [_at(0, nbytes * p, r + 5)[me * nbytes:(me + 1) * nbytes] for r in range(p)]
    got["alltoall"] = (out.copy(), np.concatenate(blocks))
    return {name: bool(np.array_equal(a, b)) for name, (a, b) in got.items()}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("algorithm", ["shm_direct", "shm_stream", None])
def test_copies_at_every_distance_match_numpy(algorithm):
    for nbytes in LENGTHS:
        if algorithm == "shm_direct" and nbytes > 60_000:
            continue  # beyond a direct slot: that algorithm refuses it
        for offset in OFFSETS:
            results = collops.spawn(_run, 2, offset, nbytes, algorithm, transport="shm",
                                    timeout=60)
            for rank, checks in enumerate(results):
                assert all(checks.values()), (algorithm, nbytes, offset, rank, checks)


def _large(comm, offset):
    """Calls that receive enough for the compiled loop's non-temporal stores."""
    p, me = comm.size, comm.rank
    checks = {}
    n = 4 * 1024 * 1024 + 3  # a bcast reader from 4 MiB, bytes past the last whole line
    x = _at(offset, n, 0) if me == 0 else _at(offset, n, 99)
    comm.bcast(x, root=0, out=x, algorithm="shm_stream")
    checks["bcast"] = bool(np.array_equal(x, _at(0, n, 0)))
    n = 8 * 1024 * 1024 + 5  # an allgather receiving 16 MiB and more
    out = _at(offset, n * p, 0)
    comm.allgather(_at(offset, n, me), out=out, algorithm="shm_stream")
    checks["allgather"] = all(np.array_equal(out[r * n:(r + 1) * n], _at(0, n, r))
                              for r in range(p))
    return checks


@pytest.mark.timeout(120)
@pytest.mark.parametrize("offset", [0, 5, 16])
def test_copies_that_bypass_the_cache_match_numpy(offset):
    for rank, checks in enumerate(collops.spawn(_large, 2, offset, transport="shm",
                                                timeout=100)):
        assert all(checks.values()), (offset, rank, checks)


@pytest.mark.parametrize("copy", ["compiled", "python"])
def test_the_transports_copy_matches_numpy_at_every_distance(copy):
    from collops.shm import kernel
    if copy == "compiled":
        from collops.shm import _stream
        fn = _stream.copy
    else:
        fn = kernel._copy_in_pieces
    for nbytes in (1, 2048, 2049, 300_001):
        source = _at(0, nbytes, 3)
        for offset in OFFSETS:
            destination = _at(offset, nbytes, 0)
            fn(destination.ctypes.data, source.ctypes.data, nbytes)
            assert np.array_equal(destination, source), (nbytes, offset)


def _through_the_bulk_area(comm, offset):
    """Messages of a schedule too large for an eager slot, into buffers at ``offset``."""
    p, me = comm.size, comm.rank
    n = 300_001
    x = _at(offset, n, 0) if me == 0 else _at(offset, n, 99)
    comm.bcast(x, root=0, out=x, algorithm="linear")
    out = _at(offset, n * p, 0)
    comm.allgather(_at(offset, n, me), out=out, algorithm="ring")
    return [bool(np.array_equal(x, _at(0, n, 0))),
            all(np.array_equal(out[r * n:(r + 1) * n], _at(0, n, r)) for r in range(p))]


@pytest.mark.timeout(120)
def test_messages_through_the_bulk_area_at_every_distance_match_numpy(monkeypatch):
    monkeypatch.setenv("COLLOPS_SHM_SINGLE_COPY", "0")  # every large message pipelined
    for offset in OFFSETS:
        results = collops.spawn(_through_the_bulk_area, 2, offset, transport="shm", timeout=60)
        assert results == [[True, True]] * 2, (offset, results)


def test_single_copies_at_every_distance_match_numpy():
    """process_vm_readv / writev (here on this very process) at every distance class; the
    aliased ones go through the bounce buffer, a piece at a time."""
    import os

    from collops.shm import kernel
    if not kernel.cross_memory_attach_works():
        pytest.skip("cross-memory attach is not permitted here")
    reader = kernel.RemoteReader()
    for nbytes in (2049, kernel.BOUNCE_BYTES + 5000):
        source = _at(0, nbytes, 3)
        for offset in OFFSETS:
            for move in (reader.read, reader.write):
                destination = _at(offset, nbytes, 0)
                if move == reader.read:
                    move(os.getpid(), source.ctypes.data, destination.ctypes.data, nbytes)
                else:
                    move(os.getpid(), destination.ctypes.data, source.ctypes.data, nbytes)
                assert np.array_equal(destination, source), (move.__name__, nbytes, offset)
