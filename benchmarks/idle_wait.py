"""CPU a rank burns while blocked in a collective (issue target: ≤ 5 % of a core over 1 s).

Usage: .venv/bin/python benchmarks/idle_wait.py [--nprocs 2,4,8] [--seconds 1.0]
                                                [--collectives barrier,allreduce]

On real ranks over shared memory, every rank but the last enters the collective at once; the
last sleeps ``--seconds`` first. Each waiting rank reports the CPU time it used inside the
call (``time.process_time``) against the wall time, and the script prints the largest share.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import collops


def _blocked(comm, collective: str, seconds: float) -> tuple[float, float] | None:
    x = np.ones(1)
    call = comm.barrier if collective == "barrier" else (lambda: comm.allreduce(x))
    call()
    call()  # the fast path is prepared
    comm.barrier()
    if comm.rank == comm.size - 1:
        time.sleep(seconds)
        call()
        return None
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nprocs", default="2,4,8")
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--collectives", default="barrier,allreduce")
    args = parser.parse_args()
    for n in (int(v) for v in args.nprocs.split(",")):
        for collective in args.collectives.split(","):
            rows = collops.spawn(_blocked, n, collective, args.seconds, transport="shm",
                                 timeout=60)
            shares = [cpu / wall for cpu, wall in (r for r in rows if r is not None)]
            mean = sum(shares) / len(shares)
            print(f"{n} ranks, {collective}: a rank blocked {args.seconds:g} s used at most "
                  f"{100 * max(shares):.1f} % of a core (mean {100 * mean:.1f} %)")


if __name__ == "__main__":
    main()
