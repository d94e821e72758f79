"""From timings to rules: the winner per size, kept only where it clearly beats the default.

A candidate is an algorithm, or the default algorithm with one protocol setting changed
(`Timing.setting`). Its timing is repetitions, each the mean time of a batch of calls on the
slowest rank, taken in several passes over the whole grid spread over the run; within a pass
the repetitions are interleaved (repetition i of every candidate is taken back to back), so
repetition i of two candidates saw the machine in the same state. The winner at a size is the
candidate with the lowest median; it replaces the default only if it is faster by more than the
noise: at least `MIN_GAIN` faster than the default in *every* repetition of every pass, each
compared with the default's of the same round — a machine whose speed drifts or jumps between
rounds (as a shared VM's does) moves both sides of a pair together, and a state the machine is
in for one pass only cannot make a rule.

Winning every one of n rounds is a sign test at the level 0.5ⁿ: a candidate no better than the
default would do it that rarely. A loaded machine's single slow round can hide a clear winner
(challengers ×1.5–2.9 won 3–5 of 6 rounds), so where the winner took at least half the rounds
the grid times it against the default in more rounds alternating in the same job
(`Decision.extra`, `worth_more`; more of them where either side's rounds spread widely,
`noisy`), and it replaces the default if, over all its rounds, the
sign test of its `MIN_GAIN` wins is significant at half that level (`CONFIRM_SHARE`: two looks
at the data share the first look's level) *and* the median of its blocks' median ratios (a
block: one pass's rounds, or as many of the extra ones) is `MIN_GAIN` below 1.

Neighbouring sizes with the same decision form one rule; a rule's bounds are the
geometric means between its measured sizes and their neighbours'.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: a winner must be at least this much faster than the default (relative to its median)
MIN_GAIN = 0.05
#: the share of the first look's level (0.5 ** rounds) the look after the extra rounds takes
CONFIRM_SHARE = 0.5
#: a side whose rounds spread more than this ((slowest − fastest) / median) is timed in more
#: rounds (`Decision.noisy`, `verify.compare`)
SPREAD_LIMIT = 0.25


@dataclass(frozen=True)
class Timing:
    """Repetitions (seconds per call) of one candidate at one size: an algorithm, with a
    protocol setting (``("shm_stream.by_reference", True)``) or with the table's."""

    algorithm: str
    samples: tuple[float, ...]
    setting: tuple[str, Any] | None = None

    @property
    def label(self) -> str:
        """The candidate in words: ``ring``, ``shm_stream with shm_stream.by_reference=True``."""
        if self.setting is None:
            return self.algorithm
        return f"{self.algorithm} with {self.setting[0]}={self.setting[1]!r}"

    @property
    def median(self) -> float:
        """The median repetition."""
        return float(np.median(self.samples))

    @property
    def spread(self) -> float:
        """(slowest − fastest) / median of the repetitions."""
        return spread(self.samples)


@dataclass(frozen=True)
class Decision:
    """What the tuner concluded at one size: the default, the winner, and whether it won."""

    nbytes: int
    default: Timing
    best: Timing
    #: the benchmark row's size (bytes per rank, as ``collops bench --sizes`` takes it)
    size: int | None = None
    #: the winner's and the default's extra rounds, alternating (`worth_more`), if any
    extra: tuple[Timing, Timing] | None = None
    #: rounds per pass (a block of the median of medians)
    block: int = 1

    @property
    def changed(self) -> bool:
        """Whether the winner replaces the default: faster by `MIN_GAIN` in every round, or
        beyond the noise over its extra rounds too (`confirmed`)."""
        if self.best.label == self.default.label:
            return False
        pairs = list(zip(self.best.samples, self.default.samples, strict=False))
        if len(self.best.samples) != len(self.default.samples):  # not interleaved: ranges
            return (self.best.median < self.default.median * (1 - MIN_GAIN)
                    and max(self.best.samples) < min(self.default.samples))
        if pairs and all(b < d * (1 - MIN_GAIN) for b, d in pairs):
            return True
        return self.confirmed

    @property
    def ratios(self) -> list[float]:
        """The winner's time over the default's beside it, round by round (extra ones last)."""
        best, default = list(self.best.samples), list(self.default.samples)
        if self.extra is not None:
            best += self.extra[0].samples
            default += self.extra[1].samples
        return [b / d for b, d in zip(best, default, strict=False) if d > 0]

    @property
    def confirmed(self) -> bool:
        """Whether the extra rounds confirm the winner: the sign test of its wins over every
        round at `CONFIRM_SHARE` of the level of winning the first rounds all, and the median
        of its blocks' median ratios `MIN_GAIN` below 1."""
        if self.extra is None or len(self.best.samples) != len(self.default.samples):
            return False
        ratios = self.ratios
        level = 0.5 ** len(self.best.samples) * CONFIRM_SHARE
        return (sign_test(self.rounds_won, len(ratios)) <= level
                and median_of_medians(ratios, self.block) < 1 - MIN_GAIN)

    @property
    def rounds_won(self) -> int:
        """Rounds (extra ones too) in which the winner was `MIN_GAIN` faster than the default
        beside it."""
        return sum(r < 1 - MIN_GAIN for r in self.ratios)

    @property
    def worth_more(self) -> bool:
        """Whether extra rounds could make the winner a rule: it won at least half the rounds
        but not all, and has none yet."""
        return (self.extra is None and self.best.label != self.default.label
                and not self.changed and 2 * self.rounds_won >= len(self.best.samples) > 0)

    @property
    def noisy(self) -> bool:
        """Whether the winner's or the default's rounds spread more than `SPREAD_LIMIT` (its
        extra rounds are then ``Effort.extra_most``)."""
        return max(self.best.spread, self.default.spread) > SPREAD_LIMIT

    @property
    def speedup(self) -> float:
        """The default's median over the winner's."""
        return self.default.median / self.best.median if self.best.median > 0 else 1.0


def decide(nbytes: int, timings: Sequence[Timing], default: str,
           size: int | None = None) -> Decision:
    """The decision at one size from every candidate's timing (``default``, with the table's
    protocol settings, among them)."""
    by_name = {t.label: t for t in timings}
    if default not in by_name:
        raise ValueError(f"the default {default!r} was not timed (timed: {sorted(by_name)})")
    best = min(timings, key=lambda t: (t.median, t.label != default))
    return Decision(nbytes, by_name[default], best, size)


def why_not(d: Decision) -> str:
    """Why the winner at ``d`` did not replace the default ("" if it did, or the default won)."""
    if d.changed or d.best.label == d.default.label:
        return ""
    won = f"won {d.rounds_won} of {len(d.ratios)} rounds by {MIN_GAIN:.0%}"
    if d.extra is None:
        if 2 * d.rounds_won < len(d.best.samples):
            return f"{won}: fewer than half, no extra rounds"
        return f"{won}: not every round, no extra rounds"
    level = 0.5 ** len(d.best.samples) * CONFIRM_SHARE
    p = sign_test(d.rounds_won, len(d.ratios))
    if p > level:
        return (f"{won} ({len(d.extra[0].samples)} extra): a coin does as well with chance "
                f"{p:.3f} > {level:.4f}")
    return (f"{won} ({len(d.extra[0].samples)} extra), but the median of the blocks' median "
            f"ratios is {median_of_medians(d.ratios, d.block):.2f}")


def sign_test(wins: int, rounds: int) -> float:
    """The chance of at least ``wins`` heads in ``rounds`` fair coin flips: how often a
    candidate no better than the default would win that many rounds."""
    return sum(math.comb(rounds, k) for k in range(wins, rounds + 1)) / 2 ** rounds


def spread(samples: Sequence[float]) -> float:
    """(slowest − fastest) / median of ``samples`` (0 for none)."""
    m = float(np.median(samples)) if len(samples) else 0.0
    return (max(samples) - min(samples)) / m if m > 0 else 0.0


def median_of_medians(ratios: Sequence[float], block: int) -> float:
    """The median of the medians of consecutive blocks of ``block`` ratios (a short last
    block joins the one before)."""
    block = max(1, block)
    blocks = [list(ratios[i:i + block]) for i in range(0, len(ratios), block)]
    if len(blocks) > 1 and len(blocks[-1]) < block:
        last = blocks.pop()
        blocks[-1] += last
    return float(np.median([np.median(b) for b in blocks]))


def refine_points(by_size: Mapping[int, Decision], align: int = 8) -> list[int]:
    """Sizes to measure next: between neighbouring sizes whose winners differ (more than a
    factor of two apart), their geometric mean, a multiple of ``align``."""
    out = []
    ordered = sorted(by_size)
    for a, b in zip(ordered, ordered[1:], strict=False):
        if _winner(by_size[a]) != _winner(by_size[b]) and b > 2 * max(a, 1):
            out.append(max(align, _between(a, b) // align * align))
    return out


@dataclass(frozen=True)
class Range:
    """A run of sizes with one tuned winner: bytes from ``low`` to ``high`` (None: no end)."""

    low: int
    high: int | None
    decisions: tuple[Decision, ...]

    @property
    def algorithm(self) -> str:
        """The winner of the range (for a protocol rule, the default it changes a setting of)."""
        return self.decisions[0].best.algorithm

    @property
    def setting(self) -> tuple[str, Any] | None:
        """The protocol setting the range changes (``None``: an algorithm rule)."""
        return self.decisions[0].best.setting


def ranges(decisions: Sequence[Decision]) -> list[Range]:
    """The rules: each run of neighbouring sizes whose winner replaces the default."""
    ordered = sorted(decisions, key=lambda d: d.nbytes)
    out: list[Range] = []
    i = 0
    while i < len(ordered):
        d = ordered[i]
        if not d.changed:
            i += 1
            continue
        j = i
        while (j + 1 < len(ordered) and ordered[j + 1].changed
               and ordered[j + 1].best.label == d.best.label):
            j += 1
        low = 0 if i == 0 else _between(ordered[i - 1].nbytes, d.nbytes)
        high = (None if j == len(ordered) - 1
                else _between(ordered[j].nbytes, ordered[j + 1].nbytes) - 1)
        out.append(Range(low, high, tuple(ordered[i:j + 1])))
        i = j + 1
    return out


def _winner(d: Decision) -> str:
    return d.best.label if d.changed else d.default.label


def _between(a: int, b: int) -> int:
    """The geometric mean of two sizes (a size of 0 counts as 1)."""
    return int(round(math.sqrt(max(a, 1) * max(b, 1))))


def summary(decisions: Mapping[int, Decision]) -> str:
    """One line per size: default, winner, speed-up, and whether the rule changes."""
    lines = []
    for n, d in sorted(decisions.items()):
        mark = "tuned" if d.changed else "default kept"
        if d.best.label != d.default.label:
            more = "" if d.extra is None else f", {len(d.extra[0].samples)} of them extra"
            mark += f" (won {d.rounds_won} of {len(d.ratios)} rounds{more})"
        lines.append(f"{n:>10} B  default {d.default.label} {d.default.median * 1e6:.2f} µs"
                     f"  best {d.best.label} {d.best.median * 1e6:.2f} µs"
                     f"  ×{d.speedup:.2f}  {mark}")
    return "\n".join(lines)
