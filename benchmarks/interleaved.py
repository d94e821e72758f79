"""collops over shared memory against MPI's own collectives, interleaved in the same processes.

Usage: .venv/bin/mpiexec -n 2 .venv/bin/python benchmarks/interleaved.py \
           [--collectives bcast,allgather] [--sizes 64K,1M,4M,16M] [--rounds 15] [--iterations 10]

`collops bench --compare mpi` measures MPI first and collops afterwards, in two jobs; on a
machine shared with other work a burst of load lands on one side only and the ratio swings by
2x between invocations. Here rank 0 of an ``mpiexec`` job creates a collops shared-memory job
that every rank attaches to as well, and each round times ``--iterations`` calls of collops
then as many of MPI (each call after an untimed barrier, as OSU and `collops bench` do). The
ratio printed is the median over rounds of collops / MPI, the latencies the medians of the
per-round means (averaged over ranks). ``--variant NAME=ENV=VALUE,...`` adds a further collops
transport built with those environment settings, measured in the same rounds.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import numpy as np
from common import environment, parse_size


def _timed(call: Any, barrier: Any, iterations: int) -> float:
    from collops.bench.measure import time_iterations
    return time_iterations(call, barrier, iterations, 0)


def _comm(job: int | str, rank: int, size: int, env: dict[str, str]) -> Any:
    from collops.runtime.comm import Comm
    from collops.shm.transport import ShmTransport

    with environment(env):
        return Comm(ShmTransport(job, rank, size))


def main() -> None:
    """Print one line per (collective, size): medians and the collops / MPI ratio."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--collectives", default="bcast,allgather,alltoall,allreduce,reduce")
    parser.add_argument("--sizes", default="64K,1M,4M,16M")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--variant", action="append", default=[],
                        help="NAME=ENV=VALUE[,ENV=VALUE]: another collops transport")
    args = parser.parse_args()

    from collops.bench.measure import buffers, collops_call
    from collops.bench.mpi_worker import mpi_call
    from collops.shm import kernel
    from collops.shm import segment as seg

    cma = kernel.cross_memory_attach_works()  # it forks: before MPI starts its threads

    from mpi4py import MPI

    world = MPI.COMM_WORLD
    rank, size = world.rank, world.size
    variants: list[tuple[str, dict[str, str]]] = [("collops", {})]
    for text in args.variant:
        name, _, rest = text.partition("=")
        env = dict(item.split("=", 1) for item in rest.split(",") if item)
        variants.append((name, env))
    jobs = [seg.create_job(size, single_copy=cma, named=True)[0] if rank == 0 else ""
            for _ in variants]
    jobs = world.bcast(jobs, 0)
    comms: list[Any] = []
    try:
        comms = [_comm(job, rank, size, env) for job, (_, env) in zip(jobs, variants, strict=True)]
        world.Barrier()
    finally:
        if rank == 0:
            for job in jobs:
                seg.release_job(job)
    header = f"{'collective':<10} {'size':>9} {'MPI µs':>9}"
    for name, _ in variants:
        header += f" {name + ' µs':>14} {'ratio':>6} {'algorithm':<18}"
    if rank == 0:
        print(header, flush=True)
    for collective in args.collectives.split(","):
        for nbytes in (parse_size(s) for s in args.sizes.split(",")):
            send, recv = buffers(collective, nbytes, size, rank)
            mpi = mpi_call(world, MPI, collective, send, recv)
            ours = [collops_call(c, collective, send, recv, None) for c in comms]
            _timed(mpi, world.Barrier, 3)
            for c, call in zip(comms, ours, strict=True):
                _timed(call, c.barrier, 3)
            per_round: list[list[float]] = [[] for _ in range(len(comms) + 1)]
            for _ in range(args.rounds):
                times = [_timed(mpi, world.Barrier, args.iterations)]
                times += [_timed(call, c.barrier, args.iterations)
                          for c, call in zip(comms, ours, strict=True)]
                means = world.allreduce(np.array(times), MPI.SUM) / size
                for k, t in enumerate(means):
                    per_round[k].append(float(t))
            if rank == 0:
                mpi_med = statistics.median(per_round[0])
                line = f"{collective:<10} {nbytes:>9} {mpi_med * 1e6:>9.1f}"
                for k, c in enumerate(comms, start=1):
                    ratio = statistics.median(a / b for a, b in zip(per_round[k], per_round[0],
                                                                    strict=True))
                    line += (f" {statistics.median(per_round[k]) * 1e6:>14.1f} {ratio:>6.2f} "
                             f"{c.last_algorithm:<18}")
                print(line, flush=True)
    for c in comms:
        c.transport.close()


if __name__ == "__main__":
    main()
