"""Per rank, under ``mpiexec``: collops' ``mpi_native`` bcast and mpi4py's ``Bcast``, each
timed after MPI's barrier and after collops' barrier, in interleaved blocks of one process.

Usage: .venv/bin/mpiexec -n 2 .venv/bin/python benchmarks/mpi_bcast_barriers.py [--size 8]
       [--blocks 8] [--calls 500]

Each block times ``--calls`` calls of each of the four pairs (call, barrier before it), each
call after its own untimed barrier; each rank prints the median µs of every pair over all
blocks but the first. ``collops bench`` times collops after collops' barrier and MPI after
MPI's: this shows what the barrier alone moves. Nothing here decides a test.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import collops


def main() -> None:
    """Time the four pairs on this rank and print their medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=8, help="bytes broadcast")
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    from mpi4py import MPI
    comm, world = collops.init(), MPI.COMM_WORLD
    n = max(1, args.size // 8)
    x, out = np.zeros(n), np.zeros(n)
    into = x if comm.rank == 0 else out

    def ours() -> Any:
        return comm.bcast(x, 0, out=into, algorithm="mpi_native")

    def theirs() -> Any:
        return world.Bcast(into, 0)

    pairs: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
        "collops after collops' barrier": (ours, comm.barrier),
        "mpi4py after MPI's barrier": (theirs, world.Barrier),
        "collops after MPI's barrier": (ours, world.Barrier),
        "mpi4py after collops' barrier": (theirs, comm.barrier),
    }
    times: dict[str, list[float]] = {name: [] for name in pairs}
    clock = time.perf_counter
    for block in range(args.blocks):
        for name, (call, barrier) in pairs.items():
            for _ in range(args.calls):
                barrier()
                start = clock()
                call()
                if block:
                    times[name].append(clock() - start)
    medians = {name: round(float(np.median(t)) * 1e6, 3) for name, t in times.items()}
    print(json.dumps({"rank": comm.rank, "size": args.size, "median_us": medians}), flush=True)


if __name__ == "__main__":
    main()
