"""Rank 2 raises; the others wait in a barrier that can never complete."""

import numpy as np

import collops

comm = collops.init()
comm.allreduce(np.ones(4))
if comm.rank == 2:
    raise RuntimeError("rank two gives up")
comm.barrier()
