"""Where each step of a schedule goes in a picture: its lane (rank) and its span on the x axis.

The x axis is either *logical* — the step's level in the cross-rank dependency graph (the
simulator's levels: a receive sits one level after its send, a local dependency keeps the
level), with the steps of one rank at one level side by side — or *simulated time*: the level's
phase start and end in the congestion model's run on a topology (`collops.sim`), so wide boxes
are phases whose hottest link carries much data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..schedule import Schedule, StepKind
from ..sim.program import match_messages, step_levels

KIND_NAMES = {int(StepKind.SEND): "send", int(StepKind.RECV): "recv",
              int(StepKind.COPY): "copy", int(StepKind.REDUCE): "reduce"}


@dataclass(frozen=True, eq=False)
class Timeline:
    """Every step of every rank, placed: global columns indexed by global step id."""

    title: str
    nranks: int
    rank: np.ndarray  # lane of each step
    index: np.ndarray  # the step's id within its rank's schedule
    kind: np.ndarray
    peer: np.ndarray
    nbytes: np.ndarray
    level: np.ndarray
    x0: np.ndarray  # span on the x axis (levels, or seconds when ``unit`` is "s")
    x1: np.ndarray
    send_steps: np.ndarray  # matched messages: global ids of the send and the receive
    recv_steps: np.ndarray
    dep_from: np.ndarray  # local dependencies, global ids
    dep_to: np.ndarray
    unit: str = "level"

    @property
    def num_levels(self) -> int:
        """Number of levels (0 for an empty schedule)."""
        return int(self.level.max()) + 1 if len(self.level) else 0

    def label(self, step: int) -> str:
        """``send→1 16 B`` — what a step does, to whom, how much."""
        kind = KIND_NAMES.get(int(self.kind[step]), "?")
        arrow = {"send": f"→{self.peer[step]}", "recv": f"←{self.peer[step]}"}.get(kind, "")
        return f"{kind}{arrow} {_bytes(int(self.nbytes[step]))}"


def timeline(schedules: Sequence[Schedule], itemsize: int, title: str = "",
             phase_times: np.ndarray | None = None) -> Timeline:
    """Place every step of ``schedules``; with ``phase_times`` (seconds per level, from a
    simulation) on a time axis, else on levels."""
    p = len(schedules)
    lengths = np.array([len(s) for s in schedules], dtype=np.int64)
    base = np.concatenate(([0], np.cumsum(lengths)))
    total = int(base[-1])
    rank = np.repeat(np.arange(p, dtype=np.int64), lengths)
    index = np.arange(total, dtype=np.int64) - base[rank] if total else rank.copy()
    cat = _concatenate(schedules)
    kind, peer, seq, count = (cat[k] for k in ("kind", "peer", "seq", "count"))
    dep_from = np.concatenate([s.dep_from.astype(np.int64) + base[r]
                               for r, s in enumerate(schedules)] or [np.zeros(0, np.int64)])
    dep_to = np.concatenate([s.dep_to.astype(np.int64) + base[r]
                             for r, s in enumerate(schedules)] or [np.zeros(0, np.int64)])
    send_steps, recv_steps = match_messages(rank, kind, peer, seq, p)
    level = step_levels(total, dep_from, dep_to, send_steps, recv_steps)
    by_time = np.lexsort((rank[send_steps], level[send_steps]))  # messages numbered by level
    send_steps, recv_steps = send_steps[by_time], recv_steps[by_time]
    x0, x1 = _spans(rank, level, p, phase_times)
    return Timeline(title, p, rank, index, kind, peer, count * int(itemsize), level, x0, x1,
                    send_steps, recv_steps, dep_from, dep_to,
                    "level" if phase_times is None else "s")


def _concatenate(schedules: Sequence[Schedule]) -> dict[str, np.ndarray]:
    return {k: np.concatenate([getattr(s, k).astype(np.int64) for s in schedules]
                              or [np.zeros(0, np.int64)])
            for k in ("kind", "peer", "seq", "count")}


def _spans(rank: np.ndarray, level: np.ndarray, p: int,
           phase_times: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Each step's span: its level's start plus its place among the steps its rank has at that
    level (side by side, in schedule order)."""
    n = len(level)
    if n == 0:
        return np.zeros(0), np.zeros(0)
    cell = level * p + rank
    order = np.lexsort((np.arange(n), cell))
    first = np.r_[True, cell[order][1:] != cell[order][:-1]]
    starts = np.flatnonzero(first)
    slot = np.empty(n, dtype=np.int64)
    slot[order] = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    levels = int(level.max()) + 1
    width = np.zeros(levels, dtype=np.int64)  # slots a level needs: its busiest rank's steps
    np.maximum.at(width, level, slot + 1)
    if phase_times is None:
        start = np.concatenate(([0], np.cumsum(width)))[:-1].astype(np.float64)
        duration = width.astype(np.float64)
    else:
        duration = np.zeros(levels)
        duration[: min(levels, len(phase_times))] = phase_times[:levels]
        # a level without messages (local steps only) gets a sliver so its boxes show
        duration = np.where(duration > 0, duration, max(duration.max(), 1e-9) * 0.05)
        start = np.concatenate(([0.0], np.cumsum(duration)))[:-1]
    step_width = duration[level] / width[level]
    x0 = start[level] + slot * step_width
    return x0, x0 + step_width * 0.9


def _bytes(n: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % (size // 16 or 1) == 0:
            return f"{n / size:g} {unit}"
    return f"{n} B"
