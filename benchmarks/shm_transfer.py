"""Large transfers over the shared-memory transport: bulk-area shapes and single copy, interleaved.

Usage: python benchmarks/shm_transfer.py [--sizes 256K,1M,4M,16M] [--configs pipe:2x1M,cma]
                                         [--rounds 9] [--mode oneway,exchange,bcast]

Two forked ranks attach to one job per configuration and time them round-robin in the same
processes, so a burst of load from other work on the machine hits all configurations alike.
A configuration is ``pipe:NxS`` (pipelined through N chunk slots of S bytes, no single copy),
``two:NxS`` (two-ended pipelined transfer: the receiver also reading from the back),
``cma`` (single copy, the receiver reads it all) or ``split`` (single copy split between the
receiver reading from the front and the sender writing from the back). Modes:

* ``oneway``: rank 0 sends, rank 1 answers with 8 bytes (µs per message, ack included);
* ``exchange``: both ranks send to each other at once (what a 2-rank allgather or alltoall does);
* ``bcast``: rank 0 copies its buffer locally while sending it (a 2-rank broadcast's root).

Figures are medians over rounds of rank 0's mean µs per transfer (``--stat min``: the
fastest round, the cost with the least interference).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from common import parse_size, wait

from collops.runtime.launcher import launch_function
from collops.shm import segment as seg
from collops.shm.transport import ShmTransport
from collops.transport.base import Transport


def _transfer(t: Transport, mode: str, send: memoryview, recv: memoryview, local: memoryview,
              ack: memoryview, tag: int) -> None:
    other = 1 - t.rank
    if mode == "exchange":
        wait(t, [t.irecv(other, tag, recv), t.isend(other, tag, send)])
        return
    if t.rank == 0:
        h = t.isend(other, tag, send)
        if mode == "bcast":
            local[:] = send
        wait(t, [h, t.irecv(other, tag, ack)])
    else:
        wait(t, [t.irecv(other, tag, recv)])
        wait(t, [t.isend(other, tag, ack)])


def main() -> None:
    """Print µs per transfer for every configuration, size and mode."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="256K,1M,4M,16M")
    parser.add_argument("--configs", default="pipe:2x1M,two:2x1M,cma,split")
    parser.add_argument("--mode", default="oneway,exchange,bcast")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--stat", choices=["median", "min"], default="median")
    args = parser.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    names = args.configs.split(",")
    jobs, options = [], []
    for name in names:
        kind, _, shape = name.partition(":")
        count, _, chunk = shape.partition("x")
        layout = seg.Layout(2, nchunks=int(count), chunk_bytes=parse_size(chunk)) if shape \
            else seg.Layout(2)
        jobs.append(seg.create_job(2, layout)[0])
        options.append({"pipe": {"single_copy": False},
                        "two": {"single_copy": True, "single_copy_min": 1 << 62},
                        "cma": {"single_copy": True, "single_copy_min": 0},
                        "split": {"single_copy": True, "single_copy_min": 0}}[kind])

    def worker(t: Transport) -> dict[tuple[str, int, str], float]:
        ts = [ShmTransport(job, t.rank, 2, **opts) for job, opts in zip(jobs, options,
                                                                          strict=True)]
        for name, tr in zip(names, ts, strict=True):
            if name == "cma":
                tr._split_min = 1 << 62  # the receiver reads every message alone
        out: dict[tuple[str, int, str], list[float]] = {}
        tag = 0
        for mode in args.mode.split(","):
            for n in sizes:
                send = memoryview(np.ones(n, np.uint8))
                recv = memoryview(np.zeros(n, np.uint8))
                local = memoryview(np.zeros(n, np.uint8))
                ack = memoryview(np.zeros(8, np.uint8))
                iterations = max(3, min(100, (32 << 20) // n))
                for _ in range(args.rounds):
                    for name, tr in zip(names, ts, strict=True):
                        for _ in range(2):
                            tag += 1
                            _transfer(tr, mode, send, recv, local, ack, tag)
                        start = time.perf_counter()
                        for _ in range(iterations):
                            tag += 1
                            _transfer(tr, mode, send, recv, local, ack, tag)
                        out.setdefault((mode, n, name), []).append(
                            (time.perf_counter() - start) / iterations)
        for tr in ts:
            tr.close()
        stat = statistics.median if args.stat == "median" else min
        return {k: stat(v) for k, v in out.items()}

    try:
        result = launch_function(worker, 2)[0]
    finally:
        for job in jobs:
            seg.release_job(job)
    print(f"{'mode':<9} {'size':>9} " + " ".join(f"{n:>11}" for n in names))
    for mode in args.mode.split(","):
        for n in sizes:
            cells = " ".join(f"{result[(mode, n, name)] * 1e6:>11.1f}" for name in names)
            print(f"{mode:<9} {n:>9} {cells}")


if __name__ == "__main__":
    main()
