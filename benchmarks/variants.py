"""Collectives over differently configured shared-memory transports, interleaved.

Usage: python benchmarks/variants.py [-n 2] [--collectives bcast,allgather] [--sizes 1M,4M]
           [--rounds 11] [--iterations 10] VARIANT...

A VARIANT is ``name`` or ``name:KEY=VALUE,...``: an environment variable the transport reads
when it is created (``COLLOPS_SHM_SINGLE_COPY_MIN=0``), a field of the job's segment layout
(``nchunks=4,chunk_bytes=256K``) or, for a name starting with an underscore, an attribute set
on the transport afterwards (``_single_copy_max=0``). Every
variant is its own job, attached to by the same forked ranks, and each round times
``--iterations`` calls of every variant in turn (each call after an untimed barrier), so load
from other work on the machine hits all variants alike. Printed: the median over rounds of
the per-round mean µs (averaged over ranks), and the best round.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from typing import Any

import numpy as np
from common import environment, parse_size

from collops.bench.measure import buffers, collops_call
from collops.runtime.comm import Comm
from collops.runtime.launcher import launch_function
from collops.shm import segment as seg
from collops.shm.transport import ShmTransport
from collops.transport.base import Transport


def _transport(job: int | str, rank: int, size: int, settings: dict[str, str]) -> ShmTransport:
    env = {k: v for k, v in settings.items() if not k.startswith("_") and k not in _LAYOUT}
    with environment(env):
        t = ShmTransport(job, rank, size)
    for k, v in settings.items():
        if k.startswith("_"):
            setattr(t, k, type(getattr(t, k))(float(v)) if not isinstance(getattr(t, k), bool)
                    else v == "1")
    return t


_LAYOUT = ("nchunks", "chunk_bytes", "nslots", "slot_bytes")


def _layout(n: int, settings: dict[str, str]) -> seg.Layout:
    fields = {k: parse_size(v) for k, v in settings.items() if k in _LAYOUT}
    return dataclasses.replace(seg.Layout.for_ranks(n), **fields)


def _timed(call: Any, barrier: Any, iterations: int) -> float:
    total = 0.0
    for _ in range(iterations):
        barrier()
        start = time.perf_counter()
        call()
        total += time.perf_counter() - start
    return total / iterations


def main() -> None:
    """Print one line per (collective, size) with every variant's median and best µs."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=2)
    parser.add_argument("--collectives", default="bcast,allgather,alltoall,allreduce,reduce")
    parser.add_argument("--sizes", default="64K,1M,4M,16M")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("variants", nargs="+")
    args = parser.parse_args()
    variants: list[tuple[str, dict[str, str]]] = []
    for text in args.variants:
        name, _, rest = text.partition(":")
        variants.append((name, dict(item.split("=", 1) for item in rest.split(",") if item)))
    jobs = [seg.create_job(args.n, _layout(args.n, settings))[0] for _, settings in variants]

    def worker(t: Transport) -> list[tuple[str, int, list[list[float]], list[str]]]:
        comms = [Comm(_transport(job, t.rank, args.n, settings))
                 for job, (_, settings) in zip(jobs, variants, strict=True)]
        rows = []
        for collective in args.collectives.split(","):
            for nbytes in (parse_size(s) for s in args.sizes.split(",")):
                send, recv = buffers(collective, nbytes, args.n, t.rank)
                calls = [collops_call(c, collective, send, recv, None) for c in comms]
                for c, call in zip(comms, calls, strict=True):
                    _timed(call, c.barrier, 3)
                rounds: list[list[float]] = [[] for _ in comms]
                for _ in range(args.rounds):
                    for k, (c, call) in enumerate(zip(comms, calls, strict=True)):
                        mean = _timed(call, c.barrier, args.iterations)
                        rounds[k].append(float(c.allreduce(np.array([mean]), "sum")[0])
                                         / args.n)
                rows.append((collective, nbytes, rounds,
                             [str(c.last_algorithm) for c in comms]))
        for c in comms:
            c.transport.close()
        return rows

    try:
        rows = launch_function(worker, args.n)[0]
    finally:
        for job in jobs:
            seg.release_job(job)
    header = f"{'collective':<10} {'size':>9}"
    for name, _ in variants:
        header += f" | {name:>12} {'best':>8} {'algorithm':<14}"
    print(header)
    for collective, nbytes, rounds, algs in rows:
        line = f"{collective:<10} {nbytes:>9}"
        for r, alg in zip(rounds, algs, strict=True):
            line += f" | {statistics.median(r) * 1e6:>12.1f} {min(r) * 1e6:>8.1f} {alg:<14}"
        print(line)


if __name__ == "__main__":
    main()
