"""Communicators that come and go: the cost of a dup, an 8-byte allreduce on it and its free,
at the first cycle and at the last of many.

Usage: .venv/bin/python benchmarks/comm_cycles.py [-n 2] [--cycles 10000] [--transport shm]
       [--algorithm NAME] [--json docs/bench/comm-cycles.json]
       .venv/bin/mpiexec -n 2 .venv/bin/python benchmarks/comm_cycles.py --transport mpi
       [--algorithm mpi_native] [--cycles 300]

(``--transport mpi`` runs under ``mpiexec``, each rank its own process; rank 0 prints.)

Each cycle is ``c = comm.dup()``, two 8-byte ``c.allreduce`` calls (the second one goes
through the runner the first bound) and ``c.free()``, each timed on its own. Printed and
recorded: the µs of each part at cycle 1 and cycle N (mean over the ranks), the median of
each part over the first and the last 100 cycles, and the runner the last cycle's second
allreduce was bound to. Nothing here decides a test.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import numpy as np

import collops

PARTS = ("dup", "first allreduce", "second allreduce", "free", "cycle")


def _cycles(comm: Any, cycles: int, algorithm: str | None = None) -> dict[str, Any]:
    times = np.empty((cycles, len(PARTS)))
    x = np.ones(1)
    bound = None
    for i in range(cycles):
        comm.barrier()
        t0 = time.perf_counter()
        c = comm.dup()
        t1 = time.perf_counter()
        if algorithm:
            c.set_algorithm("allreduce", algorithm)
        c.allreduce(x)
        t2 = time.perf_counter()
        c.allreduce(x)
        t3 = time.perf_counter()
        if i == cycles - 1:
            bound = c.bound_calls().get("allreduce")
        c.free()
        t4 = time.perf_counter()
        times[i] = (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0)
    return {"times": times.tolist(), "bound": bound}


def _parts(row: np.ndarray) -> dict[str, float]:
    return dict(zip(PARTS, np.round(row, 1).tolist(), strict=True))


def main() -> None:
    """Run the cycles on ``-n`` ranks and print (and record) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=2)
    parser.add_argument("--cycles", type=int, default=10_000)
    parser.add_argument("--transport", default="shm", choices=["shm", "inproc", "mpi"])
    parser.add_argument("--algorithm", help="the allreduce's algorithm (default: selection's)")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    if args.transport == "mpi":  # under mpiexec: this process is one rank
        comm = collops.init()
        got = comm.gather_object(_cycles(comm, args.cycles, args.algorithm), 0)
        args.n = comm.size
        if comm.rank != 0:
            return
    else:
        got = collops.spawn(_cycles, args.n, args.cycles, args.algorithm,
                            transport=args.transport, timeout=3600)
    times = np.mean([np.asarray(r["times"]) for r in got], axis=0) * 1e6
    window = min(100, args.cycles)
    record = {
        "transport": args.transport, "ranks": args.n, "cycles": args.cycles,
        "algorithm": args.algorithm,
        "load average": [round(v, 1) for v in os.getloadavg()],
        "bound": [r["bound"] for r in got],
        "cycle 1 us": _parts(times[0]),
        f"cycle {args.cycles} us": _parts(times[-1]),
        f"median first {window} us": _parts(np.median(times[:window], axis=0)),
        f"median last {window} us": _parts(np.median(times[-window:], axis=0)),
    }
    text = json.dumps(record, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
