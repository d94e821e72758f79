"""Job-wide protocol settings (``protocols.shm.*``, ``protocols.p2p.*``), tuned with a job per
candidate value.

The shared-memory transport reads these as a job starts (a communicator's point-to-point
channel as it is made) (from which size a message goes
single copy, from which a single-copy message is split), so a value cannot be switched within
a job as the per-call settings of `protocols.KNOBS` are. Each candidate value is timed in jobs
of its own, started with a tuning file holding that one setting bounded to the job's rank
count beside the algorithm rules the file will hold (those verified), over the same rows (the
grid's sizes from `JOB_MIN_BYTES`, each collective with the algorithm those rules choose).
The jobs run in passes, each pass one job per candidate in a shuffled order, and a candidate's
row in a pass is compared with the default's of the same pass. A value wins where it was
`decide.MIN_GAIN` faster than the default in every pass on some row and no row's median was
slower by more than `MIN_GAIN` (a point-to-point setting: of the ping-pong rows, the only
ones it can change; of those settings only the best is chosen). The verification then
alternates jobs with the provisional file in force and without (`compare_jobs`), and keeps
each rule only where it beat the defaults on its rows mode by mode (`across`: per-job modes
of a call's time, as with more ranks than cores).
"""

from __future__ import annotations

import math
import random
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..algorithms import tuning
from ..bench.measure import buffers
from ..errors import CollopsError
from ..transport import placement
from . import across
from .decide import MIN_GAIN
from .measure import Effort, batch_size, osu_timer
from .p2p_rows import POINT_TO_POINT, row_call, row_scale
from .protocols import Scratch, toml_value
from .verify import Row

#: the component whose settings a job reads as it starts (most of them: its transport's)
COMPONENT = "shm"
#: rows below this many bytes per rank never reach the settings tuned here; --quick times the
#: large rows alone (its job-wide settings are the single copy's and the stream's)
JOB_MIN_BYTES = {False: 4096, True: 262144}
#: a burst's largest messages (past them its rings are a bulk copy's: the collectives' rows)
BURST_MAX_BYTES = 65536
#: passes over the candidates (a pass: a job each), with --quick and without
JOB_PASSES = {True: 2, False: 3}

#: (collective, bytes per rank): one benchmark row
JobRow = tuple[str, int]
#: runs a job of the given tuning file ("": the built-in table) over the rows; per row the
#: algorithm that ran and seconds per call
Launch = Callable[[str, Sequence[JobRow]], list[tuple[str, float]]]


@dataclass(frozen=True)
class JobKnob:
    """A setting ``protocols.<component>.<name>``, the values to try, whether ``--quick``
    does, and which jobs read it (``oversubscribed``: those of more ranks than CPUs only,
    ``False``: the others only, ``None``: all; ``transports``: jobs over these)."""

    name: str
    values: tuple[Any, ...]
    quick: bool = False
    oversubscribed: bool | None = None
    #: read by point-to-point messages alone (the cells), so judged on their rows alone
    point_to_point: bool = False
    component: str = COMPONENT
    transports: tuple[str, ...] = ("shm",)
    #: read on shm only where point-to-point envelopes go as messages (``shm.p2p_cells`` off)
    without_cells: bool = False

    @property
    def key(self) -> str:
        """``component.name``."""
        return f"{self.component}.{self.name}"

    def read_by(self, ranks: int, transport: str = "shm") -> bool:
        """Whether a job of ``ranks`` ranks over ``transport`` on this machine reads the
        setting."""
        if transport not in self.transports or (
                transport == "shm" and self.without_cells
                and tuning.setting(COMPONENT, "p2p_cells", None, None, ranks).value):
            return False
        return self.oversubscribed in (None, ranks > placement.job_cpu_count())

    def judged_on(self, rows: Sequence[JobRow]) -> list[int]:
        """The indices of the rows the setting can change."""
        return [i for i, (c, _) in enumerate(rows)
                if not self.point_to_point or c in POINT_TO_POINT]


#: single copy from 512 KiB or from 8 MiB (the built-in table: 2 MiB; a job of more ranks
#: than CPUs: always, else from 1 or 8 MiB); the stream's chunks of 64 or 256 KiB (built in:
#: 128 KiB); direct slots of 32 or 128 KiB a rank (built in: 64 KiB); single-copy messages
#: split from 1 or 4 MiB on (built in: 256 KiB); point-to-point envelopes as transport
#: messages instead of cells (built in: cells), cells of 256 B, 1 KiB or 4 KiB other than the
#: built-in size (4 KiB up to 4 ranks, a payload up to about 4000 B inline; else 1 KiB), 16 or
#: 256 cells per pair ring (built in: 64 up to 4 ranks, 16 up to 16, else 4); the pair ring's
#: slots of 4 or 32 KiB (built in: 8 KiB; an eager message takes a slot less its 64-byte
#: header); a point-to-point payload inline up to 1 or 16 KiB (built in: 4 KiB; read where
#: envelopes go as messages: threads, shm without cells). A value whose job cannot start (its
#: segment does not fit) is dropped.
JOB_KNOBS: tuple[JobKnob, ...] = (
    JobKnob("single_copy_min", (524288, 8388608), quick=True, oversubscribed=False),
    JobKnob("single_copy_min_oversubscribed", (1048576, 8388608), quick=True,
            oversubscribed=True),
    JobKnob("stream_chunk_bytes", (65536, 262144), quick=True),
    JobKnob("p2p_cells", (False,), quick=True, point_to_point=True),
    JobKnob("p2p_cell_bytes", (256, 1024, 4096), quick=True, point_to_point=True),
    JobKnob("p2p_ring_cells", (16, 256), quick=True, point_to_point=True),
    JobKnob("ring_slot_bytes", (4096, 32768)),
    JobKnob("direct_bytes", (32768, 131072)),
    JobKnob("split_min", (1048576, 4194304)),
    JobKnob("inline_max", (1024, 16384), quick=True, point_to_point=True, component="p2p",
            transports=("shm", "inproc"), without_cells=True),
)


@dataclass(frozen=True)
class JobRule:
    """A job-wide setting the passes chose for ``ranks`` ranks, with its evidence and its
    verification (``rows``, tuned / default per row; ``kept``: it held)."""

    name: str
    value: Any
    default: Any
    ranks: int
    rows: tuple[JobRow, ...]
    median_us: tuple[float, ...]
    default_median_us: tuple[float, ...]
    passes: int
    checked: tuple[Row, ...] = ()
    kept: bool = False
    #: why a setting the verification kept was refused after all (`state.judge`), or ""
    refused: str = ""
    component: str = COMPONENT

    @property
    def key(self) -> str:
        """``component.name``."""
        return f"{self.component}.{self.name}"

    def won_rows(self) -> set[JobRow]:
        """The rows on which the value beat the defaults in the passes."""
        return {row for row, t, d in zip(self.rows, self.median_us, self.default_median_us,
                                         strict=True) if t < d * (1 - MIN_GAIN)}


def job_rows(collectives: Sequence[str], sizes: Sequence[int], quick: bool) -> list[JobRow]:
    """The rows the job-wide settings are timed at: the collectives' from `JOB_MIN_BYTES`,
    the point-to-point ones (whose cells matter at the smallest sizes) at every size, a
    burst's up to `BURST_MAX_BYTES`."""
    return [(c, s) for c in collectives if c != "barrier"
            for s in sorted(set(sizes))
            if (s >= JOB_MIN_BYTES[quick] and c not in POINT_TO_POINT) or c == "pingpong"
            or (c == "burst" and s <= BURST_MAX_BYTES)]


def setting_file(name: str, value: Any, ranks: int, component: str = COMPONENT) -> str:
    """A tuning file holding the one job-wide setting ``protocols.<component>.<name> =
    value`` for jobs of ``ranks`` ranks."""
    return (f"[[protocols.{component}.{name}]]\nmin_ranks = {ranks}\nmax_ranks = {ranks}\n"
            f"value = {toml_value(value)}\n")


def time_rows(comm: Any, rows: Sequence[JobRow], effort: Effort) -> list[tuple[str, float]]:
    """What every rank of a job runs: each row with the built-in choice of algorithm (a
    point-to-point row, `p2p_rows`: ``p2p``, between ranks 0 and 1), the median of
    ``effort.repetitions`` batches (seconds per call or message, the slowest rank's)."""
    out = []
    for collective, size in rows:
        send, recv = buffers(collective, size, comm.size, comm.rank)
        call = row_call(comm, collective, send, recv)
        for _ in range(effort.warmup):
            call()
        algorithm = "p2p" if collective in POINT_TO_POINT else str(comm.last_algorithm)
        timer = osu_timer(comm)
        batch = batch_size(comm, algorithm, size, call, effort, timer)
        scale = row_scale(collective, size) / batch
        samples = []
        for _ in range(max(3, effort.repetitions)):
            mine = timer(algorithm, size, call, batch) * scale
            samples.append(float(comm.allreduce(np.array([mine]), "max")[0]))
        out.append((algorithm, float(np.median(samples))))
    return out


def tune_job_settings(ranks: int, rows: Sequence[JobRow], effort: Effort, quick: bool,
                      launch: Launch, progress: Callable[[str], None] | None = None,
                      knobs: Sequence[JobKnob] = JOB_KNOBS, seed: int = 0,
                      base: str = "", transport: str = "shm") -> list[JobRule]:
    """The job-wide settings for jobs of ``ranks`` ranks over ``transport``, timed beside the
    tuning-file text ``base`` (the algorithm rules already chosen): the winners of the passes,
    each verified (``kept``) or not; none when there is no row."""
    knobs = [k for k in knobs if (k.quick or not quick) and k.read_by(ranks, transport)]
    rows = [r for r in rows if ranks >= 2 or r[0] not in POINT_TO_POINT]
    if all(k.point_to_point for k in knobs):  # the other rows cannot change
        rows = [r for r in rows if r[0] in POINT_TO_POINT]
    if not rows or not knobs:
        return []
    scratch, start = Scratch(), time.perf_counter()
    try:
        candidates: dict[tuple[str, Any] | None, str] = {
            None: scratch.write(base) if base.strip() else ""}
        defaults = {k.key: tuning.setting(k.component, k.name, None, None, ranks).value
                    for k in knobs}
        for knob in knobs:
            for value in knob.values:
                if value != defaults[knob.key]:
                    candidates[(knob.key, value)] = scratch.write(
                        setting_file(knob.name, value, ranks, knob.component) + "\n" + base)
        samples: dict[tuple[str, Any] | None, list[list[float]]] = {c: [] for c in candidates}
        order = list(candidates)
        passes = JOB_PASSES[quick]
        for number in range(1, passes + 1):
            random.Random(seed + number).shuffle(order)
            for candidate in list(order):
                try:
                    got = launch(candidates[candidate], rows)
                except CollopsError as exc:
                    if candidate is None:
                        raise
                    order.remove(candidate)
                    del samples[candidate]
                    if progress is not None:
                        progress(f"job pass {number}/{passes}, {ranks} ranks, "
                                 f"{_label(candidate)}: dropped ({exc})".splitlines()[0])
                    continue
                samples[candidate].append([t for _, t in got])
                if progress is not None:
                    progress(f"job pass {number}/{passes}, {ranks} ranks, {_label(candidate)}: "
                             + ", ".join(f"{c} {s} B {t * 1e6:.1f} µs"
                                         for (c, s), (_, t) in zip(rows, got, strict=True)))
        chosen = _chosen(knobs, defaults, ranks, rows, samples)
        if not chosen:
            return []
        path = scratch.write("".join(setting_file(r.name, r.value, ranks, r.component) + "\n"
                                     for r in chosen) + base)
        rows = [row for row in rows if any(row in r.rows for r in chosen)]

        def verdicts(got: Sequence[Row]) -> list[tuple[bool, bool]]:
            """Per rule: whether it holds, whether more rounds cannot change that."""
            out = []
            for rule in chosen:
                mine = [r for r in got if (r.collective, r.size) in rule.rows]
                won = rule.won_rows()

                def won_by(row: Row, won: set[JobRow] = won) -> bool:
                    return (row.collective, row.size) in won
                out.append((across.holds(mine, won_by), across.settled(mine, won_by)))
            return out

        first, most = across.ROUNDS[quick]
        checked = compare_jobs(launch, path, rows, first, progress, ranks, candidates[None],
                               across.LONELY_ROUNDS[quick],
                               lambda got: all(done for _, done in verdicts(got))
                               or across.enough(got, most))
        return [replace(r, checked=tuple(c for c in checked if (c.collective, c.size)
                                         in r.rows), kept=held)
                for r, (held, _) in zip(chosen, verdicts(checked), strict=True)]
    finally:
        scratch.close()
        if progress is not None:
            progress(f"job-wide settings, {ranks} ranks: {time.perf_counter() - start:.0f} s")


def _label(candidate: tuple[str, Any] | None) -> str:
    return "defaults" if candidate is None else f"{candidate[0]}={candidate[1]}"


def _chosen(knobs: Sequence[JobKnob], defaults: Mapping[str, Any], ranks: int,
            rows: Sequence[JobRow],
            samples: Mapping[tuple[str, Any] | None, list[list[float]]]) -> list[JobRule]:
    """The winning value of each knob (`_winner`); of the point-to-point knobs, which set the
    same messages' way (no cells makes their size moot), only the best."""
    found = [(knob, _winner(knob, defaults[knob.key], ranks, rows, samples))
             for knob in knobs]
    chosen = [(score, rule) for knob, got in found if got is not None
              for score, rule in [got] if not knob.point_to_point]
    cells = sorted((got for knob, got in found if got is not None and knob.point_to_point),
                   key=lambda got: got[0])
    return [rule for _, rule in chosen + cells[:1]]


def _winner(knob: JobKnob, default: Any, ranks: int, rows: Sequence[JobRow],
            samples: Mapping[tuple[str, Any] | None, list[list[float]]]
            ) -> tuple[float, JobRule] | None:
    """The value of ``knob`` that beat the defaults (see the module docstring), if one did,
    and its score (the geometric mean of its rows' ratios to the defaults)."""
    judged = knob.judged_on(rows)
    if not judged:
        return None
    base = np.array(samples[None])[:, judged]  # passes × rows
    rows = [rows[i] for i in judged]
    best: tuple[float, JobRule] | None = None
    for (name, value), got in ((c, np.array(s)[:, judged]) for c, s in samples.items() if c):
        if name != knob.key:
            continue
        won = (got < base * (1 - MIN_GAIN)).all(axis=0)
        ratios = np.median(got, axis=0) / np.median(base, axis=0)
        if not won.any() or ratios.max() > 1 + MIN_GAIN:
            continue
        score = float(np.exp(np.log(ratios).mean()))
        rule = JobRule(knob.name, value, default, ranks, tuple(rows),
                       tuple(round(float(x) * 1e6, 3) for x in np.median(got, axis=0)),
                       tuple(round(float(x) * 1e6, 3) for x in np.median(base, axis=0)),
                       len(base), component=knob.component)
        if best is None or score < best[0]:
            best = (score, rule)
    return best


def compare_jobs(launch: Launch, path: str, rows: Sequence[JobRow], rounds: int,
                 progress: Callable[[str], None] | None = None, ranks: int = 0,
                 without: str = "", most: int = 0,
                 settled: Callable[[list[Row]], bool] | None = None,
                 suffix: str = " (job-wide settings)") -> list[Row]:
    """Each row in jobs with the tuning file ``without`` ("": the built-in table) and with
    ``path``, alternating (which goes first alternating too): ``rounds`` rounds, then more up
    to ``most`` until ``settled`` says the rows so far decide. A row's tuned algorithm is
    named with ``suffix``."""
    default: list[list[tuple[str, float]]] = []
    tuned: list[list[tuple[str, float]]] = []

    def found() -> list[Row]:
        return [Row(c, s, default[0][i][0], f"{tuned[0][i][0]}{suffix}",
                    tuple(run[i][1] for run in default), tuple(run[i][1] for run in tuned))
                for i, (c, s) in enumerate(rows)]

    number = 0
    while number < rounds or (number < most and settled is not None
                              and not settled(found())):
        for which in ((default, without), (tuned, path))[:: 1 if number % 2 == 0 else -1]:
            which[0].append(launch(which[1], rows))
        number += 1
        if progress is not None:
            progress(f"job check {number}/{max(rounds, most)}, {ranks} ranks: " + ", ".join(
                f"{c} {s} B ×{t / d:.2f}" for (c, s), (_, d), (_, t)
                in zip(rows, default[-1], tuned[-1], strict=True)))
    return found()


def job_rows_of_file(path: str, ranks: int) -> list[JobRow]:
    """The rows a tuning file's job-wide rules for ``ranks`` ranks were measured at."""
    with open(path, "rb") as f:
        data = tomllib.load(f)
    out: list[JobRow] = []
    components = data.get("protocols", {})
    for rules in [r for c in sorted({k.component for k in JOB_KNOBS})
                  for r in components.get(c, {}).values()]:
        for rule in rules:
            low, high = rule.get("min_ranks", 1), rule.get("max_ranks", math.inf)
            evidence = rule.get("evidence", {})
            if "collective" in rule or not low <= ranks <= high:
                continue
            for row in zip(evidence.get("collectives", []), evidence.get("sizes", []),
                           strict=False):
                if row not in out:
                    out.append((str(row[0]), int(row[1])))
    return out


def rule_lines(rule: JobRule, source: str) -> list[str]:
    """A kept rule as table lines, or a comment naming a dropped one and why."""
    ratios = [round(r.ratio, 3) for r in rule.checked]
    if not rule.kept:
        why = (f"verified, then refused: {rule.refused}" if rule.refused else
               "tuned / default " + ", ".join(f"{x:.2f}" for x in ratios))
        return [f"# dropped after verification: protocols.{rule.key} = {rule.value!r}, "
                f"{rule.ranks} ranks: {why}"]
    evidence = {"collectives": [c for c, _ in rule.rows], "sizes": [s for _, s in rule.rows],
                "median_us": list(rule.median_us),
                "default_median_us": list(rule.default_median_us),
                "default": rule.default, "passes": rule.passes, "verified_ratio": ratios,
                "verified_rounds": len(rule.checked[0].tuned) if rule.checked else 0}
    return [f"[[protocols.{rule.key}]]  # job-wide: read as the job starts",
            f"min_ranks = {rule.ranks}", f"max_ranks = {rule.ranks}",
            f"value = {toml_value(rule.value)}", f"source = {toml_value(source)}",
            "evidence = { " + ", ".join(f"{k} = {toml_value(v)}" for k, v in evidence.items())
            + " }"]
