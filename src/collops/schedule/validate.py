"""The validator: is a set of per-rank schedules a correct, runnable program?

It checks, and reports every problem it finds (the first few of each kind):

* structure — kinds, peers in range and not the rank itself, counts ≥ 0, dependency ids in
  range; no step writes the caller's SEND area;
* bounds — every region lies inside its buffer;
* matching — the k-th send from a to b and the k-th receive at b from a exist together and
  have the same count;
* hazards — two steps of one rank that touch overlapping elements, one of them writing, must
  be ordered by the dependencies (otherwise a real transport may interleave them);
* progress — merging each matched send/receive into one event, the dependency graph over all
  ranks is acyclic, so posting every ready step without blocking always completes (this is
  deadlock freedom even for a transport with rendezvous sends).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from ..errors import DeadlockError, ScheduleError
from .table import Buffer, Schedule, StepKind

MAX_REPORTED = 8


def validate(schedules: Sequence[Schedule]) -> None:
    """Raise `ScheduleError` (or `DeadlockError`) unless the schedules form a correct program."""
    problems: list[str] = []
    p = len(schedules)
    for r, s in enumerate(schedules):
        if s.rank != r or s.size != p:
            problems.append(f"schedule {r} says rank {s.rank} of {s.size}, expected {r} of {p}")
            continue
        problems.extend(_structure(s))
    if problems:
        raise ScheduleError(_report(problems))
    for s in schedules:
        ancestors = _ancestors(s)
        problems.extend(_hazards(s, ancestors))
    problems.extend(_matching(schedules))
    if problems:
        raise ScheduleError(_report(problems))
    _progress(schedules)


def _report(problems: list[str]) -> str:
    head = problems[:MAX_REPORTED]
    more = len(problems) - len(head)
    return "invalid schedules:\n  " + "\n  ".join(head) + (f"\n  … and {more} more" if more else "")


def _structure(s: Schedule) -> list[str]:
    out: list[str] = []
    n = len(s)
    sizes = {int(Buffer.SEND): s.send_count, int(Buffer.RECV): s.recv_count,
             int(Buffer.TMP): s.tmp_count}
    kinds = s.kind
    bad_kind = ~np.isin(kinds, [k.value for k in StepKind])
    for i in np.nonzero(bad_kind)[0][:MAX_REPORTED]:
        out.append(f"rank {s.rank} step {i}: unknown kind {kinds[i]}")
    msg = (kinds == StepKind.SEND) | (kinds == StepKind.RECV)
    bad_peer = msg & ((s.peer < 0) | (s.peer >= s.size) | (s.peer == s.rank))
    for i in np.nonzero(bad_peer)[0][:MAX_REPORTED]:
        out.append(f"rank {s.rank} step {i}: peer {s.peer[i]} is not another rank of {s.size}")
    for i in np.nonzero(s.count < 0)[0][:MAX_REPORTED]:
        out.append(f"rank {s.rank} step {i}: negative count {s.count[i]}")
    reads = (kinds == StepKind.SEND) | (kinds == StepKind.COPY) | (kinds == StepKind.REDUCE)
    writes = (kinds == StepKind.RECV) | (kinds == StepKind.COPY) | (kinds == StepKind.REDUCE)
    for label, mask, buf, off in (("reads", reads, s.src_buf, s.src_off),
                                  ("writes", writes, s.dst_buf, s.dst_off)):
        for i in np.nonzero(mask)[0]:
            b = int(buf[i])
            if b not in sizes:
                out.append(f"rank {s.rank} step {i}: unknown buffer {b}")
                continue
            lo, hi = int(off[i]), int(off[i]) + int(s.count[i])
            if lo < 0 or hi > sizes[b]:
                out.append(f"rank {s.rank} step {i} {label} {Buffer(b).name}[{lo}:{hi}] outside "
                           f"its {sizes[b]} elements")
            if label == "writes" and b == Buffer.SEND and hi > lo:
                out.append(f"rank {s.rank} step {i} writes the caller's SEND area")
    bad_dep = (s.dep_from < 0) | (s.dep_from >= n) | (s.dep_to < 0) | (s.dep_to >= n)
    bad_dep |= s.dep_from == s.dep_to
    for e in np.nonzero(bad_dep)[0][:MAX_REPORTED]:
        out.append(f"rank {s.rank}: dependency {s.dep_from[e]} -> {s.dep_to[e]} is invalid")
    return out


def _ancestors(s: Schedule) -> list[int]:
    """Bitset of every step's ancestors; raises on a local cycle."""
    n = len(s)
    preds = s.predecessors()
    indeg = [len(p) for p in preds]
    succ: list[list[int]] = [[] for _ in range(n)]
    for b, ps in enumerate(preds):
        for a in ps:
            succ[a].append(b)
    stack = [i for i in range(n) if indeg[i] == 0]
    anc = [0] * n
    seen = 0
    while stack:
        v = stack.pop()
        seen += 1
        bits = 0
        for a in preds[v]:
            bits |= anc[a] | (1 << a)
        anc[v] = bits
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                stack.append(w)
    if seen != n:
        cyclic = [i for i in range(n) if indeg[i] > 0][:MAX_REPORTED]
        raise ScheduleError(f"rank {s.rank}: dependency cycle through steps {cyclic}")
    return anc


def _hazards(s: Schedule, anc: list[int]) -> list[str]:
    out: list[str] = []
    accesses: dict[int, list[tuple[int, int, int, bool]]] = defaultdict(list)
    for i in range(len(s)):
        n = int(s.count[i])
        if n == 0:
            continue
        kind = s.kind[i]
        if kind in (StepKind.SEND, StepKind.COPY, StepKind.REDUCE):
            accesses[int(s.src_buf[i])].append((int(s.src_off[i]), int(s.src_off[i]) + n, i, False))
        if kind in (StepKind.RECV, StepKind.COPY, StepKind.REDUCE):
            accesses[int(s.dst_buf[i])].append((int(s.dst_off[i]), int(s.dst_off[i]) + n, i, True))
        if kind in (StepKind.COPY, StepKind.REDUCE) and s.src_buf[i] == s.dst_buf[i]:
            a, b = int(s.src_off[i]), int(s.dst_off[i])
            if a != b and a < b + n and b < a + n:
                out.append(f"rank {s.rank} step {i}: source and destination overlap")
    for buf, items in accesses.items():
        items.sort()
        active: list[tuple[int, int, int, bool]] = []
        for lo, hi, step, write in items:
            active = [a for a in active if a[1] > lo]
            for _, _, other, other_write in active:
                if (write or other_write) and other != step:
                    if not (anc[step] >> other & 1 or anc[other] >> step & 1):
                        out.append(
                            f"rank {s.rank}: steps {other} and {step} touch overlapping elements "
                            f"of {Buffer(buf).name} concurrently (one writes)")
                        if len(out) > MAX_REPORTED:
                            return out
            active.append((lo, hi, step, write))
    return out


def _matching(schedules: Sequence[Schedule]) -> list[str]:
    out: list[str] = []
    sends: dict[tuple[int, int, int], int] = {}
    for s in schedules:
        idx = np.nonzero(s.kind == StepKind.SEND)[0]
        for peer, seq, n in zip(s.peer[idx].tolist(), s.seq[idx].tolist(),
                                s.count[idx].tolist(), strict=True):
            sends[(s.rank, peer, seq)] = n
    for s in schedules:
        idx = np.nonzero(s.kind == StepKind.RECV)[0]
        for i, peer, seq, n in zip(idx.tolist(), s.peer[idx].tolist(), s.seq[idx].tolist(),
                                   s.count[idx].tolist(), strict=True):
            sent = sends.pop((peer, s.rank, seq), None)
            if sent is None:
                out.append(f"rank {s.rank} step {i}: receive #{seq} from {peer} has no send")
            elif sent != n:
                out.append(f"rank {s.rank} step {i}: receives {n} elements from {peer} "
                           f"(message #{seq}) but {sent} are sent")
    for (src, dst, seq), _ in list(sends.items())[:MAX_REPORTED]:
        out.append(f"rank {src}: send #{seq} to {dst} is never received")
    return out


def _progress(schedules: Sequence[Schedule]) -> None:
    base = np.cumsum([0] + [len(s) for s in schedules])
    total = int(base[-1])
    parent = list(range(total))
    recv_of: dict[tuple[int, int, int], int] = {}
    for s in schedules:
        idx = np.nonzero(s.kind == StepKind.RECV)[0]
        for i, peer, seq in zip(idx.tolist(), s.peer[idx].tolist(), s.seq[idx].tolist(),
                                strict=True):
            recv_of[(peer, s.rank, seq)] = int(base[s.rank]) + i
    for s in schedules:
        idx = np.nonzero(s.kind == StepKind.SEND)[0]
        for i, peer, seq in zip(idx.tolist(), s.peer[idx].tolist(), s.seq[idx].tolist(),
                                strict=True):
            parent[recv_of[(s.rank, peer, seq)]] = int(base[s.rank]) + i
    succ: list[list[int]] = [[] for _ in range(total)]
    indeg = [0] * total
    for s in schedules:
        off = int(base[s.rank])
        for a, b in zip(s.dep_from.tolist(), s.dep_to.tolist(), strict=True):
            ra, rb = parent[a + off], parent[b + off]
            succ[ra].append(rb)
            indeg[rb] += 1
    nodes = [v for v in range(total) if parent[v] == v]
    stack = [v for v in nodes if indeg[v] == 0]
    seen = 0
    while stack:
        v = stack.pop()
        seen += 1
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                stack.append(w)
    if seen != len(nodes):
        stuck = [v for v in nodes if indeg[v] > 0][:MAX_REPORTED]
        where = []
        for v in stuck:
            r = int(np.searchsorted(base, v, side="right") - 1)
            where.append(f"rank {r} step {v - int(base[r])}")
        raise DeadlockError("schedules can deadlock: a cycle of waits through " + ", ".join(where))
