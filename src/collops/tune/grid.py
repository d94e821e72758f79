"""The tuning grid timed in passes (every rank runs `measure_job`).

Per collective and size the candidates are the built-in default (the call without
``algorithm=``, no tuning file in force), every other algorithm the transport offers that can
take the call, and the default with each alternative protocol setting (`protocols.KNOBS`, in a
tuning file of its own). The grid is timed in ``effort.passes`` passes, each over every point
in a shuffled order (the same on every rank), so the passes are spread over the whole run and
a point's passes see the machine at different times; within a pass a point's candidates are
interleaved, each round begun by the next of them (`measure.time_rounds`). Where neighbouring
sizes have different winners after the first pass, the size between them is added
(`decide.refine_points`) and timed in every later pass too. After the passes, a point whose
winner won some rounds but not all (`decide.Decision.worth_more`) times it against the
default in ``effort.extra_rounds`` more rounds (``effort.extra_most`` where either side's
rounds spread widely), which goes first alternating.
A candidate that fails is dropped from its size.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..bench.measure import REGISTRY_NAME, buffers, collops_call
from .decide import Decision, Timing, decide, refine_points
from .measure import (
    Candidate,
    Effort,
    Tables,
    Timer,
    agreed,
    alternating,
    batch_size,
    candidates,
    osu_timer,
    spec_for,
    time_rounds,
    works,
)
from .protocols import KNOBS, Knob, Scratch, alternatives, setting_rule


@dataclass
class Point:
    """One collective and size: its candidates, what each is, and their repetitions so far."""

    collective: str
    size: int
    nbytes: int
    default: str
    entries: list[Candidate]
    kinds: list[tuple[str, tuple[str, Any] | None]]
    batches: list[int]
    samples: list[list[float]] = field(default_factory=list)
    #: rounds per pass
    block: int = 1
    #: the extra rounds: the winner's label, its samples and the default's
    extra: tuple[str, list[float], list[float]] | None = None

    def decision(self) -> Decision:
        """The decision from the repetitions so far (and the extra rounds, if any)."""
        timings = [Timing(alg, tuple(s), setting)
                   for (alg, setting), s in zip(self.kinds, self.samples, strict=True)]
        d = replace(decide(self.nbytes, timings, self.default, self.size), block=self.block)
        if self.extra is None or self.extra[0] != d.best.label:
            return d
        return replace(d, extra=(replace(d.best, samples=tuple(self.extra[1])),
                                 replace(d.default, samples=tuple(self.extra[2]))))

    def time_more(self, comm: Any, tables: Tables, rounds: int, timer: Timer) -> None:
        """The winner against the default in ``rounds`` rounds, which goes first alternating
        (`extra`)."""
        label = self.decision().best.label
        k = [e.label for e in self.entries].index(label)
        default, best = alternating(comm, tables, self.size, [self.entries[0], self.entries[k]],
                                    [self.batches[0], self.batches[k]], rounds, timer)
        self.extra = (label, best, default)


def measure_job(comm: Any, collectives: Sequence[str], sizes: Sequence[int], effort: Effort,
                timer: Timer | None = None, progress: Callable[[str], None] | None = None,
                knobs: Sequence[Knob] = KNOBS, seed: int = 0) -> dict[str, list[Decision]]:
    """Every collective's decisions (every rank must call; all return the same)."""
    timer = timer or osu_timer(comm)
    tables, scratch = Tables(comm), Scratch()
    points: dict[tuple[str, int], Point] = {}

    def run(keys: list[tuple[str, int]], number: int) -> None:
        for key in keys:
            if key not in points:
                points[key] = _prepare(comm, tables, scratch, *key, effort, timer, knobs)
            p = points[key]
            got = time_rounds(comm, tables, p.size, p.entries, p.batches, effort.repetitions,
                              timer, start=(number - 1) * effort.repetitions)
            p.samples = [old + new for old, new in zip(p.samples, got, strict=True)] \
                if p.samples else got
            if progress is not None and comm.rank == 0:
                d = p.decision()
                progress(f"pass {number}/{effort.passes}: {p.collective} {p.size} B: "
                         f"{d.best.label} {d.best.median * 1e6:.1f} µs (default "
                         f"{d.default.label} {d.default.median * 1e6:.1f} µs)")

    try:
        grid = [(c, s) for c in collectives
                for s in ([0] if c == "barrier" else sorted(set(sizes)))]
        run(_shuffled(grid, seed), 1)
        for _ in range(effort.refinements):
            more = [(c, s) for c in collectives for s in refine_points(
                {s: p.decision() for (k, s), p in points.items() if k == c})
                if (c, s) not in points]
            if not more:
                break
            run(more, 1)
        for number in range(2, effort.passes + 1):
            run(_shuffled(list(points), seed + number), number)
        for key in sorted(points):
            p = points[key]
            d = p.decision()
            if effort.extra_rounds and d.worth_more:
                p.time_more(comm, tables, max(effort.extra_rounds, effort.extra_most)
                            if d.noisy else effort.extra_rounds, timer)
                if progress is not None and comm.rank == 0:
                    d = p.decision()
                    progress(f"extra rounds: {p.collective} {p.size} B: {d.best.label} won "
                             f"{d.rounds_won} of {len(d.ratios)} rounds against "
                             f"{d.default.label}: {'tuned' if d.changed else 'default kept'}")
    finally:
        tables.use("")
        scratch.close()
    return {c: [points[k].decision() for k in sorted(points) if k[0] == c]
            for c in collectives}


def _shuffled(keys: list[tuple[str, int]], seed: int) -> list[tuple[str, int]]:
    out = sorted(keys)
    random.Random(seed).shuffle(out)
    return out


def _prepare(comm: Any, tables: Tables, scratch: Scratch, collective: str, size: int,
             effort: Effort, timer: Timer, knobs: Sequence[Knob]) -> Point:
    """The candidates of one point that run on every rank, and their batch sizes."""
    tables.use("")
    spec = spec_for(collective, size, comm.size)
    send, recv = buffers(collective, size, comm.size, comm.rank)
    default_call = collops_call(comm, collective, send, recv, None)
    default_call()
    default = str(comm.last_algorithm)
    entries = [Candidate(default, default_call)]
    kinds: list[tuple[str, tuple[str, Any] | None]] = [(default, None)]
    for name in candidates(comm, spec):
        call = collops_call(comm, collective, send, recv, name)
        if name != default and works(comm, call, effort.warmup):
            entries.append(Candidate(name, call))
            kinds.append((name, None))
    for knob, value in alternatives(knobs, spec, default):
        text = "\n".join(setting_rule(knob.component, knob.name, value,
                                      REGISTRY_NAME.get(collective, collective), comm.size,
                                      spec.message_bytes(), spec.message_bytes())) + "\n"
        entry = Candidate(Timing(default, (), (knob.key, value)).label, default_call,
                          scratch.write(text))
        tables.use(entry.tables)
        if works(comm, default_call, effort.warmup) and agreed(
                comm, comm.last_algorithm == default):
            entries.append(entry)
            kinds.append((default, (knob.key, value)))
    batches = []
    for entry in entries:
        if tables.use(entry.tables):
            entry.call()
        batches.append(batch_size(comm, entry.label, size, entry.call, effort, timer))
    return Point(collective, size, spec.message_bytes(), default, entries, kinds, batches,
                 block=effort.repetitions)
