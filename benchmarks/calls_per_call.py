"""Python calls per call of a large bcast or scatter, counted rather than timed.

Usage: .venv/bin/python benchmarks/calls_per_call.py [-n 2] [--sizes 1M,4M] [--calls 200]
           [--late ROOT|READER] [--dump SHAPE:SIZE]

On real ranks over shared memory, each call of each call shape below runs under its own
cProfile after an untimed barrier; the figure is the profile's ``total_calls`` (functions
entered, Python and built-in), per rank, as the minimum and the median over ``--calls``
calls. A call that finds its peer's part in place runs only its own route: the minimum is
that route's count. A call that waits for a preempted peer adds the wait's polls, so on a
loaded machine the median grows with the load, the minimum does not. ``--late ROOT`` (or
``READER``): that side sleeps 0.5 ms after each barrier, outside the profile, so it comes
last and its count holds no wait for the other side. Shapes: ``bench`` is
`collops.bench.measure.collops_call`'s (a bcast root in place, every rank passing its own
array; a scatter's non-roots passing None), ``out`` gives ``out=``, ``noout`` does not.
``--dump bcast-bench:1M`` prints that row's functions with their calls per call. Counting
needs a quiet machine no more than timing does: it is how to compare two trees when the
machine is loaded.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import time
from typing import Any

import numpy as np
from common import parse_size

import collops

SHAPES = ("bcast-bench", "bcast-out", "bcast-noout", "scatter-bench", "scatter-noout")


def _call(comm: Any, shape: str, size: int) -> Any:
    r, p = comm.rank, comm.size
    collective, form = shape.split("-")
    n = size // 8 * (p if collective == "scatter" else 1)
    send, x = np.full(n, float(r + 1)), np.arange(float(n))
    out = np.empty(n // p if collective == "scatter" else n)
    if shape == "bcast-bench":
        return lambda: comm.bcast(send, 0, out=send if r == 0 else out)
    fn = getattr(comm, collective)
    mine = (send if form == "bench" else x) if r == 0 else None
    if form == "noout":
        return lambda: fn(mine, 0)
    return lambda: fn(mine, 0, out=out)


def _count(comm: Any, sizes: list[int], calls: int, late: int | None, dump: str | None
           ) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for size in sizes:
        for shape in SHAPES:
            call = _call(comm, shape, size)
            for _ in range(30):
                comm.barrier()
                call()
            counts, stats = [], None
            for _ in range(calls):
                comm.barrier()
                if late == comm.rank:
                    time.sleep(0.0005)
                profile = cProfile.Profile()
                profile.enable()
                call()
                profile.disable()
                counts.append(pstats.Stats(profile, stream=io.StringIO()).total_calls)
                if dump == f"{shape}:{size}":
                    stats = pstats.Stats(profile) if stats is None else stats
                    stats.add(profile)
            key = f"{shape} {size >> 20} MiB"
            rows[key] = (min(counts), statistics.median(counts), comm.last_algorithm)
            if stats is not None:
                rows[key + " calls"] = sorted(
                    ((v[1] / calls, f"{f.split('/src/')[-1]}:{line}({name})")
                     for (f, line, name), v in stats.stats.items()), reverse=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", "--nprocs", type=int, default=2)
    ap.add_argument("--sizes", default="1M,4M")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--late", choices=("ROOT", "READER"))
    ap.add_argument("--dump")
    args = ap.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    if args.dump:
        shape, size = args.dump.split(":")
        args.dump = f"{shape}:{parse_size(size)}"
    late = None if args.late is None else (0 if args.late == "ROOT" else 1)
    per_rank = collops.spawn(_count, args.nprocs, sizes, args.calls, late, args.dump,
                             transport="shm", timeout=600)
    for key in per_rank[0]:
        if key.endswith(" calls"):
            for rank, rows in enumerate(per_rank):
                print(f"rank {rank}, {key}:")
                for n, where in rows[key]:
                    print(f"  {n:8.2f}  {where}")
            continue
        cells = "  ".join(f"rank {r}: min {rows[key][0]:5d} median {rows[key][1]:7.1f}"
                          for r, rows in enumerate(per_rank))
        print(f"{key:22s} {per_rank[0][key][2]:11s} {cells}")


if __name__ == "__main__":
    main()
