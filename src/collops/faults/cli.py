"""``collops faults``: run the fault campaign and print its per-kind table."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from .campaign import KINDS, TRANSPORTS, Outcome


def _names(allowed: tuple[str, ...]) -> Callable[[str], list[str]]:
    """An argparse type: a comma-separated list of names from ``allowed``."""
    def parse(text: str) -> list[str]:
        names = [n for n in text.split(",") if n]
        unknown = [n for n in names if n not in allowed]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {unknown}; known: {', '.join(allowed)}")
        return names
    return parse


def _faults_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--transports", type=_names(TRANSPORTS), default=["threads", "shm"],
                   help="comma-separated: threads, shm, mpi, mpi-nodes (MPI, a node per "
                        "rank) (default threads,shm)")
    p.add_argument("--kinds", type=_names(KINDS), default=list(KINDS),
                   help="comma-separated fault kinds (default all): " + ", ".join(KINDS))
    p.add_argument("--trials", type=int, default=50, help="trials per kind (default 50)")
    p.add_argument("-n", "--ranks", type=int, default=3, help="ranks per job (default 3)")
    p.add_argument("--calls", type=int, default=40, help="collectives per rank (default 40)")
    p.add_argument("--call-timeout", type=float, default=5.0,
                   help="timeout= of every call, in s (default 5)")
    p.add_argument("--limit", type=float, default=30.0,
                   help="a job still running after this many s is a hang (default 30)")
    p.add_argument("--seed", type=int, default=0, help="seed of the trials (default 0)")
    p.add_argument("--json", metavar="FILE", help="write the summary and every trial here")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument("--report", metavar="FILE", help="run nothing: judge and tabulate the "
                   "trials of a --json FILE written before")


def _progress(o: Outcome) -> None:
    from .report import problems
    found = problems(o)
    sys.stderr.write(f"{o.transport} {o.kind} seed={o.seed}: "
                     f"{'; '.join(found) if found else 'ok'} ({o.seconds:.1f} s)\n")


def cmd_faults(args: argparse.Namespace) -> int:
    """Inject random faults into fresh jobs and report, per kind, what every rank saw."""
    from .campaign import run_campaign
    from .report import as_json, from_json, holds, summarise, table
    if args.ranks < 2:
        print("collops faults: -n must be at least 2")
        return 2
    if args.report:
        with open(args.report) as f:
            outcomes = from_json(json.load(f))
    else:
        outcomes = run_campaign(args.transports, args.kinds, args.trials, ranks=args.ranks,
                                calls=args.calls, call_timeout=args.call_timeout,
                                limit=args.limit, seed=args.seed, progress=_progress)
    rows = summarise(outcomes)
    print(table(rows, markdown=args.markdown))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(as_json(outcomes), f, indent=1)
    return 0 if all(holds(r) for r in rows) else 1


#: the subcommand this module adds to ``collops``: name, argument set-up, handler
COMMAND = ("faults", _faults_args, cmd_faults)
