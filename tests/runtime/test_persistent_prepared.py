"""A persistent request keeps the prepared call of its init: the algorithm chosen then serves
every start, as MPI fixes a persistent collective's at ``MPI_Allreduce_init``, even when the
communicator's choice changes later — on every rank alike, so the ranks still match."""

from __future__ import annotations

import numpy as np
import pytest

import collops

#: algorithms a communicator may be set to after init: the first that is not the one chosen
OTHERS = {"allreduce": ("ring", "rabenseifner"), "allgather": ("bruck", "ring")}


def _start(comm, collective, x):
    if collective == "allreduce":
        return comm.allreduce_init(x, op="sum")
    return comm.allgather_init(x)


def _expected(collective, size, n):
    ranks = [np.arange(n, dtype=np.float64) + r for r in range(size)]
    return np.sum(ranks, axis=0) if collective == "allreduce" else np.concatenate(ranks)


def _kept_across_set_algorithm(comm, collective, n):
    x = np.arange(n, dtype=np.float64) + comm.rank
    req = _start(comm, collective, x)
    req.start()
    first = req.wait()
    chosen = comm.last_algorithm
    other = next(name for name in OTHERS[collective] if name != chosen)
    comm.set_algorithm(collective, other)
    seen = []
    for _ in range(3):
        req.start()
        got = req.wait()
        assert np.array_equal(got, _expected(collective, comm.size, n)), got
        seen.append(comm.last_algorithm)
    req.free()
    getattr(comm, collective)(x)  # a call made now takes the communicator's new choice
    return (chosen, seen, bool(np.array_equal(first, _expected(collective, comm.size, n))),
            comm.last_algorithm == other)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", ["inproc", "shm"])
@pytest.mark.parametrize("collective", ["allreduce", "allgather"])
def test_a_persistent_request_keeps_the_algorithm_chosen_at_init(transport, collective):
    got = collops.spawn(_kept_across_set_algorithm, 2, collective, 8, transport=transport,
                        timeout=90)
    for chosen, seen, first_right, then_other in got:
        assert first_right and then_other, got
        assert seen == [chosen] * 3, got
