"""The shared-memory collectives for large calls (``shm_cma``, ``shm_stream``) report a peer
that called something else, and a peer that never comes, as every collops call does: a
`CollectiveMismatch` saying what each side called, a `CollectiveTimeout` naming the rank not
heard from — never a hang."""

from __future__ import annotations

import time

import numpy as np
import pytest

import collops
from collops.errors import CollectiveMismatch, CollectiveTimeout
from tests.support.failures import outcome

#: algorithm -> the two collectives rank 0 and rank 1 call at the same point (both supported)
MISMATCHED = {"shm_cma": ("allreduce", "allgather"), "shm_stream": ("allgather", "bcast")}


def _call(comm, collective, x, algorithm, timeout):
    if collective == "bcast":
        return comm.bcast(x, 0, algorithm=algorithm, timeout=timeout)
    return getattr(comm, collective)(x, algorithm=algorithm, timeout=timeout)


def _mismatch(comm, algorithm):
    collective = MISMATCHED[algorithm][comm.rank]
    return outcome(lambda: _call(comm, collective, np.arange(50_000.0), algorithm, 5),
                   CollectiveMismatch)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("algorithm", sorted(MISMATCHED))
def test_mismatched_calls_raise_saying_what_each_called(algorithm):
    texts = collops.spawn(_mismatch, 2, algorithm, transport="shm", timeout=50)
    first, second = MISMATCHED[algorithm]
    assert any(first in t and second in t and "peer failed" not in t for t in texts), texts
    assert "no error" not in texts


def _late(comm, algorithm):
    if comm.rank == 1:
        time.sleep(1.5)
        return "slept"
    return outcome(lambda: comm.allgather(np.arange(50_000.0), algorithm=algorithm,
                                          timeout=0.5), CollectiveTimeout)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("algorithm", sorted(MISMATCHED))
def test_a_late_rank_times_the_call_out_naming_it(algorithm):
    text = collops.spawn(_late, 2, algorithm, transport="shm", timeout=50)[0]
    assert f"allgather[{algorithm}]" in text and "[1]" in text, text
