"""Run by test_plugins in a process of its own: load the plug-in named in argv, then check the
algorithm on threads against numpy, its record, and the endpoints' lists."""

import sys

import numpy as np

import collops
from collops.algorithms.registry import get_algorithm
from collops.endpoints import algorithm_lists
from collops.endpoints.catalog import CONTIGUOUS
from collops.endpoints.xfer import spec_of

path = sys.argv[1]
collops.load_plugin(path)
collops.load_plugin(path)  # loading twice is once


def body(comm):
    x = np.arange(7, dtype=np.int64) * (comm.rank + 1)
    got = comm.allgather(x, algorithm="user_ring")
    return comm.last_algorithm, got


want = np.concatenate([np.arange(7, dtype=np.int64) * (r + 1) for r in range(3)])
for name, got in collops.spawn(body, 3):
    assert name == "user_ring", name
    assert np.array_equal(np.asarray(got).reshape(-1), want), got

alg = get_algorithm("allgather", "user_ring")
assert alg.origin == path, alg.origin
schedules = alg.build_all(collops.make_spec("allgather", 4, np.float64, count=3))
assert all(isinstance(s, collops.Schedule) for s in schedules)

lists = algorithm_lists("allgather", frozenset({CONTIGUOUS}), lambda x: spec_of(x, 4))
assert "user_ring" in {e.name for e in (*lists.always, *lists.must_query)}
print("ok")
