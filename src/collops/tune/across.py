"""Verdicts over separate jobs: a rule holds only if it beats each mode of the defaults.

With more ranks than cores a call's time can be bimodal with the mode fixed for a whole job
(4 ranks on 2 cores: the stream's 1 MiB reduce took about 185 µs in some jobs and 690 µs in
others), so rounds within one job see one mode of the defaults, and a rule chosen against
the slow mode loses wherever a job lands in the fast one. A rule is therefore verified in
jobs of their own (fresh processes), a job without the rules and one with them per round
(`jobs.compare_jobs`), and each row's per-job times are compared mode by mode: sorted, the
k-th fastest job with the rules against the k-th fastest without (`NOISE_BOUND`: no mode
slower beyond noise), the fastest against the fastest (the defaults' best mode beaten), the
medians by `decide.MIN_GAIN`. Rounds continue up to `most` while the rules would be kept or
either side's jobs disagree (`MODE_GAP` apart), so a rule is kept only after every round; and
past `most`, up to `LONELY_ROUNDS`, while one side shows a mode the other does not that holds
a single job (`lonely`): one job is too few to tell a state of the machine that either side
may meet from a mode of its own, and more rounds show it on both sides or again on one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from .decide import MIN_GAIN, Decision
from .protocols import Scratch
from .verify import Check, Checks, Row

if TYPE_CHECKING:
    from .jobs import Launch

#: the most a kept rule may slow any mode of a row (tuned / default, k-th fastest job each)
NOISE_BOUND = 1.1
#: jobs of one side further apart than this (slowest / fastest) are taken for two modes
MODE_GAP = 1.25
#: rounds of the verification in jobs (a round: a job without the rules, one with them):
#: at least, and at most while they would be kept or disagree; with --quick and without
ROUNDS = {True: (4, 8), False: (5, 10)}
#: the most rounds while a row's extra mode is a single job (`lonely`), with --quick and without
LONELY_ROUNDS = {True: 16, False: 20}


def modes(times: Sequence[float]) -> list[list[float]]:
    """Per-job times grouped into modes, fastest first: sorted, split wherever one time is
    more than `MODE_GAP` times the one before."""
    out: list[list[float]] = []
    for t in sorted(times):
        if out and t <= out[-1][-1] * MODE_GAP:
            out[-1].append(t)
        else:
            out.append([t])
    return out


def mode_pairs(row: Row) -> list[tuple[float, float]]:
    """(tuned, default) median times of the modes to compare: mode by mode where both sides
    show as many, else the tuned's slowest against the default's fastest (a job may land in
    either)."""
    tuned = [float(np.median(m)) for m in modes(row.tuned)]
    default = [float(np.median(m)) for m in modes(row.default)]
    if len(tuned) == len(default):
        return list(zip(tuned, default, strict=True))
    return [(tuned[-1], default[0])]


def worst_ratio(row: Row) -> float:
    """The largest tuned / default ratio of the modes compared (what `no_mode_slower`
    bounds)."""
    return max(t / d for t, d in mode_pairs(row))


def no_mode_slower(row: Row) -> bool:
    """Whether no mode with the rules took more than `NOISE_BOUND` times the same mode
    without (`mode_pairs`)."""
    return worst_ratio(row) <= NOISE_BOUND


def faster(row: Row) -> bool:
    """Whether the rules' fastest mode was `MIN_GAIN` faster than the defaults' fastest."""
    tuned, default = modes(row.tuned)[0], modes(row.default)[0]
    return float(np.median(tuned)) < float(np.median(default)) * (1 - MIN_GAIN)


def disagree(row: Row) -> bool:
    """Whether either side's jobs fall into more than one mode (two modes, or noise)."""
    return len(modes(row.tuned)) > 1 or len(modes(row.default)) > 1


def lonely(row: Row) -> bool:
    """Whether one side shows more modes than the other and one of its modes is a single
    job."""
    tuned, default = modes(row.tuned), modes(row.default)
    more = tuned if len(tuned) > len(default) else default if len(default) > len(tuned) else []
    return any(len(m) == 1 for m in more)


def enough(rows: Sequence[Row], most: int) -> bool:
    """Whether rounds past ``most`` have no more to show: ``most`` rounds taken and no row
    `lonely`."""
    return bool(rows) and len(rows[0].tuned) >= most and not any(lonely(r) for r in rows)


def holds(rows: Sequence[Row], won: Callable[[Row], bool] = lambda row: True) -> bool:
    """Whether rules verified over ``rows`` are kept: no row's mode slower beyond noise, and
    every row for which ``won`` is true `faster`."""
    return all(no_mode_slower(r) for r in rows) and all(faster(r) for r in rows if won(r))


def settled(rows: Sequence[Row], won: Callable[[Row], bool] = lambda row: True) -> bool:
    """Whether more rounds cannot change the verdict enough to be worth them: the rules
    would be dropped and no row's jobs disagree."""
    return not holds(rows, won) and not any(disagree(r) for r in rows)


def verify_in_jobs(ranks: int, decisions: Mapping[str, Sequence[Decision]], checks: Checks,
                   transport: str, launch: Launch, quick: bool,
                   progress: Callable[[str], None] | None = None) -> Checks:
    """The algorithm and protocol rules the verification in the tuning job kept, verified
    again in jobs of their own with the rules in force and without; a rule stays kept only
    where its rows `hold` and its jobs chose what it says. Returns ``checks`` with those
    rules' rows replaced by the jobs' (`Check.jobs`)."""
    from .jobs import compare_jobs
    from .table import write_table

    kept = {key: check for key, check in checks.items() if check.kept}
    if not kept:
        return dict(checks)
    rows = [(collective, row.size) for (collective, _), check in kept.items()
            for row in check.rows]

    def of(got: Sequence[Row], key: tuple[str, int]) -> tuple[Row, ...]:
        sizes = [row.size for row in kept[key].rows]
        return tuple(r for r in got if r.collective == key[0] and r.size in sizes)

    def decided(got: list[Row]) -> bool:
        return all(settled(of(got, key)) for key in kept) or enough(got, most)

    scratch = Scratch()
    try:
        path = scratch.write(write_table({ranks: decisions}, {}, transport, {ranks: checks}))
        first, most = ROUNDS[quick]
        got = compare_jobs(launch, path, rows, first, progress, ranks, "",
                           LONELY_ROUNDS[quick], decided, suffix="")
    finally:
        scratch.close()
    out = dict(checks)
    for key, check in kept.items():
        found = of(got, key)
        chose = all(new.tuned_algorithm == old.tuned_algorithm
                    for new, old in zip(found, check.rows, strict=True))
        out[key] = Check(found, chose and holds(found), jobs=True)
    return out
