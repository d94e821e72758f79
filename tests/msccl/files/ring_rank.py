"""Run by `collops run -n 3 --plugin ring_fused.xml`: the MSCCL program against numpy."""

import numpy as np

import collops

comm = collops.init()
for count in (3, 30, 3000):
    x = np.arange(count, dtype=np.float64) * (comm.rank + 1)
    got = comm.allreduce(x, algorithm="ring_fused")
    assert np.array_equal(got, np.arange(count, dtype=np.float64) * 6), got[:4]
    assert comm.last_algorithm == "ring_fused"
print(f"rank {comm.rank} ok", flush=True)
