"""Which bytes does a set of schedules ever read before writing them?

The reference executor starts RECV and TMP zero-filled, which can hide a schedule that reads
scratch it never wrote (an OR into "zeros", say). This executor tracks, per element, whether it
holds defined data: the caller's SEND area does, RECV and TMP start undefined, a receive or copy
passes definedness along, and reading an undefined element — to send it, copy it or reduce
with it — is reported.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

from collops.schedule import OP_ZERO, Schedule, StepKind


def undefined_reads(schedules: Sequence[Schedule]) -> tuple[list[str], list[np.ndarray]]:
    """Run the schedules on definedness masks; return (problems, each rank's RECV mask)."""
    masks = [[np.ones(s.send_count, bool), np.zeros(s.recv_count, bool),
              np.zeros(s.tmp_count, bool)] for s in schedules]
    waiting = [s.indegrees() for s in schedules]
    succ = [s.successors() for s in schedules]
    ready = [deque(np.nonzero(w == 0)[0].tolist()) for w in waiting]
    pending: list[list[int]] = [[] for _ in schedules]
    channels: dict[tuple[int, int, int], np.ndarray] = {}
    problems: list[str] = []

    def region(r: int, buf: int, off: int, n: int) -> np.ndarray:
        return masks[r][buf][off: off + n]

    def finish(r: int, step: int) -> None:
        for nxt in succ[r][step]:
            waiting[r][nxt] -= 1
            if waiting[r][nxt] == 0:
                ready[r].append(nxt)

    def check(r: int, step: int, what: str, mask: np.ndarray) -> None:
        if not mask.all():
            problems.append(f"rank {r} step {step} {what} {int((~mask).sum())} undefined "
                            "elements")

    progress = True
    while progress:
        progress = False
        for r, s in enumerate(schedules):
            still = []
            for step in pending[r]:
                key = (int(s.peer[step]), r, int(s.seq[step]))
                if key in channels:
                    n = int(s.count[step])
                    region(r, s.dst_buf[step], s.dst_off[step], n)[...] = channels.pop(key)
                    finish(r, step)
                    progress = True
                else:
                    still.append(step)
            pending[r] = still
            while ready[r]:
                step = ready[r].popleft()
                progress = True
                n = int(s.count[step])
                kind = s.kind[step]
                if kind == StepKind.RECV:
                    pending[r].append(step)
                    continue
                if kind == StepKind.REDUCE and s.op[step] == OP_ZERO:  # defines, reads nothing
                    region(r, s.dst_buf[step], s.dst_off[step], n)[...] = True
                    finish(r, step)
                    continue
                src = region(r, s.src_buf[step], s.src_off[step], n)
                check(r, step, "reads", src)
                if kind == StepKind.SEND:
                    channels[(r, int(s.peer[step]), int(s.seq[step]))] = src.copy()
                else:
                    dst = region(r, s.dst_buf[step], s.dst_off[step], n)
                    if kind == StepKind.REDUCE:
                        check(r, step, "combines into", dst)
                        dst &= src
                    else:
                        dst[...] = src
                finish(r, step)
    return problems, [m[1] for m in masks]
