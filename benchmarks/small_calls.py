"""Per-call times of small collectives on every rank, each call after an untimed barrier.

Usage (under the launcher): collops run -n N benchmarks/small_calls.py SIZE COLLECTIVES ITERS

``COLLECTIVES`` is a comma-separated list (barrier, gather, gatherv, allgather, allgatherv,
alltoall, alltoallv, scatter, scatterv); each is warmed up (so its signature is bound), then
timed in 5 interleaved rounds of ``ITERS`` calls with float64 buffers of ``SIZE`` bytes per
rank, as `collops bench` sizes them. Rank 0 prints one JSON line: collective → per rank
``[min, 10th percentile, median]`` in µs. On a loaded machine read the rank not left waiting
(the smaller figures): the other one's time includes its peer's wake-up. To compare two trees,
alternate their ``collops`` in the same minutes (docs/performance.md, issue 17's small calls).
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

import collops


def main() -> None:
    """Time the collectives named on the command line; rank 0 prints the JSON line."""
    size, names, iters = int(sys.argv[1]), sys.argv[2].split(","), int(sys.argv[3])
    comm = collops.init()
    p, me = comm.size, comm.rank
    count = max(size // 8 // p, 1) * p
    whole, block = np.full(count, 1.0), np.empty(count // p)
    own = np.full(max(size // 8, 1), 1.0)
    gathered = np.empty(len(own) * p)
    at_root = gathered if me == 0 else None
    exchanged = np.empty(count)
    part = count // p
    calls = {
        "barrier": comm.barrier,
        "gather": lambda: comm.gather(own, 0, out=at_root),
        "gatherv": lambda: comm.gatherv(own, 0, [len(own)] * p, out=at_root),
        "allgather": lambda: comm.allgather(own, out=gathered),
        "allgatherv": lambda: comm.allgatherv(own, [len(own)] * p, out=gathered),
        "alltoall": lambda: comm.alltoall(whole, out=exchanged),
        "alltoallv": lambda: comm.alltoallv(whole, [part] * p, recvcounts=[part] * p,
                                            out=exchanged),
        "scatter": lambda: comm.scatter(whole if me == 0 else None, 0, out=block),
        "scatterv": lambda: comm.scatterv(whole if me == 0 else None, [len(block)] * p, 0,
                                          out=block),
    }
    times: dict[str, list[float]] = {name: [] for name in names}
    for name in names:
        for _ in range(30):
            comm.barrier()
            calls[name]()
    clock = time.perf_counter
    for _ in range(5):
        for name in names:
            call, got = calls[name], times[name]
            for _ in range(iters):
                comm.barrier()
                start = clock()
                call()
                got.append(clock() - start)
    mine = {name: [float(np.min(v) * 1e6), float(np.percentile(v, 10) * 1e6),
                   float(np.median(v) * 1e6)] for name, v in times.items()}
    every = comm.gather_object(mine, 0)
    if me == 0:
        print(json.dumps({name: [rank[name] for rank in every] for name in names}), flush=True)


if __name__ == "__main__":
    main()
