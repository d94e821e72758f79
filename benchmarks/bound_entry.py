"""What a bound 8-byte barrier and bcast cost through the public method and through `_fast`.

Usage: .venv/bin/python benchmarks/bound_entry.py [--nprocs 2] [--blocks 40] [--per 100]
           [--json FILE]

`Comm.barrier` and `Comm.bcast` call the compiled runner bound to their last signature
themselves; before, they went through `Comm._fast` (and `_call_bound`), which other
collectives still take; "barrier, wrapped" is the lambda with ``**{}`` through which
`collops bench` timed the barrier before. One shared-memory job alternates blocks of
``--per`` calls of each route, every call timed on its own after an untimed barrier as
`collops bench` times it, and prints, per route, the minimum, first quartile and median over
the blocks of the mean over the ranks (the minimum is the figure to read on a loaded
machine: the blocks no other job interrupted).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import numpy as np

import collops
from collops.runtime.comm import _BARRIER_TOKEN


def _routes(comm: Any) -> dict[str, Any]:
    x, r = np.ones(1), np.empty(1)
    out = x if comm.rank == 0 else r  # in place at the root, as collops bench does
    no_params: dict[str, Any] = {}
    return {
        "barrier, method": comm.barrier,
        # how `collops bench` wrapped it before timing the method itself
        "barrier, wrapped": lambda: comm.barrier(**no_params),
        "barrier, _fast": lambda: comm._fast("barrier", _BARRIER_TOKEN, None, 0, None, None,
                                             None),
        "bcast, method": lambda: comm.bcast(x, 0, out=out),
        "bcast, _fast": lambda: comm._fast("bcast", x, None, 0, out, None, None),
    }


def _blocks(comm: Any, blocks: int, per: int) -> dict[str, list[float]]:
    routes, clock = _routes(comm), time.perf_counter
    for call in routes.values():
        for _ in range(1000):
            comm.barrier()
            call()
    found: dict[str, list[float]] = {name: [] for name in routes}
    for _ in range(blocks):
        for name, call in routes.items():
            total = 0.0
            for _ in range(per):
                comm.barrier()
                start = clock()
                call()
                total += clock() - start
            found[name].append(total / per * 1e6)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nprocs", type=int, default=2)
    parser.add_argument("--blocks", type=int, default=40)
    parser.add_argument("--per", type=int, default=100)
    parser.add_argument("--json")
    args = parser.parse_args()
    load = open("/proc/loadavg").read().split()[:3]
    ranks = collops.spawn(_blocks, args.nprocs, args.blocks, args.per, transport="shm")
    rows = {}
    for name in ranks[0]:
        means = [statistics.fmean(r[name][b] for r in ranks) for b in range(args.blocks)]
        rows[name] = {"min_us": min(means), "p25_us": statistics.quantiles(means, n=4)[0],
                      "median_us": statistics.median(means)}
        print(f"{name:16s} " + "  ".join(f"{k} {v:8.3f}" for k, v in rows[name].items()))
    after = open("/proc/loadavg").read().split()[:3]
    print(f"load average {load} → {after}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"nprocs": args.nprocs, "blocks": args.blocks, "per": args.per,
                       "load_before": load, "load_after": after, "routes": rows}, f, indent=1)


if __name__ == "__main__":
    main()
