"""What the call fingerprint costs an 8-byte collective (issue target: under 2 %).

Usage: .venv/bin/python benchmarks/fingerprint_cost.py [--nprocs 2] [--iterations 20000]

Every collops call carries a 64-bit fingerprint of (collective, algorithm, root, dtype,
counts): in the header of each message on the schedule path, and on the ``shm_direct`` path
(where 8-byte calls go) in the slot's control line — the full fingerprint in one word, and
24 bits of it packed with the call number into the word readers poll anyway, so comparing
costs nothing extra. This script times, on real ranks over shared memory, (a) a blocking
8-byte allreduce and barrier, and (b) exactly the fingerprint work such a call adds to its
hot path — the store of the full fingerprint and the packing — written inline in a loop as
the hot path has it, less the same loop without it, and prints (b) as a share of (a).
Timings are medians of 5 runs of ``--iterations`` calls.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import collops
from collops.transport.shm_direct import held_word


def _time(fn, iterations: int) -> float:
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(iterations):
            fn()
        runs.append((time.perf_counter() - start) / iterations)
    return statistics.median(runs)


def _measure(comm, iterations: int) -> dict:
    x = np.ones(1)
    for _ in range(100):
        comm.allreduce(x)
        comm.barrier()
    allreduce = _time(lambda: comm.allreduce(x), iterations)
    barrier = _time(comm.barrier, iterations)
    algorithm = comm.last_algorithm
    area = comm.transport.direct_area(comm.context, tuple(comm._group))
    words = area.words
    mine = area.fps[comm.rank][0]
    fingerprint = int(words[mine]) or 1
    mix = held_word(0, fingerprint)

    def inline_work() -> float:
        """Seconds per call of the work written inline, as the hot path has it."""
        k = 12345
        start = time.perf_counter()
        for _ in range(iterations):
            words[mine] = fingerprint
            word = (k << 24) | mix
        middle = time.perf_counter()
        for _ in range(iterations):
            word = k
        end = time.perf_counter()
        del word
        return max(0.0, (middle - start) - (end - middle)) / iterations

    comm.barrier()
    work = statistics.median(inline_work() for _ in range(5))
    return {"allreduce_us": allreduce * 1e6, "barrier_us": barrier * 1e6,
            "fingerprint_us": work * 1e6, "algorithm": algorithm}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nprocs", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=20000)
    args = parser.parse_args()
    rows = collops.spawn(_measure, args.nprocs, args.iterations, transport="shm", timeout=600)
    r = rows[0]
    print(f"{args.nprocs} ranks over shm, algorithm {r['algorithm']}")
    print(f"allreduce 8 B: {r['allreduce_us']:.2f} µs; barrier: {r['barrier_us']:.2f} µs")
    print(f"fingerprint work per call: {r['fingerprint_us'] * 1000:.0f} ns = "
          f"{100 * r['fingerprint_us'] / r['allreduce_us']:.2f} % of the allreduce, "
          f"{100 * r['fingerprint_us'] / r['barrier_us']:.2f} % of the barrier")


if __name__ == "__main__":
    main()
