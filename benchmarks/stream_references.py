"""shm_stream's blocks through the rings against the same blocks by reference (single copy).

Usage: python benchmarks/stream_references.py [-n 2] [--collectives allgather,bcast]
           [--sizes 1M,4M,16M] [--rounds 2] [--layout fresh|heap]

Each mode is its own job (`collops.spawn`), rings and references alternating ``--rounds``
times; each prints the mean µs per call (the slowest rank's, OSU-style iterations after an
untimed barrier) and the table keeps every mode's best. ``--layout heap`` first allocates
and frees the buffers a `collops bench` run's earlier rows would have, so the measured
buffers come from the heap, 16 bytes apart modulo 4 KiB (the aliased case the compiled
loop reads through a bounce buffer); ``fresh`` measures buffers glibc maps on their own.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
from common import parse_size

import collops
from collops.bench.measure import buffers, collops_call, time_iterations
from collops.shm import stream as shm_stream
from collops.shm import stream_plan


def _measure(comm: Any, mode: str, collectives: list[str], sizes: list[int],
             layout: str) -> dict[tuple[str, int], float]:
    # every block by reference, or none
    stream_plan.by_reference = lambda spec: mode == "reference"  # type: ignore[assignment]
    out = {}
    for c in collectives:
        for size in sizes:
            if layout == "heap":
                for s in (1 << 20, 4 << 20, 16 << 20):
                    a, b = buffers(c, s, comm.size, comm.rank)
                    del a, b
            send, recv = buffers(c, size, comm.size, comm.rank)
            call = collops_call(comm, c, send, recv, shm_stream.NAME)
            t = time_iterations(call, comm.barrier, 30 if size < 8 << 20 else 10, 5)
            out[(c, size)] = float(comm.allreduce(np.array([t]), "max")[0])
    return out


def main() -> None:
    """Run both modes alternately and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=2)
    ap.add_argument("--collectives", default="allgather,bcast")
    ap.add_argument("--sizes", default="1M,4M,16M")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--layout", choices=("fresh", "heap"), default="fresh")
    args = ap.parse_args()
    collectives = args.collectives.split(",")
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    best: dict[tuple[str, str, int], float] = {}
    for _ in range(args.rounds):
        for mode in ("ring", "reference"):
            got = collops.spawn(_measure, args.n, mode, collectives, sizes, args.layout,
                                transport="shm", timeout=600)[0]
            for (c, size), t in got.items():
                key = (mode, c, size)
                best[key] = min(best.get(key, t), t)
    print(f"{'collective':14s} {'bytes':>9s} {'ring µs':>9s} {'reference µs':>13s} ratio")
    for c in collectives:
        for size in sizes:
            a, b = best[("ring", c, size)], best[("reference", c, size)]
            print(f"{c:14s} {size:9d} {a * 1e6:9.0f} {b * 1e6:13.0f} {b / a:5.2f}")


if __name__ == "__main__":
    main()
