"""``collops check``: validate and run an algorithm's schedules at many rank counts and sizes."""

from __future__ import annotations

import argparse
import sys

from ..algorithms.registry import Algorithm, algorithms, all_algorithms, get_algorithm
from ..algorithms.spec import COLLECTIVES
from ..errors import CollopsError
from .checker import check_algorithm

DEFAULT_NPROCS = "1-8"
DEFAULT_SIZES = "0,1,7,33"


def rank_counts(text: str) -> list[int]:
    """``"1-16"``, ``"2,4,8"`` or ``"4"`` as a list of rank counts."""
    out: list[int] = []
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            out.extend(range(int(lo), int(hi or lo) + 1))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: expected e.g. 1-16 or 2,4,8") from exc
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: rank counts are at least 1")
    return out


def element_counts(text: str) -> list[int]:
    """``"0,1,7,33"`` as a list of element counts per block."""
    try:
        out = [int(x) for x in text.split(",")]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: expected e.g. 0,1,7,33") from exc
    if not out or min(out) < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: counts are at least 0")
    return out


def _check_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--collective", choices=COLLECTIVES, default=None,
                   help="the collective (default: every collective that has --algorithm)")
    p.add_argument("--algorithm", default=None,
                   help="the algorithm (default: every schedule algorithm of --collective)")
    p.add_argument("--nprocs", type=rank_counts, default=rank_counts(DEFAULT_NPROCS),
                   help=f"rank counts, e.g. 1-16 or 2,4,8 (default {DEFAULT_NPROCS})")
    p.add_argument("--sizes", type=element_counts, default=element_counts(DEFAULT_SIZES),
                   help=f"elements per block, e.g. 0,1,7,33 (default {DEFAULT_SIZES})")
    p.add_argument("--all", action="store_true", help="report every failing case, not the first")


def selected(collective: str | None, algorithm: str | None) -> list[Algorithm]:
    """The schedule algorithms named by ``--collective`` and ``--algorithm``."""
    if collective and algorithm:
        return [get_algorithm(collective, algorithm, call="collops check")]
    if collective:
        found = algorithms(collective)
    elif algorithm:
        found = [a for a in all_algorithms() if a.name == algorithm]
        if not found:
            raise CollopsError(f"collops check: no collective has an algorithm named "
                               f"{algorithm!r} (load yours with --plugin FILE.py)")
    else:
        found = all_algorithms()
    return [a for a in found if a.native is None and not a.needs]


def cmd_check(args: argparse.Namespace) -> int:
    """Validate an algorithm's schedules and run them against numpy at many rank counts and
    sizes."""
    try:
        chosen = selected(args.collective, args.algorithm)
    except CollopsError as exc:
        print(f"collops: error: {exc}", file=sys.stderr)
        return 2
    failed = 0
    for alg in chosen:
        report = check_algorithm(alg, args.nprocs, args.sizes, stop_at_first=not args.all)
        skipped = sum(report.skipped.values())
        reasons = "; ".join(f"{n} because it requires that {why}"
                            for why, n in report.skipped.items())
        tail = f", {skipped} skipped ({reasons})" if skipped else ""
        if report.ok:
            print(f"ok    {report.algorithm}: {report.checked} cases{tail}")
            continue
        failed += 1
        if not report.problems:
            print(f"FAIL  {report.algorithm}: no case it can take among the rank counts and "
                  f"sizes asked for{tail}")
            continue
        counted = (f"{len(report.problems)} of {report.checked} cases wrong" if args.all else
                   f"wrong at case {report.checked} (the first shown; --all for every one)")
        print(f"FAIL  {report.algorithm}: {counted}{tail}")
        for problem in report.problems:
            print("  " + str(problem).replace("\n", "\n  "))
    return 1 if failed else 0


COMMAND = ("check", _check_args, cmd_check)
