"""Run by `collops run --plugin user_ring.py`: the plug-in's allgather against numpy."""

import numpy as np

import collops

comm = collops.init()
for count in (1, 5, 1000):
    x = np.arange(count, dtype=np.float64) + 100 * comm.rank
    got = comm.allgather(x, algorithm="user_ring")
    want = np.concatenate([np.arange(count, dtype=np.float64) + 100 * r for r in range(comm.size)])
    assert np.array_equal(got.reshape(-1), want), (got, want)
    assert comm.last_algorithm == "user_ring", comm.last_algorithm
comm.set_algorithm("allgather", "user_ring")
assert np.array_equal(comm.allgather(np.array([comm.rank])).reshape(-1), np.arange(comm.size))
assert comm.last_algorithm == "user_ring"
print(f"rank {comm.rank} ok", flush=True)
