"""Every collective's blocking, non-blocking (``i…`` + ``wait``) and in-place forms, timed.

Usage: .venv/bin/python benchmarks/nonblocking_forms.py [-n 2] [--sizes 8,64K]
           [--rounds 7] [--iterations 300] [--only allreduce,iallreduce] [--json FILE]
       .venv/bin/mpiexec -n 2 .venv/bin/python benchmarks/nonblocking_forms.py --mpi4py

On real ranks over shared memory (`collops.spawn`, ``transport="shm"``), per size (bytes
per rank's block) and per form, ``--rounds`` rounds of ``--iterations`` back-to-back calls
(after an untimed barrier; forms interleaved in each round, so a burst of load lands on all
of them), each call timed on its own: the median and the mean µs per call over all rounds,
averaged over the ranks. On a loaded machine the median shows what a call costs when both
ranks run; the mean adds the time a rank waited for its peer to be scheduled.

Forms, on collops' own API: each regular collective blocking and ``i…().wait()``; the
v-forms (``allgatherv``, ``gatherv``, ``scatterv``, ``alltoallv``, ``reduce_scatter``) the
same, counts given on every rank; in place (MPI_IN_PLACE: ``out`` is ``x``, or ``x`` its
own block of ``out``) ``allreduce``, ``reduce`` and ``gather`` at the root, ``allgather``,
``alltoall``, ``scan``, ``exscan``, ``reduce_scatter_block`` (``x`` its own block), and
``scatter`` at the root. Through ``collops.MPI`` (``facade:`` rows): ``I…`` + ``Wait`` of
the regular collectives and of the v-collectives (counts and displacements given, as
``[buf, (counts, displs), MPI.DOUBLE]``), and ``MPI.IN_PLACE`` allreduce and allgather. The
in-place reductions reduce zeros, so repeated calls cannot overflow. (collops has no
non-blocking object collectives: no ``i…_object`` row.)

``--mpi4py`` (under ``mpiexec -n N``) times mpi4py's own calls of the same names instead, the
reference. To compare two trees, run it with each (``PYTHONPATH=<tree>/src``) in alternation and
compare the medians; the script keeps a record only with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from common import parse_size

import collops

Call = Callable[[], object]


def _own_forms(comm: Any, nbytes: int) -> dict[str, Call]:
    """Collops' own calls: name -> call, blocks of ``nbytes`` per rank."""
    p, me = comm.size, comm.rank
    n = max(1, nbytes // 8)
    x, y, whole = np.ones(n), np.empty(n), np.ones(n * p)
    gathered, blocks = np.empty(n * p), np.empty(n * p)
    zero, zeros = np.zeros(n), np.zeros(n * p)
    counts = [n] * p
    root_out = gathered if me == 0 else None
    forms: dict[str, Call] = {
        "barrier": lambda: comm.barrier(),
        "ibarrier": lambda: comm.ibarrier().wait(),
        "bcast": lambda: comm.bcast(x, 0, out=x),
        "ibcast": lambda: comm.ibcast(x, 0, out=x).wait(),
        "scatter": lambda: comm.scatter(whole, 0, out=y),
        "iscatter": lambda: comm.iscatter(whole, 0, out=y).wait(),
        "gather": lambda: comm.gather(x, 0, out=root_out),
        "igather": lambda: comm.igather(x, 0, out=root_out).wait(),
        "allgather": lambda: comm.allgather(x, out=gathered),
        "iallgather": lambda: comm.iallgather(x, out=gathered).wait(),
        "alltoall": lambda: comm.alltoall(whole, out=blocks),
        "ialltoall": lambda: comm.ialltoall(whole, out=blocks).wait(),
        "reduce": lambda: comm.reduce(x, "sum", 0, out=y if me == 0 else None),
        "ireduce": lambda: comm.ireduce(x, "sum", 0, out=y if me == 0 else None).wait(),
        "allreduce": lambda: comm.allreduce(x, "sum", out=y),
        "iallreduce": lambda: comm.iallreduce(x, "sum", out=y).wait(),
        "reduce_scatter_block": lambda: comm.reduce_scatter_block(whole, "sum", out=y),
        "ireduce_scatter_block": lambda: comm.ireduce_scatter_block(whole, "sum",
                                                                    out=y).wait(),
        "scan": lambda: comm.scan(x, "sum", out=y),
        "iscan": lambda: comm.iscan(x, "sum", out=y).wait(),
        "exscan": lambda: comm.exscan(x, "sum", out=y),
        "iexscan": lambda: comm.iexscan(x, "sum", out=y).wait(),
        "allgatherv": lambda: comm.allgatherv(x, counts, out=gathered),
        "iallgatherv": lambda: comm.iallgatherv(x, counts, out=gathered).wait(),
        "gatherv": lambda: comm.gatherv(x, 0, counts, out=root_out),
        "igatherv": lambda: comm.igatherv(x, 0, counts, out=root_out).wait(),
        "scatterv": lambda: comm.scatterv(whole, counts, 0, out=y),
        "iscatterv": lambda: comm.iscatterv(whole, counts, 0, out=y).wait(),
        "alltoallv": lambda: comm.alltoallv(whole, counts, None, counts, out=blocks),
        "ialltoallv": lambda: comm.ialltoallv(whole, counts, None, counts, out=blocks).wait(),
        "reduce_scatter": lambda: comm.reduce_scatter(whole, "sum", counts, out=y),
        "ireduce_scatter": lambda: comm.ireduce_scatter(whole, "sum", counts, out=y).wait(),
    }
    mine = gathered[me * n:(me + 1) * n]
    own_block = zeros[me * n:(me + 1) * n]
    forms.update({
        "allreduce in place": lambda: comm.allreduce(zero, "sum", out=zero),
        "reduce in place": lambda: comm.reduce(zero, "sum", 0, out=zero if me == 0 else None),
        "allgather in place": lambda: comm.allgather(mine, out=gathered),
        "gather in place": lambda: comm.gather(mine if me == 0 else x, 0, out=root_out),
        "scatter in place": lambda: comm.scatter(whole, 0, out=whole[:n] if me == 0 else y),
        "alltoall in place": lambda: comm.alltoall(blocks, out=blocks),
        "reduce_scatter_block in place": lambda: comm.reduce_scatter_block(
            zeros, "sum", out=own_block),
        "scan in place": lambda: comm.scan(zero, "sum", out=zero),
        "exscan in place": lambda: comm.exscan(zero, "sum", out=zero),
        "iallreduce in place": lambda: comm.iallreduce(zero, "sum", out=zero).wait(),
    })
    return forms


def _facade_forms(comm: Any, nbytes: int) -> dict[str, Call]:
    """The same calls through ``collops.MPI``: name -> call."""
    from collops import MPI

    f = MPI.wrap(comm)
    p, n = comm.size, max(1, nbytes // 8)
    x, y, whole = np.ones(n), np.empty(n), np.ones(n * p)
    gathered, blocks, zero = np.empty(n * p), np.empty(n * p), np.zeros(n)
    counts, displs = [n] * p, [n * j for j in range(p)]
    return {
        "facade: Ibarrier": lambda: f.Ibarrier().Wait(),
        "facade: Ibcast": lambda: f.Ibcast(x, 0).Wait(),
        "facade: Iscatter": lambda: f.Iscatter(whole, y, 0).Wait(),
        "facade: Igather": lambda: f.Igather(x, gathered, 0).Wait(),
        "facade: Iallgather": lambda: f.Iallgather(x, gathered).Wait(),
        "facade: Ialltoall": lambda: f.Ialltoall(whole, blocks).Wait(),
        "facade: Ireduce": lambda: f.Ireduce(x, y, MPI.SUM, 0).Wait(),
        "facade: Allreduce": lambda: f.Allreduce(x, y, MPI.SUM),
        "facade: Iallreduce": lambda: f.Iallreduce(x, y, MPI.SUM).Wait(),
        "facade: Allreduce IN_PLACE": lambda: f.Allreduce(MPI.IN_PLACE, zero, MPI.SUM),
        "facade: Allgather IN_PLACE": lambda: f.Allgather(MPI.IN_PLACE, gathered),
        "facade: Iscan": lambda: f.Iscan(x, y, MPI.SUM).Wait(),
        "facade: Iexscan": lambda: f.Iexscan(x, y, MPI.SUM).Wait(),
        "facade: Iallgatherv": lambda: f.Iallgatherv(x, [gathered, (counts, displs),
                                                         MPI.DOUBLE]).Wait(),
        "facade: Igatherv": lambda: f.Igatherv(x, [gathered, (counts, displs), MPI.DOUBLE],
                                               0).Wait(),
        "facade: Iscatterv": lambda: f.Iscatterv([whole, (counts, displs), MPI.DOUBLE], y,
                                                 0).Wait(),
        "facade: Ialltoallv": lambda: f.Ialltoallv([whole, (counts, displs), MPI.DOUBLE],
                                                   [blocks, (counts, displs),
                                                    MPI.DOUBLE]).Wait(),
    }


def _mpi4py_forms(comm: Any, nbytes: int) -> dict[str, Call]:
    """The reference: mpi4py's calls (under ``mpiexec``, ``--mpi4py``), named as ours."""
    from mpi4py import MPI

    p, me, n = comm.Get_size(), comm.Get_rank(), max(1, nbytes // 8)
    x, y, whole = np.ones(n), np.empty(n), np.ones(n * p)
    gathered, blocks, zero = np.empty(n * p), np.empty(n * p), np.zeros(n)
    return {
        "barrier": lambda: comm.Barrier(),
        "ibarrier": lambda: comm.Ibarrier().Wait(),
        "allreduce": lambda: comm.Allreduce(x, y, MPI.SUM),
        "iallreduce": lambda: comm.Iallreduce(x, y, MPI.SUM).Wait(),
        "allreduce in place": lambda: comm.Allreduce(MPI.IN_PLACE, zero, MPI.SUM),
        "iallreduce in place": lambda: comm.Iallreduce(MPI.IN_PLACE, zero, MPI.SUM).Wait(),
        "allgather": lambda: comm.Allgather(x, gathered),
        "iallgather": lambda: comm.Iallgather(x, gathered).Wait(),
        "allgather in place": lambda: comm.Allgather(MPI.IN_PLACE, gathered),
        "alltoall": lambda: comm.Alltoall(whole, blocks),
        "ialltoall": lambda: comm.Ialltoall(whole, blocks).Wait(),
        "reduce": lambda: comm.Reduce(x, y if me == 0 else None, MPI.SUM, 0),
        "ireduce": lambda: comm.Ireduce(x, y if me == 0 else None, MPI.SUM, 0).Wait(),
        "scan": lambda: comm.Scan(x, y, MPI.SUM),
        "iscan": lambda: comm.Iscan(x, y, MPI.SUM).Wait(),
        "bcast": lambda: comm.Bcast(x, 0),
        "ibcast": lambda: comm.Ibcast(x, 0).Wait(),
    }


class _Mpi4pyComm:
    """mpi4py's world communicator with the ``barrier`` `_calls` uses."""

    def __init__(self) -> None:
        from mpi4py import MPI

        self.comm = MPI.COMM_WORLD

    def barrier(self) -> None:
        self.comm.Barrier()


def _calls(comm: Any, call: Call, iterations: int) -> list[float]:
    """Seconds of each of ``iterations`` back-to-back calls, after a barrier."""
    clock = time.perf_counter
    comm.barrier()
    times = []
    for _ in range(iterations):
        start = clock()
        call()
        times.append(clock() - start)
    return times


def _rank(comm: Any, sizes: list[int], rounds: int, iterations: int,
          only: list[str] | None) -> dict[int, dict[str, tuple[float, float]]]:
    """Per size, per form: this rank's median and mean seconds per call over all rounds."""
    out: dict[int, dict[str, tuple[float, float]]] = {}
    for size in sizes:
        if isinstance(comm, _Mpi4pyComm):
            forms = _mpi4py_forms(comm.comm, size)
        else:
            forms = {**_own_forms(comm, size), **_facade_forms(comm, size)}
        if only is not None:
            forms = {k: v for k, v in forms.items() if k in only}
        for call in forms.values():  # the first calls prepare and bind
            for _ in range(20):
                call()
        times: dict[str, list[float]] = {name: [] for name in forms}
        names = list(forms)
        for k in range(rounds):
            for name in names[k % len(names):] + names[:k % len(names)]:
                times[name].extend(_calls(comm, forms[name], iterations))
        out[size] = {name: (statistics.median(t), statistics.fmean(t))
                     for name, t in times.items()}
    return out


def main() -> None:
    """Print one line per form: the median µs per call at each size, averaged over ranks."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=2)
    parser.add_argument("--sizes", default="8,64K")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--only", default=None, help="comma-separated form names")
    parser.add_argument("--json", default=None, help="write the figures to this file")
    parser.add_argument("--mpi4py", action="store_true",
                        help="time mpi4py's calls instead (run under mpiexec -n N)")
    args = parser.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    only = None if args.only is None else args.only.split(",")
    if args.mpi4py:
        world = _Mpi4pyComm()
        mine = _rank(world, sizes, args.rounds, args.iterations, only)
        per_rank = world.comm.gather(mine, 0)
        if world.comm.Get_rank() != 0:
            return
    else:
        per_rank = collops.spawn(_rank, args.n, sizes, args.rounds, args.iterations, only,
                                 transport="shm", timeout=3600)
    table = {size: {name: [float(np.mean([r[size][name][i] for r in per_rank])) * 1e6
                           for i in (0, 1)]
                    for name in per_rank[0][size]} for size in sizes}
    print(f"{'form':>32} " + " ".join(f"{f'{s} B median':>14} {'mean':>9}" for s in sizes))
    for name in table[sizes[0]]:
        print(f"{name:>32} " + " ".join(f"{table[s][name][0]:>14.2f} {table[s][name][1]:>9.2f}"
                                        for s in sizes))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": "benchmarks/nonblocking_forms.py", "ranks": args.n,
                       "rounds": args.rounds, "iterations": args.iterations,
                       "us_per_call_median_mean": {str(s): t for s, t in table.items()}},
                      f, indent=1)


if __name__ == "__main__":
    main()
