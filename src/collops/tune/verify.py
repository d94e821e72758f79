"""Tuned against default, timed the way ``collops bench`` times a row (every rank runs it).

`compare` times each row's call with a tuning file in force and with the built-in table alone,
round by round in one job, which goes first alternating. `verify_job` does it for every rule
the tuner is about to write, at the sizes the rule was measured at — the final pass that
catches a rule picked while the machine was in a state it has since left: where either side's
rounds spread more than `decide.SPREAD_LIMIT` it takes more rounds, up to
``effort.verify_most``, and it keeps a rule where the file was faster beyond the noise
(`Row.holds`): the sign test of its wins over every round at the level of winning all of the
first ``effort.verify_rounds`` (what it asked before, so no looser), and the median of the
blocks' median ratios `decide.MIN_GAIN` below 1. Demanding every round made one interrupted
round of five drop a true winner (2 ranks, allreduce 256 KiB ``shm_stream``: ×0.86 by its
median). ``collops tune --compare-default FILE`` runs `compare` over a written file's rules.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..bench.measure import REGISTRY_NAME, buffers, collops_call
from .decide import (
    MIN_GAIN,
    SPREAD_LIMIT,
    Decision,
    median_of_medians,
    ranges,
    sign_test,
    spread,
)
from .measure import Candidate, Effort, Tables, Timer, alternating, batch_size, osu_timer
from .protocols import Scratch

#: the benchmark name of a table's collective (``reduce_scatter_block`` → ``reduce_scatter``)
BENCH_NAME = {v: k for k, v in REGISTRY_NAME.items()}


@dataclass(frozen=True)
class Row:
    """One benchmark row timed with the tuning file in force and without, round by round."""

    collective: str
    size: int
    default_algorithm: str
    tuned_algorithm: str
    default: tuple[float, ...]
    tuned: tuple[float, ...]
    #: the rounds of the first look (a block of the median of medians); 0: every round
    block: int = 0

    @property
    def ratios(self) -> list[float]:
        """The rounds' tuned / default times."""
        return [t / d for t, d in zip(self.tuned, self.default, strict=True)]

    @property
    def ratio(self) -> float:
        """The median of the rounds' tuned / default times."""
        return float(np.median(self.ratios))

    @property
    def rounds_won(self) -> int:
        """The rounds in which the file was faster than the defaults."""
        return sum(r < 1 for r in self.ratios)

    @property
    def holds(self) -> bool:
        """Whether the file was faster than the defaults beyond the noise: its wins over every
        round as rare by chance as winning all of the first `block` rounds, and the median of
        the blocks' median ratios `MIN_GAIN` below 1."""
        first = self.block or len(self.tuned)
        return (sign_test(self.rounds_won, len(self.tuned)) <= 0.5 ** first
                and median_of_medians(self.ratios, first) < 1 - MIN_GAIN)


def compare(comm: Any, path: str, rows: Sequence[tuple[str, int]], rounds: int,
            effort: Effort, timer: Timer | None = None,
            progress: Callable[[str], None] | None = None, tables: Tables | None = None,
            most: int = 0) -> list[Row]:
    """Each (collective, size) row with the tuning file ``path`` in force against the built-in
    table, ``rounds`` rounds alternating, up to ``most`` where their spread is large (every
    rank must call; all return the same)."""
    timer = timer or osu_timer(comm)
    tables = tables or Tables(comm)
    out = []
    try:
        for collective, size in rows:
            send, recv = buffers(collective, size, comm.size, comm.rank)
            call = collops_call(comm, collective, send, recv, None)
            tables.use("")
            call()
            default = str(comm.last_algorithm)
            batch = batch_size(comm, f"defaults:{default}", size, call, effort, timer)
            tables.use(path)
            call()
            tuned = str(comm.last_algorithm)
            pair = [Candidate(f"defaults:{default}", call, ""),
                    Candidate(f"tuned:{tuned}", call, path)]
            times = alternating(comm, tables, size, pair, [batch, batch], rounds, timer)
            if most > rounds and max(map(spread, times)) > SPREAD_LIMIT:
                more = alternating(comm, tables, size, pair, [batch, batch], most - rounds,
                                   timer, start=rounds)
                times = (times[0] + more[0], times[1] + more[1])
            row = Row(collective, size, default, tuned, tuple(times[0]), tuple(times[1]),
                      block=rounds)
            out.append(row)
            if progress is not None and comm.rank == 0:
                progress(f"check: {collective} {size} B: tuned {tuned} / default {default} "
                         f"×{row.ratio:.2f}, faster in {row.rounds_won} of "
                         f"{len(row.tuned)} rounds")
    finally:
        tables.use("")
    return out


@dataclass(frozen=True)
class Check:
    """The verification of one rule: its rows, whether it is kept, whether the rows are
    rounds of jobs of their own (`across.verify_in_jobs`) rather than of the tuning job, and
    why the machine's state over the run refused it (`state.judge`)."""

    rows: tuple[Row, ...]
    kept: bool
    jobs: bool = False
    #: why a rule the verification kept was refused after all (`state.judge`), or ""
    refused: str = ""


#: (collective, min_bytes) of a rule -> its verification
Checks = dict[tuple[str, int], Check]


def verify_job(comm: Any, decisions: Mapping[str, Sequence[Decision]], transport: str,
               effort: Effort, timer: Timer | None = None,
               progress: Callable[[str], None] | None = None) -> Checks:
    """Every rule the decisions make, re-timed against the defaults with the rules in force;
    a rule is kept where every row of it `holds` and the file chose what the rule says."""
    from .table import write_table

    timer = timer or osu_timer(comm)
    scratch = Scratch()
    tables = Tables(comm)
    path = scratch.write(write_table({comm.size: decisions}, {}, transport))
    out: Checks = {}
    try:
        for collective, ds in decisions.items():
            for r in ranges(ds):
                rows = compare(comm, path, [(collective, d.size or 0) for d in r.decisions],
                               effort.verify_rounds, effort, timer, progress, tables,
                               effort.verify_most)
                chose = all(row.tuned_algorithm == r.algorithm for row in rows)
                out[(collective, r.low)] = Check(tuple(rows),
                                                 chose and all(row.holds for row in rows))
    finally:
        tables.use("")
        scratch.close()
    return out


def rows_of_file(path: str, ranks: int) -> list[tuple[str, int]]:
    """The benchmark rows a tuning file's rules for ``ranks`` ranks were measured at (their
    ``evidence.sizes``), in the file's order."""
    with open(path, "rb") as f:
        data = tomllib.load(f)
    out: list[tuple[str, int]] = []

    def add(collective: str, rule: Mapping[str, Any]) -> None:
        low, high = rule.get("min_ranks", 1), rule.get("max_ranks")
        if low <= ranks and (high is None or ranks <= high):
            for size in rule.get("evidence", {}).get("sizes", []):
                row = (BENCH_NAME.get(collective, collective), int(size))
                if row not in out:
                    out.append(row)

    for name, table in data.items():
        if name == "protocols":
            for params in table.values():
                for rules in params.values():
                    for rule in rules:
                        if "collective" in rule:
                            add(rule["collective"], rule)
        elif isinstance(table, Mapping):
            for rule in table.get("rule", []):
                add(name, rule)
    return out
