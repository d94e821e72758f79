"""``collops tune``: measure the selection table on this machine and write a tuning file.

Started on its own it launches a job per rank count (``-n 2,4``) on the shared-memory
transport (or threads) and measures there; started by an MPI launcher (``mpiexec -n 8 collops
tune``) it measures on the job's own ranks over MPI and rank 0 writes the file.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ..bench.cli import mpi_world, parse_size
from ..bench.measure import COLLECTIVES
from ..config import reload_settings, user_tuning_file
from ..transport.placement import BIND_POLICIES
from .decide import Decision, summary
from .measure import FULL, QUICK, Effort, measure_job
from .table import command_line, machine, write_table

DEFAULT_COLLECTIVES = "allgather,alltoall,allreduce,bcast,reduce,barrier"
QUICK_SIZES = "8,1K,64K,1M"
FULL_SIZES = "8,64,512,4K,32K,256K,2M"


def _tune_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--nprocs", default="2",
                   help="ranks, or several rank counts (2,4): one job each (default 2); under "
                        "mpiexec, the job's ranks")
    p.add_argument("--collectives", default=DEFAULT_COLLECTIVES,
                   help=f"comma-separated, from: {', '.join(COLLECTIVES)}")
    p.add_argument("--sizes", default=None,
                   help=f"bytes per rank (default {FULL_SIZES}; with --quick {QUICK_SIZES}); "
                        "sizes between them are added where the winner changes")
    p.add_argument("--quick", action="store_true",
                   help="fewer repetitions and sizes: minutes, not tens of minutes")
    p.add_argument("--output", default=None,
                   help=f"the tuning file to write (default {user_tuning_file()}, read by "
                        "every collops program of this user unless COLLOPS_TUNING_FILE says "
                        "otherwise)")
    p.add_argument("--transport", choices=("shm", "inproc"), default="shm",
                   help="what the job runs over when not under mpiexec (default shm)")
    p.add_argument("--bind-to", choices=BIND_POLICIES, default="auto")
    p.add_argument("--report", default=None, metavar="FILE.png",
                   help="also draw the tuned choice against the default per size")


def _job(comm: Any, collectives: list[str], sizes: list[int], effort: Effort
         ) -> dict[str, list[Decision]]:
    """What every rank of a tuning job runs; rank 0 shows the progress."""
    return measure_job(comm, collectives, sizes, effort, progress=_progress)


def _progress(line: str) -> None:
    print(f"collops tune: {line}", file=sys.stderr, flush=True)


def cmd_tune(args: argparse.Namespace) -> int:
    """Measure every eligible algorithm per collective and size; write the winners as a
    tuning file."""
    try:
        collectives = _collectives(args.collectives)
        sizes = [parse_size(s) for s in (args.sizes or (QUICK_SIZES if args.quick
                                                         else FULL_SIZES)).split(",")]
        counts = [int(n) for n in str(args.nprocs).split(",")]
        if any(n < 1 for n in counts):
            raise ValueError("rank counts are at least 1")
    except ValueError as exc:
        print(f"collops: error: {exc}", file=sys.stderr)
        return 2
    effort = QUICK if args.quick else FULL
    os.environ["COLLOPS_TUNING_FILE"] = ""  # measure against the built-in defaults
    reload_settings()
    world = mpi_world()
    results: dict[int, dict[str, list[Decision]]] = {}
    if world is not None:
        results[world.size] = measure_job(world, collectives, sizes, effort,
                                          progress=_progress)
        if world.rank != 0:
            return 0
        transport, mpi = "mpi", _mpi_library()
    else:
        from ..runtime import spawn
        for n in counts:
            results[n] = spawn(_job, n, collectives, sizes, effort, transport=args.transport,
                               timeout=3600, bind_to=args.bind_to)[0]
        transport, mpi = args.transport, None
    output = Path(args.output or user_tuning_file())
    output.parent.mkdir(parents=True, exist_ok=True)
    text = write_table(results, machine(transport, sorted(results), command_line(), mpi),
                       transport)
    output.write_text(text)
    for n, per in sorted(results.items()):
        for collective, decisions in per.items():
            print(f"{collective}, {n} ranks:")
            print(summary({d.nbytes: d for d in decisions}))
    rules = text.count(".rule]]")
    print(f"wrote {output}: {rules} rule{'s' if rules != 1 else ''} "
          f"(COLLOPS_TUNING_FILE=... chooses another file; COLLOPS_TUNING_FILE= ignores it)")
    if args.report:
        from .report import plot_report
        plot_report(results, args.report)
        print(f"wrote {args.report}")
    return 0


def _collectives(text: str) -> list[str]:
    names = [c.strip() for c in text.split(",") if c.strip()]
    bad = [c for c in names if c not in COLLECTIVES]
    if bad or not names:
        raise ValueError(f"--collectives: {bad[0] if bad else text!r} is not one of "
                         f"{', '.join(COLLECTIVES)}")
    return names


def _mpi_library() -> str:
    from mpi4py import MPI
    return str(MPI.Get_library_version()).splitlines()[0].strip()


COMMAND = ("tune", _tune_args, cmd_tune)
