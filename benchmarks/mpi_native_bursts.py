"""Per-call cost of collops' blocking ``mpi_native`` calls against mpi4py's direct call.

Usage: mpiexec -n 2 python benchmarks/mpi_native_bursts.py [--size 8] [--bursts 200]
           [--collectives barrier,bcast,allreduce,allgather,alltoall,reduce] [--rank 0]
           [--json FILE]

For each collective, bursts of 20 consecutive calls through collops' own API (with
``mpi_native`` set on the communicator, so the bound whole call runs) and through mpi4py on a
duplicate of the transport's MPI communicator alternate, each after an MPI barrier; rank 0
(``--rank``: that rank) prints the minimum and the median over the bursts of the time per
call. Rank 0 is the root of bcast and reduce, whose MPI calls return there after an eager
send (bcast) or wait for the data (reduce); ``--rank 1`` shows a reader's side. The minimum filters
out the bursts during which a process was descheduled, so on a loaded machine it is the
figure to compare (the median shows the load).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

import collops

BURST = 20
COLLECTIVES = ("barrier", "bcast", "allreduce", "allgather", "alltoall", "reduce")


def call_pairs(comm: Any, mc: Any, count: int) -> dict[str, tuple[Callable[[], Any], ...]]:
    """collective -> (collops' call, mpi4py's call) on ``count`` doubles per rank."""
    x, y = np.ones(count), np.empty(count)
    xa, ya = np.ones(count * comm.size), np.empty(count * comm.size)
    root_buf = x if comm.rank == 0 else y  # in place at the root, as MPI_Bcast
    reduced = y if comm.rank == 0 else None
    return {
        "barrier": (comm.barrier, mc.Barrier),
        "bcast": (lambda: comm.bcast(x, 0, out=root_buf), lambda: mc.Bcast(root_buf, 0)),
        "allreduce": (lambda: comm.allreduce(x, out=y), lambda: mc.Allreduce(x, y)),
        "allgather": (lambda: comm.allgather(x, out=ya), lambda: mc.Allgather(x, ya)),
        "alltoall": (lambda: comm.alltoall(xa, out=ya), lambda: mc.Alltoall(xa, ya)),
        "reduce": (lambda: comm.reduce(x, root=0, out=reduced),
                   lambda: mc.Reduce(x, reduced, MPI.SUM, 0)),
    }


def measure(comm: Any, mc: Any, collective: str, calls: tuple[Callable[[], Any], ...],
            bursts: int) -> dict[str, dict[str, float]]:
    """Minimum and median µs per call over ``bursts`` bursts of each side, alternating."""
    comm.set_algorithm(collective, "mpi_native")
    for _ in range(50):  # the signature bound, MPI's communicators made
        for call in calls:
            call()
    times: dict[str, list[float]] = {"collops": [], "mpi4py": []}
    for _ in range(bursts):
        for name, call in zip(times, calls, strict=True):
            mc.Barrier()
            start = time.perf_counter()
            for _ in range(BURST):
                call()
            times[name].append((time.perf_counter() - start) / BURST * 1e6)
    return {name: {"min": min(v), "median": float(np.median(v))} for name, v in times.items()}


def main() -> None:
    """Measure and print (rank 0) the table and, with ``--json``, the record."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=8, help="bytes per rank (doubles)")
    parser.add_argument("--bursts", type=int, default=200)
    parser.add_argument("--collectives", default=",".join(COLLECTIVES))
    parser.add_argument("--rank", type=int, default=0, help="the rank that reports")
    parser.add_argument("--json")
    args = parser.parse_args()
    comm = collops.init()
    mc = comm.transport.comm.Dup()  # type: ignore[attr-defined]
    pairs = call_pairs(comm, mc, max(1, args.size // 8))
    result = {c: measure(comm, mc, c, pairs[c], args.bursts)
              for c in args.collectives.split(",")}
    mc.Free()
    if comm.rank != args.rank:
        return
    record = {"size": args.size, "rank": args.rank,
              "loadavg": open("/proc/loadavg").read().split()[:3], "calls": result}
    for c, sides in result.items():
        ours, theirs = sides["collops"], sides["mpi4py"]
        print(f"{c:10s} collops {ours['min']:7.2f} µs (median {ours['median']:7.2f})  "
              f"mpi4py {theirs['min']:7.2f} (median {theirs['median']:7.2f})  "
              f"ratio of minima {ours['min'] / theirs['min']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
