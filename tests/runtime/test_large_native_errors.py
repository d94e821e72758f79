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

#: (algorithm, what rank 0 calls, what rank 1 calls at the same point): all supported by it;
#: the stream's allreduce starts with the very layout of its reduce_scatter_block
MISMATCHED = [("shm_cma", "allreduce", "allgather"), ("shm_stream", "allgather", "bcast"),
              ("shm_stream", "allreduce", "reduce_scatter_block"),
              ("shm_stream", "reduce", "allreduce")]
ALGORITHMS = sorted({algorithm for algorithm, _, _ in MISMATCHED})


def _call(comm, collective, x, algorithm, timeout):
    kw = {"algorithm": algorithm, "timeout": timeout}
    if collective == "bcast":
        return comm.bcast(x, 0, **kw)
    if collective == "reduce":
        return comm.reduce(x, "sum", 0, **kw)
    if collective in ("allreduce", "reduce_scatter_block"):
        return getattr(comm, collective)(x, "sum", **kw)
    return getattr(comm, collective)(x, **kw)


def _mismatch(comm, algorithm, calls):
    return outcome(lambda: _call(comm, calls[comm.rank], np.arange(50_000.0), algorithm, 5),
                   CollectiveMismatch)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("algorithm", "first", "second"), MISMATCHED)
def test_mismatched_calls_raise_saying_what_each_called(algorithm, first, second):
    texts = collops.spawn(_mismatch, 2, algorithm, (first, second), transport="shm",
                          timeout=50)
    assert any(f"called {first}[" in t and f"called {second}[" in t
               and "peer failed" not in t for t in texts), texts
    assert "no error" not in texts


def _late(comm, algorithm, collective):
    if comm.rank == 1:
        time.sleep(1.5)
        return "slept"
    return outcome(lambda: _call(comm, collective, np.arange(50_000.0), algorithm, 0.5),
                   CollectiveTimeout)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("algorithm", "collective"), [
    ("shm_cma", "allgather"), ("shm_stream", "allgather"), ("shm_stream", "allreduce")])
def test_a_late_rank_times_the_call_out_naming_it(algorithm, collective):
    text = collops.spawn(_late, 2, algorithm, collective, transport="shm", timeout=50)[0]
    assert f"[{algorithm}]" in text and "[1]" in text, text
