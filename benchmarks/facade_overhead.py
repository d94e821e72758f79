"""The per-call cost of ``collops.MPI`` over collops' own API, both measured in the same run.

Usage: .venv/bin/python benchmarks/facade_overhead.py [--nprocs 2] [--rounds 15]
           [--iterations 2000] [--bytes 8] [--json docs/bench/facade_overhead.json]

Runs a shared-memory job (`collops.spawn`, ``transport="shm"``). Each round times
``--iterations`` calls of each pair — ``comm.Allreduce(x, r, op=MPI.SUM)`` (numpy arrays),
``comm.Allreduce([x, MPI.DOUBLE], [r, MPI.DOUBLE], MPI.SUM)`` and ``comm.Bcast(x)`` through the
facade, against ``c.allreduce(x, out=r)`` and ``c.bcast(x, out=x)`` — alternating which side
goes first, so a burst of load on the machine lands on both. It prints the medians over rounds
of the per-call time (rank 0) and of the per-round difference facade − own API.

On a loaded machine those medians swing by far more than the facade costs, so it also measures
the facade's own dispatch alone (``--dispatch``): the same calls in one process on a
communicator stand-in whose methods return at once, against calling the stand-in directly;
the minimum over ``--rounds`` repeats of ``--iterations`` calls each (the minimum filters out
the time the process was not running). The difference is what the facade adds to every call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import numpy as np


def _time(call: Any, iterations: int) -> float:
    start = time.perf_counter()
    for _ in range(iterations):
        call()
    return (time.perf_counter() - start) / iterations


def _rank(comm: Any, rounds: int, iterations: int, nbytes: int) -> dict[str, Any]:
    from collops import MPI
    from collops.facade.comm import wrap

    facade = wrap(comm)
    x = np.ones(max(1, nbytes // 8))
    r = np.empty_like(x)
    pairs = {
        "Allreduce(ndarray)": (lambda: facade.Allreduce(x, r, op=MPI.SUM),
                               lambda: comm.allreduce(x, out=r)),
        "Allreduce([buf, DOUBLE])": (
            lambda: facade.Allreduce([x, MPI.DOUBLE], [r, MPI.DOUBLE], MPI.SUM),
            lambda: comm.allreduce(x, out=r)),
        "Bcast(ndarray)": (lambda: facade.Bcast(x, 0), lambda: comm.bcast(x, 0, out=x)),
    }
    out: dict[str, Any] = {}
    for name, (through_facade, own) in pairs.items():
        for _ in range(200):  # warm up: prepared calls, compiled runners bound
            through_facade()
            own()
        facade_times, own_times = [], []
        for k in range(rounds):
            comm.barrier()
            if k % 2:
                own_times.append(_time(own, iterations))
                facade_times.append(_time(through_facade, iterations))
            else:
                facade_times.append(_time(through_facade, iterations))
                own_times.append(_time(own, iterations))
        out[name] = {
            "facade_us": statistics.median(facade_times) * 1e6,
            "own_api_us": statistics.median(own_times) * 1e6,
            "overhead_us": statistics.median(f - o for f, o in
                                             zip(facade_times, own_times, strict=True)) * 1e6,
        }
    return out


class _StandIn:
    """A communicator whose collectives return at once (what is left is the caller's cost)."""

    rank, size = 0, 2

    def allreduce(self, x: Any, op: Any = None, *, out: Any = None) -> Any:
        return out

    def bcast(self, x: Any, root: int = 0, *, out: Any = None) -> Any:
        return out


def dispatch(rounds: int, iterations: int, nbytes: int) -> dict[str, Any]:
    """The facade's dispatch cost per call, from the minimum over rounds (see the docstring)."""
    import timeit

    from collops import MPI
    from collops.facade.comm import wrap

    comm = _StandIn()
    facade = wrap(comm)
    x = np.ones(max(1, nbytes // 8))
    r = np.empty_like(x)
    sx, sr = [x, MPI.DOUBLE], [r, MPI.DOUBLE]  # the specs, made once as a program may
    pairs = {
        "Allreduce(ndarray)": (lambda: facade.Allreduce(x, r, op=MPI.SUM),
                               lambda: comm.allreduce(x, MPI.SUM.op, out=r)),
        "Allreduce([buf, DOUBLE])": (
            lambda: facade.Allreduce(sx, sr, MPI.SUM),
            lambda: comm.allreduce(x, MPI.SUM.op, out=r)),
        "Bcast(ndarray)": (lambda: facade.Bcast(x, 0), lambda: comm.bcast(x, 0, out=x)),
    }
    out = {}
    for name, (through_facade, own) in pairs.items():
        f = min(timeit.repeat(through_facade, number=iterations, repeat=rounds)) / iterations
        o = min(timeit.repeat(own, number=iterations, repeat=rounds)) / iterations
        out[name] = {"facade_us": f * 1e6, "direct_us": o * 1e6, "added_us": (f - o) * 1e6}
    return out


def main() -> None:
    """Print the medians, and write them as JSON if asked."""
    import collops

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nprocs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--bytes", type=int, default=8)
    parser.add_argument("--json", default=None)
    parser.add_argument("--dispatch", action="store_true",
                        help="measure only the facade's dispatch, in this process")
    args = parser.parse_args()
    added = dispatch(max(args.rounds, 5) * 20, args.iterations, args.bytes)
    for name, row in added.items():
        print(f"{name:28s} dispatch: facade {row['facade_us']:6.3f} us, direct "
              f"{row['direct_us']:6.3f} us, added {row['added_us']:+6.3f} us")
    if args.dispatch:
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"command": "benchmarks/facade_overhead.py --dispatch --rounds "
                           f"{args.rounds} --iterations {args.iterations}", "dispatch": added},
                          f, indent=2)
                f.write("\n")
        return
    results = collops.spawn(_rank, args.nprocs, args.rounds, args.iterations, args.bytes,
                            transport="shm", timeout=600)
    rank0 = results[0]
    for name, row in rank0.items():
        print(f"{name:28s} facade {row['facade_us']:7.3f} us   own API {row['own_api_us']:7.3f} us"
              f"   overhead {row['overhead_us']:+7.3f} us")
    if args.json:
        record = {"command": "benchmarks/facade_overhead.py " + " ".join(
                      f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()
                      if k != "json" and v is not None),
                  "nprocs": args.nprocs, "bytes": args.bytes, "rounds": args.rounds,
                  "iterations": args.iterations, "rank0": rank0, "dispatch": added}
        with open(args.json, "w") as f:
            json.dump(record, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
