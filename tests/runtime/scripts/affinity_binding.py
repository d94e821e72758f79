"""Run by test_affinity_binding under `collops run --bind-to …`: the affinity tree's domains
come from the ranks' real CPUs when they are bound, from the stand-in machine otherwise."""

import json
import os
import sys

import numpy as np

import collops
from collops.topology.machine import detect_machine

comm = collops.init()
x = np.arange(6, dtype=np.float64) * (comm.rank + 1)
got = comm.allreduce(x, algorithm="affinity_tree")
assert np.array_equal(got, np.arange(6.0) * sum(range(1, comm.size + 1))), got
half = comm.split(comm.rank % 2)  # a sub-communicator: its ranks' own CPUs
y = half.allreduce(np.array([comm.rank], dtype=np.int64), algorithm="affinity_tree")
assert y[0] == sum(r for r in range(comm.size) if r % 2 == comm.rank % 2)
if comm.rank == 0:
    machine, thread_of = detect_machine()
    print(json.dumps({"binding": os.environ.get("COLLOPS_BINDING", ""),
                      "facts": comm.supplied_facts(), "half": half.supplied_facts(),
                      "machine": "x".join(map(str, machine.shape)),
                      "thread_of": {str(k): v for k, v in thread_of.items()},
                      "explain": comm.explain("allreduce", x,
                                              algorithm="affinity_tree").splitlines()[-1]}),
          flush=True)
sys.exit(0)
