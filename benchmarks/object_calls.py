"""Per-call cost of the object collectives, against an older `runtime/objects.py`, in one run.

Usage: .venv/bin/python benchmarks/object_calls.py [--nprocs 1] [--rounds 5]
           [--iterations 2000] [--before FILE] [--entry] [--barrier] [--json FILE]

Runs a shared-memory job (`collops.spawn`, ``transport="shm"``) and times each object call of
`collops bench` (mpi4py's arguments: ``allreduce_object(1)``, ``bcast_object({"a": 1})``…) on
rank 0: the median over ``--rounds`` of ``--iterations`` calls of the CPU time (thread time:
what the call itself costs, even on a loaded machine) and of the wall time per call.
``--before FILE`` (an older ``objects.py``, e.g. ``git show f694e39:src/collops/runtime/objects.py
> /tmp/objects_before.py``) alternates it with the installed one in every round, bound as
``Comm``'s methods. On one rank (the default) nothing waits for a peer, so the CPU time is the
call's own work. ``--barrier`` (with ``--nprocs`` 2 or more) times each call after an untimed
barrier, as `collops bench` does, and gives the wall time as the mean over the ranks: the two
versions' protocols side by side in one job.

``--entry`` instead times the 8-byte regular collectives (barrier, bcast, allreduce,
allgather, alltoall, reduce): the whole method against its bound compiled call alone, so the
difference is the Python entry around the compiled call.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import collops
from collops.bench.measure import OBJECT_CALLS, object_call


def _times(call: Callable[[], Any], iterations: int,
           barrier: Callable[[], Any] | None = None) -> tuple[float, float]:
    """CPU and wall µs per call of ``iterations`` calls (with ``barrier``: each call after
    an untimed barrier, as `collops bench` times it, and the CPU time then includes the
    barriers')."""
    if barrier is not None:
        clock, wall = time.perf_counter, 0.0
        cpu = time.thread_time()
        for _ in range(iterations):
            barrier()
            start = clock()
            call()
            wall += clock() - start
        return (time.thread_time() - cpu) / iterations * 1e6, wall / iterations * 1e6
    cpu, start = time.thread_time(), time.perf_counter()
    for _ in range(iterations):
        call()
    return ((time.thread_time() - cpu) / iterations * 1e6,
            (time.perf_counter() - start) / iterations * 1e6)


def _objects(comm: Any, rounds: int, iterations: int, before: str | None,
             timed_alone: bool = False) -> dict[str, Any]:
    from collops.runtime import comm as comm_module
    from collops.runtime import objects

    variants = {"now": objects}
    if before:
        spec = importlib.util.spec_from_file_location("collops.runtime.objects_before", before)
        assert spec is not None and spec.loader is not None
        variants["before"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(variants["before"])
    out: dict[str, Any] = {}
    for name in OBJECT_CALLS:
        samples: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
        for _ in range(rounds):
            for label, module in variants.items():
                for method in OBJECT_CALLS:
                    setattr(comm_module.Comm, method, getattr(module, method))
                call = object_call(comm, name)
                _times(call, 50)
                comm.barrier()
                samples[label].append(_times(call, iterations,
                                             comm.barrier if timed_alone else None))
                comm.barrier()
        out[name] = {label: {"cpu_us": statistics.median(s[0] for s in got),
                             "wall_us": statistics.median(s[1] for s in got)}
                     for label, got in samples.items()}
    for method in OBJECT_CALLS:
        setattr(comm_module.Comm, method, getattr(objects, method))
    return out


def _entry(comm: Any, rounds: int, iterations: int) -> dict[str, Any]:
    p = comm.size
    x, y, token = np.ones(p), np.ones(p), np.empty(0, np.uint8)
    calls: dict[str, tuple[Callable[[], Any], tuple[Any, Any]]] = {
        "barrier": (comm.barrier, (token, None)),
        "bcast": (lambda: comm.bcast(x, 0, out=y), (x, y)),
        "allreduce": (lambda: comm.allreduce(x), (x, None)),
        "allgather": (lambda: comm.allgather(x[:1]), (x[:1], None)),
        "alltoall": (lambda: comm.alltoall(x), (x, None)),
        "reduce": (lambda: comm.reduce(x), (x, None)),
    }
    out: dict[str, Any] = {}
    for name, (call, args) in calls.items():
        _times(call, 200)
        hot = comm._bound_calls.get(name)
        method, bound = [], []
        for _ in range(rounds):
            comm.barrier()
            method.append(_times(call, iterations)[0])
            if hot is not None:
                comm.barrier()
                bound.append(_times(functools.partial(hot[2], *args, None), iterations)[0])
        out[name] = {"method_cpu_us": statistics.median(method),
                     "bound_cpu_us": statistics.median(bound) if bound else None}
    return out


def _body(comm: Any, entry: bool, rounds: int, iterations: int, before: str | None,
          timed_alone: bool) -> Any:
    if entry:
        return _entry(comm, rounds, iterations)
    return _objects(comm, rounds, iterations, before, timed_alone)


def main() -> None:
    """Parse the arguments, run the job, print and save the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nprocs", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--before", default=None)
    parser.add_argument("--entry", action="store_true")
    parser.add_argument("--barrier", action="store_true",
                        help="time each call alone, after an untimed barrier, and give the "
                             "wall time as the mean over the ranks (as collops bench does)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    load = open("/proc/loadavg").read().split()[:3]
    ranks = collops.spawn(_body, args.nprocs, args.entry, args.rounds, args.iterations,
                          args.before, args.barrier, transport="shm", timeout=1800)
    got = ranks[0]
    if args.barrier and not args.entry:
        for name, row in got.items():
            for label, cell in row.items():
                cell["wall_us"] = statistics.fmean(r[name][label]["wall_us"] for r in ranks)
    for name, row in got.items():
        print(name, json.dumps(row))
    record = {"command": "benchmarks/object_calls.py", "args": vars(args),
              "loadavg_before": load, "loadavg_after": open("/proc/loadavg").read().split()[:3],
              "rank0": got}
    print("load average", record["loadavg_before"], "→", record["loadavg_after"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
