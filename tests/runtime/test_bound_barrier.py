"""The bound barrier and bcast, called straight from `Comm.barrier` and `Comm.bcast`.

Once a barrier (a bcast of one signature) has run through the compiled runner, the next
calls go to that runner from the public method itself, without `_fast`. These tests check
that such calls still order the ranks, still meet a peer that made another call with
`CollectiveMismatch`, still time out under the default timeout, and still return the root's
data. Timings decide nothing.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

import collops
from collops import config

#: tests of the compiled route: it is on for them whatever the environment says
pytestmark = pytest.mark.usefixtures("compiled_on")

pytest.importorskip("collops.shm._direct")


def _ordered(comm, marks):
    for _ in range(5):
        comm.barrier()
    bound = comm.bound_calls().get("barrier")
    seen = []
    for i in range(20):
        if comm.rank == 1:
            if i % 4 == 0:
                time.sleep(0.02)  # late: rank 0 must still wait for the mark
            with open(os.path.join(marks, f"{i}"), "w"):
                pass
        comm.barrier()
        if comm.rank == 0:
            seen.append(os.path.exists(os.path.join(marks, f"{i}")))
        comm.barrier()
    return bound, seen, comm.last_algorithm


@pytest.mark.timeout(60)
def test_a_bound_barrier_waits_for_every_rank(tmp_path):
    results = collops.spawn(_ordered, 2, str(tmp_path), transport="shm", timeout=50)
    for bound, _, algorithm in results:
        assert bound == "shm_direct" and algorithm == "shm_direct"
    assert results[0][1] == [True] * 20


def _raised(call):
    """(name, text) of the collops error ``call`` raised, or ("no error", "")."""
    try:
        call()
    except collops.CollopsError as exc:
        return type(exc).__name__, str(exc)
    return "no error", ""


def _barrier_against(comm, other):
    for _ in range(5):
        comm.barrier()
    if comm.rank == 0:
        return _raised(comm.barrier)
    if other == "allreduce":
        return _raised(lambda: comm.allreduce(np.ones(1)))
    return _raised(lambda: comm.bcast(np.ones(1), 1))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("other", ["allreduce", "bcast"])
def test_a_bound_barrier_against_another_collective_is_a_mismatch(other):
    texts = collops.spawn(_barrier_against, 2, other, transport="shm", timeout=50)
    assert [kind for kind, _ in texts] == ["CollectiveMismatch"] * 2, texts
    assert all("barrier" in t and other in t for _, t in texts), texts


def _alone(comm):
    os.environ["COLLOPS_TIMEOUT"] = "0.5"
    config.reload_settings()
    for _ in range(5):
        comm.barrier()
        comm.bcast(np.arange(3.0), 0)
    if comm.rank == 1:
        comm.barrier()
        time.sleep(2.0)  # alive, in no call: rank 0's next barrier waits for it in vain
        return "left", ""
    comm.barrier()
    return _raised(comm.barrier)


@pytest.mark.timeout(60)
def test_a_bound_barrier_times_out_under_the_default_timeout():
    texts = collops.spawn(_alone, 2, transport="shm", timeout=50)
    assert texts[0][0] == "CollectiveTimeout" and "barrier" in texts[0][1], texts


def _bcasts(comm):
    got = []
    for i in range(12):
        shape = (3,) if i < 6 or i % 2 else (2, 2)  # the root changes signature now and then
        x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape) + i
        want = x.copy()
        got.append(np.array_equal(comm.bcast(x if comm.rank == 0 else None, 0), want))
    return got, comm.bound_calls().get("bcast")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("p", [2, 3])
def test_bound_bcasts_return_the_roots_data_through_changes_of_signature(p):
    for got, bound in collops.spawn(_bcasts, p, transport="shm", timeout=50):
        assert got == [True] * 12 and bound == "shm_direct"
