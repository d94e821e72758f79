"""Timing every eligible algorithm on the ranks of a job (every rank runs `measure_job`).

Per collective and size: the built-in default (the call without ``algorithm=``, run with no
tuning file in force) and every other algorithm the transport offers that can take the call
are timed in turns — each repetition one batch of calls per candidate, after an untimed
barrier, the batch long enough to be measured (rank 0's pilot, agreed by all) — and a
repetition's time is the slowest rank's. Where neighbouring sizes have different winners, the
size between them is measured too (`decide.refine_points`). A candidate that fails is dropped
from that size. The clock is a parameter (`Timer`), so the choice can be tested with a fake one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..algorithms.registry import get_algorithm
from ..algorithms.spec import CallSpec, make_spec
from ..bench.measure import REGISTRY_NAME, buffers, collops_call, element_count
from ..errors import CollopsError
from ..ops import SUM
from .decide import Decision, Timing, decide, refine_points

#: (algorithm, size, call, iterations) -> seconds the batch took on this rank
Timer = Callable[[str, int, Callable[[], Any], int], float]


def wall_timer(algorithm: str, size: int, call: Callable[[], Any], iterations: int) -> float:
    """Run ``call`` ``iterations`` times; the seconds it took (the real clock)."""
    start = time.perf_counter()
    for _ in range(iterations):
        call()
    return time.perf_counter() - start


@dataclass(frozen=True)
class Effort:
    """How hard to measure: repetitions, seconds per batch, refinement rounds."""

    repetitions: int = 5
    batch_seconds: float = 0.04
    refinements: int = 2
    warmup: int = 3


QUICK = Effort(repetitions=5, batch_seconds=0.01, refinements=1, warmup=2)
FULL = Effort()


def spec_for(collective: str, size: int, nprocs: int) -> CallSpec:
    """The call a benchmark row of ``size`` bytes per rank makes (float64, root 0, sum)."""
    name = REGISTRY_NAME.get(collective, collective)
    count = element_count(collective, size, nprocs)
    dt = np.float64
    if collective == "barrier":
        return make_spec(name, nprocs, dt)
    if collective in ("alltoall", "scatter", "reduce_scatter"):
        count //= nprocs
    op = SUM if collective in ("allreduce", "reduce", "reduce_scatter", "scan") else None
    return make_spec(name, nprocs, dt, count=count, op=op)


def candidates(comm: Any, spec: CallSpec) -> list[str]:
    """The algorithms this communicator can run that can take ``spec``."""
    return [name for name in comm.offered_algorithms(spec.collective)
            if get_algorithm(spec.collective, name).eligible(spec)]


def measure_job(comm: Any, collectives: Sequence[str], sizes: Sequence[int], effort: Effort,
                timer: Timer = wall_timer,
                progress: Callable[[str], None] | None = None) -> dict[str, list[Decision]]:
    """Every collective's decisions (every rank must call; all return the same)."""
    out: dict[str, list[Decision]] = {}
    for collective in collectives:
        found: dict[int, Decision] = {}
        todo = [0] if collective == "barrier" else sorted(set(sizes))
        for level in range(effort.refinements + 1):
            for size in todo:
                found[size] = measure_size(comm, collective, size, effort, timer)
                if progress is not None and comm.rank == 0:
                    d = found[size]
                    progress(f"{collective} {size} B: {d.best.algorithm} "
                             f"{d.best.median * 1e6:.1f} µs (default {d.default.algorithm} "
                             f"{d.default.median * 1e6:.1f} µs)")
            if level == effort.refinements:
                break
            todo = [s for s in refine_points(found) if s not in found]
            if not todo:
                break
        out[collective] = [found[s] for s in sorted(found)]
    return out


def measure_size(comm: Any, collective: str, size: int, effort: Effort,
                 timer: Timer = wall_timer) -> Decision:
    """Time the default and every candidate for one collective and size."""
    spec = spec_for(collective, size, comm.size)
    send, recv = buffers(collective, size, comm.size, comm.rank)
    default_call = collops_call(comm, collective, send, recv, None)
    default_call()
    default = comm.last_algorithm
    names = [default] + [a for a in candidates(comm, spec) if a != default]
    calls = {}
    for name in names:
        call = default_call if name == default else collops_call(comm, collective, send, recv,
                                                                  name)
        if _works(comm, call, effort.warmup):
            calls[name] = call
    batch = {name: _batch_size(comm, name, size, call, effort, timer)
             for name, call in calls.items()}
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(effort.repetitions):
        for name, call in calls.items():
            comm.barrier()
            mine = timer(name, size, call, batch[name]) / batch[name]
            samples[name].append(float(comm.allreduce(np.array([mine]), "max")[0]))
    timings = [Timing(name, tuple(v)) for name, v in samples.items()]
    return decide(spec.message_bytes(), timings, default)


def _works(comm: Any, call: Callable[[], Any], warmup: int) -> bool:
    """Whether ``call`` runs on every rank (a candidate failing anywhere is dropped)."""
    ok = 1
    for _ in range(warmup):
        comm.barrier()
        try:
            call()
        except CollopsError:
            ok = 0
            break
    return bool(comm.allreduce(np.array([ok]), "min")[0])


def _batch_size(comm: Any, name: str, size: int, call: Callable[[], Any], effort: Effort,
                timer: Timer) -> int:
    """Calls per batch so that a batch lasts about ``effort.batch_seconds`` (all ranks agree)."""
    comm.barrier()
    once = float(comm.allreduce(np.array([timer(name, size, call, 1)]), "max")[0])
    return int(min(100_000, max(1, effort.batch_seconds // max(once, 1e-9))))
