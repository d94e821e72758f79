"""Median per-call time of blocking rooted calls, robust to a loaded machine.

Usage: .venv/bin/python benchmarks/rooted_medians.py NPROCS OUT.json [--iterations 1000]
           [--collectives bcast,scatter] [--sizes 8,65536,1048576]

Each rank times blocking calls with an untimed barrier before each (as `collops bench`
does) at 8 B, 64 KiB and 1 MiB per rank, and keeps the median over the calls: preemptions by
other work move a mean by orders of magnitude but a median little. The record holds, per call
and size, the slowest rank's median and the root's (gather and reduce: the rooted calls whose
non-roots receive nothing, root 0 as for the others).
"""

from __future__ import annotations

import argparse
import functools
import json

import numpy as np
from common import timed_calls

import collops

SIZES = (8, 65536, 1 << 20)


def _medians(comm, iterations: int, collectives: list[str], sizes: list[int]
             ) -> dict[str, float]:
    out = {}
    for collective in collectives:
        for size in sizes:
            n = size // 8
            x = np.ones(n * (comm.size if collective == "scatter" else 1))
            call = (functools.partial(comm.reduce, x, "sum", 0) if collective == "reduce"
                    else functools.partial(getattr(comm, collective), x, 0))
            marks = np.array(timed_calls(comm, call, iterations, warmup=30))
            out[f"{collective} {size}"] = float(np.median(marks[:, 1] - marks[:, 0]) * 1e6)
    return out


def main() -> None:
    """Write the medians of every rank's calls to OUT."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("nprocs", type=int)
    parser.add_argument("out")
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--collectives", default="bcast,scatter")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    args = parser.parse_args()
    per_rank = collops.spawn(_medians, args.nprocs, args.iterations,
                             args.collectives.split(","), [int(s) for s in args.sizes.split(",")],
                             transport="shm", timeout=1200)
    record = {key: {"slowest_rank_median_us": max(r[key] for r in per_rank),
                    "root_median_us": per_rank[0][key]} for key in per_rank[0]}
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
