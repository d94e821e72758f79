"""Ping-pong over the shared-memory transport: µs per 8-byte round trip, GB/s for large messages.

Usage: python benchmarks/shm_pingpong.py [--iterations N] [--sizes 1M,16M] [--no-single-copy]

Two forked ranks; rank 0 sends, rank 1 answers with a message of the same size. Bandwidth is
bytes moved one way divided by half a round trip, as OSU's osu_latency / osu_bw do it.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from common import parse_size, wait

from collops.runtime.launcher import launch_function
from collops.transport.base import Transport


def round_trip_seconds(t: Transport, nbytes: int, iterations: int) -> float:
    """Mean seconds per round trip of ``nbytes`` (measured on rank 0)."""
    other = 1 - t.rank
    send = memoryview(np.ones(nbytes, dtype=np.uint8))
    recv = memoryview(np.empty(nbytes, dtype=np.uint8))
    warmup = max(3, iterations // 10)
    start = 0.0
    for i in range(warmup + iterations):
        if i == warmup:
            start = time.perf_counter()
        if t.rank == 0:
            h = t.isend(other, i, send)
            r = t.irecv(other, i, recv)
            wait(t, [h, r])
        else:
            r = t.irecv(other, i, recv)
            wait(t, [r])
            wait(t, [t.isend(other, i, send)])
    return (time.perf_counter() - start) / iterations


def main() -> None:
    """Print the latency and bandwidth table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=20000)
    parser.add_argument("--sizes", default="64K,1M,16M")
    parser.add_argument("--no-single-copy", action="store_true")
    args = parser.parse_args()
    if args.no_single_copy:
        os.environ["COLLOPS_SHM_SINGLE_COPY"] = "0"
    sizes = [parse_size(s) for s in args.sizes.split(",")]

    def worker(t: Transport) -> list[float]:
        rows = [round_trip_seconds(t, 8, args.iterations)]
        rows += [round_trip_seconds(t, n, max(10, min(1000, (64 << 20) // n))) for n in sizes]
        return rows

    rows = launch_function(worker, 2)[0]
    print(f"8 B: {rows[0] * 1e6:.2f} µs per round trip, {rows[0] * 5e5:.2f} µs one way")
    for n, seconds in zip(sizes, rows[1:], strict=True):
        print(f"{n / (1 << 20):g} MiB: {n / (seconds / 2) / 1e9:.2f} GB/s "
              f"({seconds * 1e6:.0f} µs per round trip)")


if __name__ == "__main__":
    main()
