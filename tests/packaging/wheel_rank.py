"""Run by `collops run -n 2` from the throw-away environment the built wheel went into: an
8-byte allreduce on the compiled path, checked against numpy, with the fallback warning an
error."""

import sys
import warnings

import numpy as np

import collops
from collops.compiled import runner_status

warnings.simplefilter("error", collops.PerformanceWarning)
assert "site-packages" in collops.__file__, f"collops imported from {collops.__file__}"
missing = [r for r in runner_status() if not r.present]
assert not missing, f"compiled runners missing from the wheel: {missing}"

comm = collops.init()
x = np.array([comm.rank + 1.5])
expected = sum(r + 1.5 for r in range(comm.size))
for _ in range(8):  # repeated calls of one signature are bound to one compiled call
    got = comm.allreduce(x)
    assert np.array_equal(got, [expected]), (got, expected)
assert comm.bound_calls().get("allreduce") == "shm_direct", comm.bound_calls()
print(f"rank {comm.rank}: {collops.__version__} compiled ok", file=sys.stdout, flush=True)
