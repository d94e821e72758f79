"""`collops check`: is an algorithm's schedule a correct program, at every rank count and size?

For each case (a collective call on ``p`` ranks with given counts, inputs and numpy's answer,
from `collops.check.cases`) the checker

1. builds every rank's schedule (a builder that raises is reported with its file and line);
2. checks the schedules' buffers against the call (SEND and RECV areas of the right size);
3. validates them (`collops.schedule.validate`): every send matched by exactly one receive of
   the same size, no two unordered steps of a rank touching overlapping elements with one of
   them writing (a race), and no cycle of waits between ranks (deadlock freedom under any
   legal progress order);
4. checks that every element of every rank's output is written by some step;
5. runs the schedules in the reference executor and compares each rank's output with numpy's.

The first problem of a case stops it; the report names the rank, the step and the reason, with a
hint in plain words. Cases the algorithm's restrictions exclude are skipped and counted.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import ops
from ..algorithms.registry import Algorithm
from ..errors import CollopsError, DeadlockError, ScheduleError
from ..schedule import Buffer, Schedule, StepKind, run_reference, validate
from .cases import LAST_NONZERO, Case, make_case

HINTS = {
    "never received": "each send needs a receive on the peer, in the same order between the "
                      "two ranks, of the same number of elements",
    "has no send": "each receive needs a send from the peer, in the same order between the two "
                   "ranks, of the same number of elements",
    "are sent": "a send and its receive must move the same number of elements",
    "concurrently": "two steps with no dependency between them may run at the same time; give "
                    "one of them after=[the other's id] so they are ordered",
    "deadlock": "every rank in the cycle waits for a message that another rank in it sends only "
                "later; reorder the steps or post receives before the sends they wait on",
    "outside": "a region reaches past the end of its buffer; check offsets and counts",
    "never written": "every output element must be received, copied or reduced into by some "
                     "step",
    "numpy": "the schedule runs, but computes something else than the collective",
}


@dataclass(frozen=True)
class Problem:
    """What went wrong in one case, in words."""

    case: str
    message: str
    hint: str = ""

    def __str__(self) -> str:
        hint = f"\n  hint: {self.hint}" if self.hint else ""
        return f"{self.case}\n  {self.message}{hint}"


@dataclass
class Report:
    """The outcome of checking one algorithm over many cases."""

    algorithm: str
    checked: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether every case checked passed (and at least one was checked)."""
        return self.checked > 0 and not self.problems


def check_algorithm(alg: Algorithm, nprocs: Iterable[int], sizes: Iterable[int],
                    stop_at_first: bool = True) -> Report:
    """Check ``alg`` on every case of ``nprocs`` × ``sizes`` (see the module docstring)."""
    report = Report(f"{alg.collective}.{alg.name}")
    sizes = list(sizes)
    for p in nprocs:
        for case in cases(alg.collective, p, sizes):
            reasons = alg.reasons_ineligible(case.specs[0])
            if reasons:
                report.skipped[reasons[0]] = report.skipped.get(reasons[0], 0) + 1
                continue
            report.checked += 1
            problem = check_case(alg, case)
            if problem is not None:
                report.problems.append(problem)
                if stop_at_first:
                    return report
    return report


def cases(collective: str, p: int, sizes: Sequence[int]) -> list[Case]:
    """The calls checked at ``p`` ranks: each size, rooted calls at the first and last root,
    v-variants with even and uneven counts, reductions with a commutative and a
    non-commutative operator."""
    out = []
    for i, count in enumerate(sizes):
        if collective in ("reduce", "allreduce", "reduce_scatter", "reduce_scatter_block",
                          "scan", "exscan"):
            for j, (dtype, op) in enumerate([(np.float64, ops.SUM), (np.int64, LAST_NONZERO)]):
                out.append(make_case(collective, p, count, dtype=dtype, op=op,
                                     root=(p - 1) * j, uneven=bool(j), seed=i * 7 + j))
        else:
            for j, root in enumerate(sorted({0, p - 1})):
                out.append(make_case(collective, p, count, dtype=np.int32, root=root,
                                     uneven=bool(j), seed=i * 7 + j))
    return out


def describe(case: Case) -> str:
    """The case in one line: collective, ranks, counts, dtype, operator, root."""
    s = case.specs[0]
    parts = [f"{case.collective} on {s.size} rank{'s' if s.size != 1 else ''}"]
    if s.counts and len(set(s.counts)) > 1:
        parts.append(f"counts {list(s.counts)}")
    elif case.collective in ("alltoallv",):
        parts.append(f"sendcounts per rank {[list(x.sendcounts) for x in case.specs]}")
    else:
        parts.append(f"count {s.count or (s.counts[0] if s.counts else 0)}")
    parts.append(f"dtype {case.dtype}")
    if case.op is not None:
        parts.append(f"op {case.op.name}")
    if case.collective in ("bcast", "scatter", "scatterv", "gather", "gatherv", "reduce"):
        parts.append(f"root {s.root}")
    return ", ".join(parts)


def check_case(alg: Algorithm, case: Case) -> Problem | None:
    """The first problem of ``alg`` on ``case``, or None when it is right."""
    where = describe(case)
    p = case.specs[0].size
    schedules: list[Schedule] = []
    for r in range(p):
        try:
            schedules.append(alg.build(r, case.specs[r]))
        except Exception as exc:  # a user's builder may raise anything: report where
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            return Problem(where, f"building rank {r}'s schedule raised {type(exc).__name__}: "
                                  f"{exc} (File {frame.filename}, line {frame.lineno})")
    for r, s in enumerate(schedules):
        areas = case.specs[r].buffer_counts(r)
        if (s.send_count, s.recv_count) != areas:
            return Problem(where, f"rank {r}'s schedule has SEND of {s.send_count} and RECV of "
                                  f"{s.recv_count} elements; this call has {areas[0]} and "
                                  f"{areas[1]}", "build with collops.builder_for(rank, spec)")
    try:
        validate(schedules)
    except DeadlockError as exc:
        return Problem(where, str(exc), HINTS["deadlock"])
    except ScheduleError as exc:
        text = str(exc).removeprefix("invalid schedules:\n  ")
        return Problem(where, text, _hint(text))
    for r, s in enumerate(schedules):
        want = case.expected[r]
        if want is None or not len(want):
            continue
        gaps = unwritten(s, len(want))
        if gaps:
            lo, hi = gaps[0]
            shown = f"element {lo}" if hi == lo + 1 else f"elements {lo}..{hi - 1}"
            return Problem(where, f"rank {r}: output {shown} (of {len(want)}) never written",
                           HINTS["never written"])
    try:
        results = run_reference(schedules, case.inputs, case.dtype, case.op)
    except CollopsError as exc:
        return Problem(where, f"running the schedules failed: {exc}")
    for r, got in enumerate(results):
        want = case.expected[r]
        if want is None:
            continue
        got = np.asarray(got).reshape(-1)[: len(want)]
        bad = _first_difference(got, want)
        if bad is not None:
            return Problem(where, f"rank {r}: output element {bad} is {got[bad]!r}, numpy says "
                                  f"{want[bad]!r}", HINTS["numpy"])
    return None


def unwritten(s: Schedule, n: int) -> list[tuple[int, int]]:
    """The ranges of RECV[0:n] that no step receives, copies or reduces into."""
    written = np.zeros(n, dtype=bool)
    writes = np.isin(s.kind, [StepKind.RECV, StepKind.COPY, StepKind.REDUCE]) & (
        s.dst_buf == Buffer.RECV)
    for off, count in zip(s.dst_off[writes].tolist(), s.count[writes].tolist(), strict=True):
        written[off: off + count] = True
    gaps = []
    missing = np.flatnonzero(~written)
    if missing.size:
        breaks = np.flatnonzero(np.diff(missing) != 1)
        starts = np.concatenate(([missing[0]], missing[breaks + 1]))
        ends = np.concatenate((missing[breaks], [missing[-1]])) + 1
        gaps = list(zip(starts.tolist(), ends.tolist(), strict=True))
    return gaps


def _first_difference(got: np.ndarray, want: np.ndarray) -> int | None:
    if got.shape != want.shape:
        return min(len(got), len(want))
    if want.dtype.kind in "fc":
        same = np.isclose(got, want, rtol=1e-5)
    else:
        same = got == want
    bad = np.flatnonzero(~np.asarray(same).reshape(-1))
    return int(bad[0]) if bad.size else None


def _hint(text: str) -> str:
    for key, hint in HINTS.items():
        if key in text:
            return hint
    return ""
