"""Calls beside the blocking fast path: in place and non-blocking, against the plain call.

Usage: .venv/bin/python benchmarks/off_fast_path.py [-n 2] [--sizes 8,1M,4M] [--iterations 200]

On real ranks over shared memory, per size (bytes per rank), the mean µs of
``allreduce(x, out=y)`` against ``allreduce(x, out=x)`` (MPI_IN_PLACE) and
``iallreduce(x, out=y).wait()``, and of ``allgather(x, out=y)`` against an allgather whose
``x`` is its own block of ``out``; each call after an untimed barrier, as `collops bench`
times. Averaged over ranks. The in-place calls start from the same values every time (a
copy outside the timing), so a sum cannot overflow.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
from common import parse_size

import collops


def _timed(comm: Any, call: Any, reset: Any, iterations: int) -> float:
    total = 0.0
    for i in range(iterations + 5):
        reset()
        comm.barrier()
        start = time.perf_counter()
        call()
        if i >= 5:
            total += time.perf_counter() - start
    return total / iterations


def _row(comm: Any, size: int, iterations: int) -> dict[str, float]:
    """Mean seconds of each form at ``size`` bytes per rank on this rank."""
    p, me = comm.size, comm.rank
    n = max(1, size // 8)
    x, y, fresh = np.ones(n), np.empty(n), np.ones(n)
    out = np.empty(n * p)
    mine = out[me * n:(me + 1) * n]

    def nothing() -> None:
        pass

    def refill() -> None:
        x[...] = fresh

    def own_block() -> None:
        mine[...] = fresh

    forms = {
        "allreduce": (lambda: comm.allreduce(x, "sum", out=y), nothing),
        "allreduce in place": (lambda: comm.allreduce(x, "sum", out=x), refill),
        "iallreduce.wait": (lambda: comm.iallreduce(x, "sum", out=y).wait(), nothing),
        "allgather": (lambda: comm.allgather(fresh, out=out), nothing),
        "allgather in place": (lambda: comm.allgather(mine, out=out), own_block),
    }
    return {name: _timed(comm, call, reset, iterations) for name, (call, reset) in forms.items()}


def _rank(comm: Any, sizes: list[int], iterations: int) -> dict[int, dict[str, float]]:
    return {size: _row(comm, size, iterations) for size in sizes}


def main() -> None:
    """Print one line per size: mean µs of each form, averaged over ranks."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=2)
    parser.add_argument("--sizes", default="8,1M,4M")
    parser.add_argument("--iterations", type=int, default=200)
    args = parser.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    per_rank = collops.spawn(_rank, args.n, sizes, args.iterations, transport="shm")
    columns = list(per_rank[0][sizes[0]])
    print(f"{'bytes':>9} " + " ".join(f"{c:>19}" for c in columns))
    for size in sizes:
        means = [np.mean([r[size][c] for r in per_rank]) * 1e6 for c in columns]
        print(f"{size:>9} " + " ".join(f"{m:>19.1f}" for m in means))


if __name__ == "__main__":
    main()
