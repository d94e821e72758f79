"""allreduce and reduce with ``x`` as ``out`` (MPI_IN_PLACE): what the registry contract
(`tests/contract`, which makes every algorithm's reductions in place too) does not cover.

Algorithms that declare themselves right in place (`Algorithm.in_place`) run on ``x`` itself;
the others on a copy of it. Here: the shared-memory natives, compiled and in Python, in place
at sizes within a direct slot, uneven, and several stream chunks; which algorithms declare
it; and that a declared one really gets ``x`` while a schedule gets a copy.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

import collops
from collops.algorithms import all_algorithms
from collops.errors import AlgorithmIneligible, UnknownAlgorithm
from tests.support.recording import schedule_send_areas
from tests.support.runners import compiled_runners

#: elements per rank: within a direct slot, uneven, several stream chunks
COUNTS = [5, 1_001, 300_001]


def _input(rank: int, n: int, salt: int) -> np.ndarray:
    return ((np.arange(n) * (rank + 2) + salt) % 97).astype(np.float64)


def _in_place(comm, collective, algorithm):
    """Per size, twice: whether the in-place result matches numpy and sits in ``x``; None
    for a size the algorithm does not take."""
    p, me = comm.size, comm.rank
    checks = []
    for n in COUNTS:
        for salt in (1, 2):
            x = _input(me, n, salt)
            expected = functools.reduce(np.add, [_input(r, n, salt) for r in range(p)])
            root = (salt + n) % p
            try:
                if collective == "allreduce":
                    got = comm.allreduce(x, "sum", out=x, algorithm=algorithm)
                else:
                    got = comm.reduce(x, "sum", root, out=x if me == root else None,
                                      algorithm=algorithm)
            except (AlgorithmIneligible, UnknownAlgorithm):
                checks.append(None)
                continue
            if collective == "reduce" and me != root:
                checks.append(got is None)
            else:
                checks.append(bool(np.array_equal(got, expected))
                              and got.ctypes.data == x.ctypes.data)
    return checks


@pytest.mark.timeout(120)
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
@pytest.mark.parametrize("collective", ["allreduce", "reduce"])
def test_in_place_reductions_of_the_shm_natives(collective, compiled):
    for algorithm in ("shm_direct", "shm_stream"):
        with compiled_runners(compiled):
            per_rank = collops.spawn(_in_place, 3, collective, algorithm, transport="shm",
                                     timeout=100)
        for rank, checks in enumerate(per_rank):
            assert all(c is not False for c in checks), (collective, algorithm, rank, checks)


@pytest.mark.timeout(60)
def test_only_the_transports_own_reductions_run_on_x_itself():
    # no schedule claims it (their steps write results before every input is read)
    # (shm_direct copies every input whole into its slot first and reads every result from
    # the slots, so its gathers, alltoall and scans are right with ``x`` in ``out`` too)
    declared = sorted((a.collective, a.name) for a in all_algorithms() if a.in_place)
    assert declared == [("allgather", "shm_direct"), ("allreduce", "hier"),
                        ("allreduce", "mpi_native"), ("allreduce", "shm_direct"),
                        ("allreduce", "shm_stream"), ("alltoall", "shm_direct"),
                        ("exscan", "shm_direct"), ("gather", "shm_direct"),
                        ("reduce", "mpi_native"), ("reduce", "shm_direct"),
                        ("reduce_scatter_block", "shm_direct"), ("scan", "shm_direct")]


def _what_the_algorithms_get(comm):
    """Whether the send buffer an algorithm starts on is ``x`` itself, for an in-place
    allreduce by a schedule (``ring``) and by an algorithm declared in place (shm_direct)."""
    from collops.algorithms import get_algorithm

    x = np.arange(8.0)
    direct = get_algorithm("allreduce", "shm_direct")
    native = direct.native
    seen = {}

    def recording_start(call, send, recv, *args):
        seen["shm_direct"] = bool(np.shares_memory(send, x))
        return native.start(call, send, recv, *args)

    object.__setattr__(direct, "native", dataclasses.replace(native, start=recording_start))
    with schedule_send_areas() as sends:
        comm.allreduce(x, "max", out=x, algorithm="ring")
    seen["ring"] = bool(np.shares_memory(sends[0], x))
    comm.allreduce(x, "max", out=x, algorithm="shm_direct")
    return seen


@pytest.mark.timeout(60)
def test_an_in_place_algorithm_runs_on_x_and_a_schedule_on_a_copy():
    for seen in collops.spawn(_what_the_algorithms_get, 2, transport="shm", timeout=50):
        assert seen == {"ring": False, "shm_direct": True}, seen
