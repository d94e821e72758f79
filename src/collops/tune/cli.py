"""``collops tune``: measure the selection table on this machine and write a tuning file.

Started on its own it launches a job per rank count (``-n 2,4``) on the shared-memory
transport (or threads) and measures there; started by an MPI launcher (``mpiexec -n 8 collops
tune``) it measures on the job's own ranks over MPI and rank 0 writes the file. With
``--compare-default FILE`` it measures nothing new: it times each row a file's rules were
measured at with the file in force against the built-in table, alternating, and prints the
ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..bench.cli import mpi_world, parse_size
from ..bench.measure import COLLECTIVES
from ..config import reload_settings, user_tuning_file
from ..transport.placement import BIND_POLICIES
from . import state
from .across import verify_in_jobs
from .decide import Decision, summary
from .grid import measure_job
from .jobs import (
    JobRow,
    JobRule,
    Launch,
    compare_jobs,
    job_rows,
    job_rows_of_file,
    time_rows,
    tune_job_settings,
)
from .measure import FULL, QUICK, Effort
from .p2p_rows import POINT_TO_POINT
from .protocols import Scratch
from .table import command_line, machine, write_table
from .verify import Checks, Row, compare, rows_of_file, verify_job

DEFAULT_COLLECTIVES = "allgather,alltoall,allreduce,bcast,reduce,barrier,pingpong,burst"
#: what ``--collectives`` takes: the benchmark's rows and the tuner's burst
ROWS = tuple(dict.fromkeys(COLLECTIVES + POINT_TO_POINT))
QUICK_SIZES = "8,1K,64K,1M"
FULL_SIZES = "8,64,512,4K,32K,256K,2M"


def _tune_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--nprocs", default="2",
                   help="ranks, or several rank counts (2,4): one job each (default 2); under "
                        "mpiexec, the job's ranks")
    p.add_argument("--collectives", default=DEFAULT_COLLECTIVES,
                   help=f"comma-separated, from: {', '.join(ROWS)}")
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
    p.add_argument("--report", default=None, metavar="FILE",
                   help="also write a report: the kept rules with their speed-ups, the "
                        "dropped ones and the candidates that did not win, with why (FILE.png: "
                        "a plot of the tuned choice against the default per size instead)")
    p.add_argument("--compare-default", default=None, metavar="FILE",
                   help="measure nothing new: time the rows FILE's rules were measured at "
                        "with FILE in force and with the built-in table, alternating, and "
                        "print tuned / default per row")
    p.add_argument("--rounds", type=int, default=9,
                   help="rounds of --compare-default (default 9)")
    p.add_argument("--json", default=None,
                   help="with --compare-default, also write the rows to this file")


Job = tuple[dict[str, list[Decision]], Checks]


def _job(comm: Any, collectives: list[str], sizes: list[int], effort: Effort,
         transport: str) -> Job:
    """What every rank of a tuning job runs (the passes, then the verification of the rules
    they make); rank 0 shows the progress."""
    collectives = [c for c in collectives if c not in POINT_TO_POINT]  # job-wide rows alone
    decisions = measure_job(comm, collectives, sizes, effort, progress=_progress)
    return decisions, verify_job(comm, decisions, transport, effort, progress=_progress)


def _compare_job(comm: Any, path: str, rounds: int) -> list[Row]:
    """What every rank of a ``--compare-default`` job runs."""
    return compare(comm, path, rows_of_file(path, comm.size), rounds, FULL,
                   progress=_progress)


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
    started, load = time.perf_counter(), os.getloadavg()
    os.environ["COLLOPS_TUNING_FILE"] = ""  # measure against the built-in defaults
    reload_settings()
    if args.compare_default:
        return _compare_default(args, counts)
    world = mpi_world()
    results: dict[int, dict[str, list[Decision]]] = {}
    checks: dict[int, Checks] = {}
    job_rules: dict[int, list[JobRule]] = {}
    if world is not None:
        results[world.size], checks[world.size] = _job(world, collectives, sizes, effort,
                                                       "mpi")
        if world.rank != 0:
            return 0
        transport, mpi = "mpi", _mpi_library()
    else:
        from ..runtime import spawn
        for n in counts:
            launch = _launcher(n, args.bind_to, effort, args.transport)
            first = state.before(launch, grid_rows(collectives, sizes, n, args.transport))
            _progress(f"defaults before the grid, {n} ranks: " + ", ".join(
                f"{c} {s} B {t * 1e6:.1f} µs" for (c, s), t in first.items()))
            results[n], checks[n] = spawn(_job, n, collectives, sizes, effort, args.transport,
                                          transport=args.transport, timeout=3600,
                                          bind_to=args.bind_to)[0]
            checks[n] = verify_in_jobs(n, results[n], checks[n], args.transport, launch,
                                       args.quick, _progress)
            kept = write_table({n: results[n]}, {}, args.transport, {n: checks[n]})
            job_rules[n] = tune_job_settings(
                n, job_rows(collectives, sizes, args.quick), effort, args.quick, launch,
                _progress, base=kept, transport=args.transport)
            checks[n], job_rules[n] = _bracketed(n, results[n], checks[n],
                                                 job_rules.get(n, []), first, launch,
                                                 args.transport)
        transport, mpi = args.transport, None
    output = Path(args.output or user_tuning_file())
    output.parent.mkdir(parents=True, exist_ok=True)
    measured = machine(transport, sorted(results), command_line(), mpi)
    text = write_table(results, measured, transport, checks, job_rules)
    output.write_text(text)
    for n, per in sorted(results.items()):
        for collective, decisions in per.items():
            print(f"{collective}, {n} ranks:")
            print(summary({d.nbytes: d for d in decisions}))
    rules = text.count("\n[[")
    dropped = [line[2:] for line in text.splitlines() if line.startswith("# dropped after")]
    for line in dropped:
        print(line)
    print(f"wrote {output}: {rules} rule{'s' if rules != 1 else ''}, {len(dropped)} dropped after "
          f"verification (COLLOPS_TUNING_FILE=... chooses another file; "
          f"COLLOPS_TUNING_FILE= ignores it)")
    if args.report:
        wall = time.perf_counter() - started
        _report(args.report, results, checks, job_rules, text, measured, [
            f"`{measured['command']}` on {measured['host']} ({measured['cpu']}, "
            f"{measured['cores']} cores), {measured['date']}: {wall:.0f} s, load average "
            f"{load[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end."])
    return 0


def _report(path: str, results: dict[int, dict[str, list[Decision]]],
            checks: dict[int, Checks], job_rules: dict[int, list[JobRule]], text: str,
            measured: dict[str, Any], header: list[str]) -> None:
    """``--report``: a plot (``.png``) or the text of `report.text_report`."""
    from . import report
    if path.endswith(".png"):
        report.plot_report(results, path)
    else:
        Path(path).write_text(report.text_report(results, checks, job_rules, text, header))
    print(f"wrote {path}")


def grid_rows(collectives: Sequence[str], sizes: Sequence[int], ranks: int,
              transport: str) -> list[JobRow]:
    """The rows a tuning run can make rules at, before refinement: the per-call grid's (a
    barrier's: size 0), and with two ranks or more the point-to-point rows of the job-wide
    phase."""
    wide = [r for r in job_rows(collectives, sizes, False) if r[0] in POINT_TO_POINT]
    return [(c, s) for c in collectives if c not in POINT_TO_POINT
            for s in ([0] if c == "barrier" else sorted(set(sizes)))] + (
        wide if ranks >= 2 and transport in ("shm", "inproc") else [])


def _bracketed(n: int, decisions: dict[str, list[Decision]], checks: Checks,
               rules: list[JobRule], first: state.Figures, launch: Launch,
               transport: str) -> tuple[Checks, list[JobRule]]:
    """`state.bracketed`: the kept rules against the defaults once more at the end, judged
    with the defaults' times before the grid (each refusal printed)."""
    scratch = Scratch()
    try:
        out, wide = state.bracketed(checks, rules, first, launch, lambda c, r: scratch.write(
            write_table({n: decisions}, {}, transport, {n: c}, {n: r})), _progress)
    finally:
        scratch.close()
    for why in [c.refused for c in out.values()] + [r.refused for r in wide]:
        if why:
            _progress(f"refused, {n} ranks: {why}")
    return out, wide


def _launcher(n: int, bind_to: str, effort: Effort, transport: str = "shm") -> Launch:
    """Runs `jobs.time_rows` in a new job of ``n`` ranks over ``transport`` with a tuning
    file in force as the job starts."""
    from ..runtime import spawn

    def launch(path: str, rows: Sequence[JobRow]) -> list[tuple[str, float]]:
        os.environ["COLLOPS_TUNING_FILE"] = path
        reload_settings()
        try:
            return list(spawn(time_rows, n, rows, effort, transport=transport, timeout=600,
                              bind_to=bind_to)[0])
        finally:
            os.environ["COLLOPS_TUNING_FILE"] = ""
            reload_settings()
    return launch


def _compare_default(args: argparse.Namespace, counts: list[int]) -> int:
    """``--compare-default FILE``: each of the file's rows, tuned against default; under an
    MPI launcher on the job's own ranks (rank 0 prints). Rows of job-wide settings are timed
    in jobs without the file and with it, alternating."""
    path = str(Path(args.compare_default).resolve())
    found: dict[int, list[Row]] = {}
    world = mpi_world()
    if world is not None:
        found[world.size] = _compare_job(world, path, args.rounds)
        if world.rank != 0:
            return 0
    else:
        from ..runtime import spawn
        for n in counts:
            found[n] = spawn(_compare_job, n, path, args.rounds, transport=args.transport,
                             timeout=3600, bind_to=args.bind_to)[0]
            wide = job_rows_of_file(path, n)
            if wide:
                found[n] += compare_jobs(_launcher(n, args.bind_to, FULL), path, wide,
                                         args.rounds, _progress, n)
    print(f"{'ranks':>5}  {'call':<24} {'default':>22} {'tuned':>22}  tuned/default")
    for n, rows in sorted(found.items()):
        for r in rows:
            d, t = np.median(r.default) * 1e6, np.median(r.tuned) * 1e6
            print(f"{n:>5}  {r.collective + ' ' + str(r.size) + ' B':<24} "
                  f"{f'{d:.1f} µs ({r.default_algorithm})':>22} "
                  f"{f'{t:.1f} µs ({r.tuned_algorithm})':>22}  {r.ratio:.2f}")
        if not rows:
            print(f"{n:>5}  (no rule of the file covers {n} ranks with evidence sizes)")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"file": path, "command": command_line(),
             "rows": [{"ranks": n, "collective": r.collective, "size": r.size,
                       "default_algorithm": r.default_algorithm,
                       "tuned_algorithm": r.tuned_algorithm,
                       "default_us": [round(x * 1e6, 3) for x in r.default],
                       "tuned_us": [round(x * 1e6, 3) for x in r.tuned],
                       "ratio": round(r.ratio, 3)}
                      for n, rows in sorted(found.items()) for r in rows]}, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


def _collectives(text: str) -> list[str]:
    names = [c.strip() for c in text.split(",") if c.strip()]
    bad = [c for c in names if c not in ROWS]
    if bad or not names:
        raise ValueError(f"--collectives: {bad[0] if bad else text!r} is not one of "
                         f"{', '.join(ROWS)}")
    return names


def _mpi_library() -> str:
    from mpi4py import MPI
    return str(MPI.Get_library_version()).splitlines()[0].strip()


COMMAND = ("tune", _tune_args, cmd_tune)
