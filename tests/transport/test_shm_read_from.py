"""`ShmTransport.read_from`: single-copy reads from a rank's process, for collectives that
exchange buffer addresses (``shm_cma``), and `PeerFailed` when that process is gone."""

from __future__ import annotations

import os

import numpy as np
import pytest

from collops.errors import PeerFailed
from collops.runtime.launcher import launch_function
from collops.transport.base import Transport
from collops.transport.shm import ShmTransport


def _reads(t: Transport) -> tuple[bool, str]:
    assert isinstance(t, ShmTransport)
    if not t.capabilities().single_copy:
        return False, "single copy not permitted here"
    src = np.arange(100_000, dtype=np.int64) + t.rank
    out = np.zeros_like(src)
    t.read_from(t.rank, src.ctypes.data, out.ctypes.data, src.nbytes)
    copied = bool(np.array_equal(out, src))
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
        return copied, f"PeerFailed {exc.failed_rank}"
    finally:
        t._words[t._pid_word[peer]] = real
    return copied, "no error"


@pytest.mark.timeout(60)
def test_read_from_copies_and_names_a_vanished_peer():
    results = launch_function(_reads, 2)
    for rank, (copied, seen) in enumerate(results):
        assert copied, seen
        assert seen == f"PeerFailed {1 - rank}", seen
