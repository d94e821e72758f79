"""Sends a rank started and never waited for are delivered after it returns, as MPI_Finalize
completes them: small messages queued behind a full cell ring, and a large one whose payload
the receiver takes only after the sender returned."""

from __future__ import annotations

import time

import numpy as np
import pytest

from collops.shm import segment as seg

pytestmark = pytest.mark.timeout(180)

#: more small messages than a 2-rank cell ring holds: the rest wait for room at exit
SMALL = 3 * seg.Layout.for_ranks(2).p2p_cells
LARGE = 1 << 18  # float64 elements: 2 MiB, the transports' rendezvous


def _message(i: int) -> np.ndarray:
    return np.arange(i % 7 + 1, dtype=np.float64) * (i + 1)


def test_unwaited_small_isends_beyond_a_full_ring_are_delivered(run):
    def body(comm):
        comm.barrier()
        if comm.rank == 0:
            for i in range(SMALL):
                comm.isend(_message(i), 1, tag=i % 3)
            return None
        time.sleep(1.0)  # the sender returns first, its last sends still queued
        return [comm.recv(source=0, tag=i % 3)[0] for i in range(SMALL)]

    got = run(body, 2)[1]
    assert len(got) == SMALL
    for i, data in enumerate(got):
        np.testing.assert_array_equal(data, _message(i))


def test_an_unwaited_large_isend_is_delivered(run):
    def body(comm):
        comm.barrier()
        if comm.rank == 0:
            comm.isend(np.arange(LARGE, dtype=np.float64), 1, tag=7)
            return None
        time.sleep(1.0)  # the sender returns before the receive is posted
        return comm.recv(source=0, tag=7)

    data, status = run(body, 2)[1]
    assert (status.source, status.tag, status.count) == (0, 7, LARGE)
    np.testing.assert_array_equal(data, np.arange(LARGE, dtype=np.float64))
