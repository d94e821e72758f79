"""The machine's state over a tuning run: rules verified in one state are checked in others.

A shared VM can change state for minutes (a 64 KiB copy several times slower), long enough
for the grid and every verification job to fall in one state: the default looks slow
throughout and a rule that loses to it in the other state is kept. So the defaults are timed
in a job of their own *before* the grid (`before`), and after the verification a last round
(`after`: a job without the rules and one with them) times each kept rule's rows again. A
row's default that took a time there outside the modes the verification saw (`MODE_GAP`) says
the machine changed state during the run; the rule is then kept only if it is no slower than
the default in that state too (`NOISE_BOUND`): at the end, the tuned job against the default
job beside it; before the grid, where only the default was timed, the rule's fastest time
anywhere against the default's time then. Job-wide settings (`jobs`) are judged the same way
on their rows (the last round runs after their phase; its default is the built-in table,
where their verification ran beside the kept rules). The reason a rule is refused is written
in the file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from .across import MODE_GAP, NOISE_BOUND, modes
from .jobs import JobRow, JobRule, Launch
from .verify import Checks, Row

#: a row's default time in a job of its own, seconds per call
Figures = dict[JobRow, float]
#: a row's (default, tuned) times in the last round, seconds per call
Pairs = dict[JobRow, tuple[float, float]]


def before(launch: Launch, rows: Sequence[JobRow]) -> Figures:
    """Each row's default time in a job with the built-in table alone (before the grid)."""
    return {row: t for row, (_, t) in zip(rows, launch("", rows), strict=True)}


def after(launch: Launch, path: str, rows: Sequence[JobRow]) -> Pairs:
    """Each row's time in a job without the tuning file ``path`` and in one with it."""
    default, tuned = launch("", rows), launch(path, rows)
    return {row: (d, t) for row, (_, d), (_, t) in zip(rows, default, tuned, strict=True)}


def outside(figure: float, seen: Sequence[float]) -> bool:
    """Whether ``figure`` lies outside the modes of ``seen`` by more than `MODE_GAP`."""
    found = modes(seen)
    return figure * MODE_GAP < found[0][0] or figure > found[-1][-1] * MODE_GAP


def refusal(row: Row, first: float | None, last: tuple[float, float] | None) -> str:
    """Why the rule of ``row`` does not hold in a state its verification did not see ("" if
    it holds): ``first`` the default's time before the grid, ``last`` (default, tuned) at the
    end."""
    us = 1e6
    seen = f"{np.median(row.default) * us:.1f} µs in the verification"
    if last is not None and outside(last[0], row.default) and last[1] > NOISE_BOUND * last[0]:
        return (f"{row.collective} {row.size} B: the default took {last[0] * us:.1f} µs after "
                f"the verification ({seen}), the rules {last[1] * us:.1f} µs: the machine "
                f"changed state")
    best = min([*row.tuned, *([last[1]] if last is not None else [])])
    if first is not None and outside(first, row.default) and best > NOISE_BOUND * first:
        return (f"{row.collective} {row.size} B: the default took {first * us:.1f} µs before "
                f"the grid ({seen}), the rules {best * us:.1f} µs at best: the machine changed "
                f"state")
    return ""


def kept_rows(checks: Checks, rules: Sequence[JobRule] = ()) -> list[JobRow]:
    """The rows of every rule and job-wide setting the verification kept."""
    out: list[JobRow] = []
    found = [(collective, row.size) for (collective, _), check in checks.items()
             for row in (check.rows if check.kept else ())]
    found += [(row.collective, row.size) for rule in rules if rule.kept
              for row in rule.checked]
    for row in found:
        if row not in out:
            out.append(row)
    return out


def _why(rows: Sequence[Row], first: Mapping[JobRow, float],
         last: Mapping[JobRow, tuple[float, float]]) -> str:
    """Every row's `refusal`, joined."""
    return "; ".join(w for w in (refusal(r, first.get((r.collective, r.size)),
                                         last.get((r.collective, r.size))) for r in rows) if w)


def judge(checks: Checks, first: Mapping[JobRow, float],
          last: Mapping[JobRow, tuple[float, float]], rules: Sequence[JobRule] = ()
          ) -> tuple[Checks, list[JobRule]]:
    """``checks`` and the job-wide ``rules`` with each kept one refused (``refused``) where a
    row of it does not hold in a state its verification did not see (`refusal`)."""
    out = dict(checks)
    for key, check in checks.items():
        why = _why(check.rows, first, last) if check.kept else ""
        if why:
            out[key] = replace(check, kept=False, refused=why)
    wide = []
    for rule in rules:
        why = _why(rule.checked, first, last) if rule.kept else ""
        wide.append(replace(rule, kept=False, refused=why) if why else rule)
    return out, wide


def bracketed(checks: Checks, rules: Sequence[JobRule], first: Figures, launch: Launch,
              write: Callable[[Checks, Sequence[JobRule]], str],
              progress: Callable[[str], None] | None = None
              ) -> tuple[Checks, list[JobRule]]:
    """The last round over the kept rules' and settings' rows (``write`` gives the tuning
    file of a set of checks and job-wide rules), then `judge`."""
    rows = kept_rows(checks, rules)
    if not rows:
        return dict(checks), list(rules)
    last = after(launch, write(checks, rules), rows)
    if progress is not None:
        progress("the kept rules at the end: " + ", ".join(
            f"{c} {s} B {t * 1e6:.1f} µs (defaults {d * 1e6:.1f})"
            for (c, s), (d, t) in last.items()))
    return judge(checks, first, last, rules)
