"""`ShmTransport.read_from`: single-copy reads from a rank's process, for collectives that
exchange buffer addresses (``shm_cma``), `PeerFailed` when that process is gone, and a plain
`TransportError` (not `PeerFailed`) for an address the live process does not map."""

from __future__ import annotations

import os

import numpy as np
import pytest

from collops.errors import PeerFailed, TransportError
from collops.runtime.launcher import launch_function
from collops.shm.transport import ShmTransport
from collops.transport.base import Transport


def _both_done(t: ShmTransport) -> None:
    """Return once the peer has also got this far (it must be alive while it is read)."""
    got = memoryview(bytearray(1))
    handles = [t.isend(1 - t.rank, 7, memoryview(b"x")), t.irecv(1 - t.rank, 7, got)]
    while not all(h.done for h in handles):
        t.wait_for_activity(1.0)


def _bad_address(t: ShmTransport) -> str:
    """What reading an unmapped address of the live peer raises."""
    out = np.zeros(8, np.uint8)
    try:
        t.read_from(1 - t.rank, 8, out.ctypes.data, 8)  # page 0 is never mapped
    except PeerFailed as exc:
        return f"PeerFailed {exc.failed_rank}"
    except TransportError as exc:
        return "TransportError" + (" naming the rank" if f"rank {1 - t.rank}" in str(exc) else "")
    return "no error"


def _reads(t: Transport) -> tuple[bool, str, str]:
    assert isinstance(t, ShmTransport)
    if not t.capabilities().single_copy:
        return False, "single copy not permitted here", ""
    src = np.arange(100_000, dtype=np.int64) + t.rank
    out = np.zeros_like(src)
    t.read_from(t.rank, src.ctypes.data, out.ctypes.data, src.nbytes)
    copied = bool(np.array_equal(out, src))
    _both_done(t)  # the peer has attached (published its pid)
    bad = _bad_address(t)
    _both_done(t)  # and stays alive until read
    # the peer's process gone: its pid word names a process that has exited and been reaped
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
    peer = 1 - t.rank
    real = int(t._words[t._pid_word[peer]])
    t._words[t._pid_word[peer]] = child
    try:
        t.read_from(peer, src.ctypes.data, out.ctypes.data, 8)
    except PeerFailed as exc:
        return copied, f"PeerFailed {exc.failed_rank}", bad
    finally:
        t._words[t._pid_word[peer]] = real
    return copied, "no error", bad


@pytest.mark.timeout(60)
def test_read_from_copies_and_names_a_vanished_peer():
    results = launch_function(_reads, 2)
    for rank, (copied, seen, bad) in enumerate(results):
        assert copied, seen
        assert seen == f"PeerFailed {1 - rank}", seen
        assert bad == "TransportError naming the rank", bad
