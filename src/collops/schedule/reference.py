"""The reference executor: every rank's schedule run in one process, deterministically.

It is the oracle of the tests. Steps run as soon as their dependencies allow, rank by rank
in rank order; a send deposits a copy of its data in a channel keyed by
``(source, destination, seq)``; a receive completes when its message is there. When no step
can run and some remain, the schedules deadlock and a `DeadlockError` names what is stuck.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

from ..errors import DeadlockError, MessageSizeMismatch
from ..ops import SUM, Op
from .local import apply_reduce
from .table import Schedule, StepKind


def run_reference(
    schedules: Sequence[Schedule],
    sendbufs: Sequence[np.ndarray | None],
    dtype: np.dtype | type,
    op: Op | None = None,
    fill: int = 0,
) -> list[np.ndarray]:
    """Run all ranks' schedules; returns each rank's RECV area as a flat array of ``dtype``."""
    dtype = np.dtype(dtype)
    op = op or SUM
    areas: list[list[np.ndarray]] = []
    for sched, data in zip(schedules, sendbufs, strict=True):
        send = np.zeros(sched.send_count, dtype)
        if data is not None and sched.send_count:
            flat = np.asarray(data, dtype=dtype).reshape(-1)
            send[: len(flat)] = flat[: sched.send_count]
        recv = np.full(sched.recv_count, fill, dtype) if dtype.kind != "V" else np.zeros(
            sched.recv_count, dtype)
        tmp = np.zeros(sched.tmp_count, dtype)
        areas.append([send, recv, tmp])

    waiting = [s.indegrees() for s in schedules]
    succ = [s.successors() for s in schedules]
    ready = [deque(np.nonzero(w == 0)[0].tolist()) for w in waiting]
    blocked_recvs: list[list[int]] = [[] for _ in schedules]
    channels: dict[tuple[int, int, int], np.ndarray] = {}
    remaining = sum(len(s) for s in schedules)

    def complete(r: int, step: int) -> None:
        nonlocal remaining
        remaining -= 1
        for nxt in succ[r][step]:
            waiting[r][nxt] -= 1
            if waiting[r][nxt] == 0:
                ready[r].append(nxt)

    progress = True
    while remaining and progress:
        progress = False
        for r, s in enumerate(schedules):
            bufs = areas[r]
            still: list[int] = []
            for step in blocked_recvs[r]:
                key = (int(s.peer[step]), r, int(s.seq[step]))
                if key in channels:
                    _deliver(s, step, bufs, channels.pop(key))
                    complete(r, step)
                    progress = True
                else:
                    still.append(step)
            blocked_recvs[r] = still
            while ready[r]:
                step = ready[r].popleft()
                progress = True
                kind = s.kind[step]
                n = int(s.count[step])
                if kind == StepKind.SEND:
                    src = bufs[s.src_buf[step]][s.src_off[step]: s.src_off[step] + n]
                    channels[(r, int(s.peer[step]), int(s.seq[step]))] = src.copy()
                    complete(r, step)
                elif kind == StepKind.RECV:
                    key = (int(s.peer[step]), r, int(s.seq[step]))
                    if key in channels:
                        _deliver(s, step, bufs, channels.pop(key))
                        complete(r, step)
                    else:
                        blocked_recvs[r].append(step)
                else:
                    src = bufs[s.src_buf[step]][s.src_off[step]: s.src_off[step] + n]
                    dst = bufs[s.dst_buf[step]][s.dst_off[step]: s.dst_off[step] + n]
                    if kind == StepKind.COPY:
                        dst[...] = src
                    else:
                        apply_reduce(op, dst, src, int(s.op[step]), int(s.flags[step]))
                    complete(r, step)
    if remaining:
        stuck = []
        for r, s in enumerate(schedules):
            for step in blocked_recvs[r]:
                stuck.append(f"rank {r} step {step} recv from {int(s.peer[step])} "
                             f"#{int(s.seq[step])}")
        detail = "; ".join(stuck[:10]) or "steps wait on each other (dependency cycle)"
        raise DeadlockError(f"{remaining} steps cannot complete: {detail}")
    if channels:
        (src, dst, seq), _ = next(iter(channels.items()))
        raise DeadlockError(
            f"{len(channels)} messages never received, e.g. rank {src} -> {dst} #{seq}")
    return [a[1] for a in areas]


def _deliver(s: Schedule, step: int, bufs: list[np.ndarray], data: np.ndarray) -> None:
    n = int(s.count[step])
    if len(data) != n:
        raise MessageSizeMismatch(
            f"rank {s.rank} step {step}: expected {n} elements from {int(s.peer[step])}, "
            f"got {len(data)}")
    bufs[s.dst_buf[step]][s.dst_off[step]: s.dst_off[step] + n] = data
