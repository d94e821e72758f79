"""From per-rank schedules to one global program: steps, messages and their phases.

Both models start here. Every rank's steps are concatenated into global columns (a step's
global id is its rank's offset plus its index, so ids run rank by rank in schedule order).
Sends are matched to receives exactly as transports match them — the k-th send from a to b
with the k-th receive at b from a — by sorting both on ``(source, destination, seq)``.

**Phases.** A message's phase is its depth in the cross-rank dependency graph: the longest
path to its send, counting one for every message crossed. Formally every step gets a level

    level(step) = max over its predecessors q of level(q) + w(q → step)

where the predecessors are the step's local dependencies (weight 0) and, for a receive, the
matching send (weight 1). A message's phase is its send's level; a receive completes one
phase after the send. A local edge out of a send has weight 0: waiting on a send means
waiting for it to be *issued* (an eager send's buffer is free once the data left), so a
chain of sends (seed 000's ordered sends) stays in one phase and only its *order* survives;
the models then serialise the chain through the node's injection links.

Levels are computed level-synchronously (Kahn's algorithm, one numpy wave per frontier), so
the cost is a few numpy calls per wave, not a Python call per step: 4096 ranks × 8190 steps
take seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ScheduleError
from ..schedule import Schedule, StepKind


@dataclass(frozen=True, eq=False)
class Program:
    """Global step and message columns of one collective call over ``nranks`` ranks.

    Step columns (``step_*``, length = total steps) are empty when the program was generated
    directly as messages (the vectorised fast path); message columns are always present.
    """

    nranks: int
    itemsize: int
    source: str  # "registry" (built from the schedules) or "vectorised" (fast generator)
    msg_src: np.ndarray  # sending rank (int32)
    msg_dst: np.ndarray  # receiving rank (int32)
    msg_bytes: np.ndarray  # payload bytes (int64)
    msg_phase: np.ndarray  # level of the send (int64)
    msg_order: np.ndarray  # increasing with issue order within a rank (int64)
    local_rank: np.ndarray  # copy/reduce steps: rank, level, bytes, reduce?
    local_level: np.ndarray
    local_bytes: np.ndarray
    local_is_reduce: np.ndarray
    step_rank: np.ndarray | None = None
    step_kind: np.ndarray | None = None
    step_bytes: np.ndarray | None = None
    succ_ptr: np.ndarray | None = None  # CSR of local successor edges (global ids)
    succ_idx: np.ndarray | None = None
    local_preds: np.ndarray | None = None  # number of local predecessors per step
    msg_send_step: np.ndarray | None = None
    msg_recv_step: np.ndarray | None = None

    @property
    def num_messages(self) -> int:
        """Number of messages (matched send/receive pairs)."""
        return len(self.msg_src)

    @property
    def num_phases(self) -> int:
        """Number of distinct message phases (levels)."""
        return int(self.msg_phase.max()) + 1 if len(self.msg_phase) else 0

    @property
    def total_bytes(self) -> int:
        """Payload bytes of all messages."""
        return int(self.msg_bytes.sum())


@dataclass(frozen=True, eq=False)
class StepLists:
    """A program's steps as Python lists, for the event-driven models' per-step hot paths."""

    kind: list[int]
    nbytes: list[int]
    rank: list[int]
    succ_ptr: list[int]  # CSR of local successors
    succ_idx: list[int]
    waiting: list[int]  # local predecessors, plus one for a receive's message
    msg_of_send: dict[int, int]
    send_of_msg: list[int]
    recv_of_msg: list[int]


def step_lists(program: Program) -> StepLists:
    """`StepLists` of a program built from schedules (ValueError for a message-only one)."""
    if (program.step_kind is None or program.step_bytes is None or program.step_rank is None
            or program.succ_ptr is None or program.succ_idx is None
            or program.local_preds is None or program.msg_send_step is None
            or program.msg_recv_step is None):
        raise ValueError("the event-driven models need a program built from schedules")
    waiting = program.local_preds.copy()
    waiting[program.msg_recv_step] += 1  # a receive also waits for its message
    sends = program.msg_send_step.tolist()
    return StepLists(
        kind=program.step_kind.tolist(), nbytes=program.step_bytes.tolist(),
        rank=program.step_rank.tolist(), succ_ptr=program.succ_ptr.tolist(),
        succ_idx=program.succ_idx.tolist(), waiting=waiting.tolist(),
        msg_of_send=dict(zip(sends, range(len(sends)), strict=True)), send_of_msg=sends,
        recv_of_msg=program.msg_recv_step.tolist())


def program_from_schedules(schedules: Sequence[Schedule], itemsize: int) -> Program:
    """Concatenate, match and level the schedules of every rank."""
    p = len(schedules)
    lengths = np.fromiter((len(s) for s in schedules), dtype=np.int64, count=p)
    base = np.zeros(p + 1, dtype=np.int64)
    np.cumsum(lengths, out=base[1:])
    total = int(base[-1])
    kind = _concat([s.kind for s in schedules], np.int8)
    peer = _concat([s.peer for s in schedules], np.int64)
    seq = _concat([s.seq for s in schedules], np.int64)
    nbytes = _concat([s.count for s in schedules], np.int64) * int(itemsize)
    rank = np.repeat(np.arange(p, dtype=np.int64), lengths)
    dep_counts = np.fromiter((len(s.dep_from) for s in schedules), dtype=np.int64, count=p)
    dep_base = np.repeat(base[:-1], dep_counts)
    dep_from = _concat([s.dep_from for s in schedules], np.int64) + dep_base
    dep_to = _concat([s.dep_to for s in schedules], np.int64) + dep_base

    send_steps, recv_steps = match_messages(rank, kind, peer, seq, p)
    if np.any(nbytes[send_steps] != nbytes[recv_steps]):
        raise ScheduleError("a send and its matching receive differ in size")
    level = step_levels(total, dep_from, dep_to, send_steps, recv_steps)

    succ_ptr, succ_idx = _csr(total, dep_from, dep_to)
    local = np.nonzero((kind == StepKind.COPY) | (kind == StepKind.REDUCE))[0]
    return Program(
        nranks=p, itemsize=int(itemsize), source="registry",
        msg_src=rank[send_steps].astype(np.int32), msg_dst=rank[recv_steps].astype(np.int32),
        msg_bytes=nbytes[send_steps], msg_phase=level[send_steps], msg_order=send_steps,
        local_rank=rank[local], local_level=level[local], local_bytes=nbytes[local],
        local_is_reduce=kind[local] == StepKind.REDUCE,
        step_rank=rank, step_kind=kind, step_bytes=nbytes, succ_ptr=succ_ptr,
        succ_idx=succ_idx, local_preds=np.bincount(dep_to, minlength=total),
        msg_send_step=send_steps, msg_recv_step=recv_steps,
    )


def _concat(arrays: list[np.ndarray], dtype: type) -> np.ndarray:
    if not arrays:
        return np.zeros(0, dtype=dtype)
    return np.concatenate(arrays).astype(dtype, copy=False)


def match_messages(
    rank: np.ndarray, kind: np.ndarray, peer: np.ndarray, seq: np.ndarray, nranks: int
) -> tuple[np.ndarray, np.ndarray]:
    """Global ids of matched (send, receive) pairs, ordered by send id."""
    sends = np.nonzero(kind == StepKind.SEND)[0]
    recvs = np.nonzero(kind == StepKind.RECV)[0]
    if len(sends) != len(recvs):
        raise ScheduleError(f"{len(sends)} sends but {len(recvs)} receives")
    if len(sends) == 0:
        return sends, recvs
    width = int(max(seq[sends].max(), seq[recvs].max())) + 1
    send_key = (rank[sends] * nranks + peer[sends]) * width + seq[sends]
    recv_key = (peer[recvs] * nranks + rank[recvs]) * width + seq[recvs]
    send_order = np.argsort(send_key, kind="stable")
    recv_order = np.argsort(recv_key, kind="stable")
    if not np.array_equal(send_key[send_order], recv_key[recv_order]):
        raise ScheduleError("sends and receives do not match (run the validator)")
    matched_recv = np.empty_like(recvs)
    matched_recv[send_order] = recvs[recv_order]
    return sends, matched_recv


def _csr(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(src, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    return ptr, dst[order]


def _gather_ranges(ptr: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(ptr[v], ptr[v+1])`` for every v in ``nodes``."""
    starts, ends = ptr[nodes], ptr[nodes + 1]
    lens = ends - starts
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - (np.cumsum(lens) - lens), lens)
    return offsets + np.arange(total, dtype=np.int64)


def step_levels(
    n: int,
    dep_from: np.ndarray,
    dep_to: np.ndarray,
    send_steps: np.ndarray,
    recv_steps: np.ndarray,
) -> np.ndarray:
    """Level of every step (see the module docstring); raises on a dependency cycle."""
    src = np.concatenate([dep_from, send_steps]).astype(np.int64, copy=False)
    dst = np.concatenate([dep_to, recv_steps]).astype(np.int64, copy=False)
    weight = np.concatenate([np.zeros(len(dep_from), np.int64),
                             np.ones(len(send_steps), np.int64)])
    order = np.argsort(src, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    edge_dst, edge_w = dst[order], weight[order]
    waiting = np.bincount(dst, minlength=n).astype(np.int64)
    level = np.zeros(n, dtype=np.int64)
    frontier = np.nonzero(waiting == 0)[0]
    done = 0
    while len(frontier):
        done += len(frontier)
        edges = _gather_ranges(ptr, frontier)
        if len(edges) == 0:
            break
        tails = np.repeat(frontier, ptr[frontier + 1] - ptr[frontier])
        heads = edge_dst[edges]
        np.maximum.at(level, heads, level[tails] + edge_w[edges])
        np.subtract.at(waiting, heads, 1)
        candidates = heads[waiting[heads] == 0]
        frontier = np.unique(candidates)
    if done != n:
        raise ScheduleError(f"dependency cycle: {n - done} steps can never run")
    return level


def program_from_messages(
    nranks: int,
    src: np.ndarray,
    dst: np.ndarray,
    nbytes: np.ndarray,
    phase: np.ndarray,
    order: np.ndarray,
    source: str = "vectorised",
    self_copy_bytes: int = 0,
) -> Program:
    """A message-only program (no steps): for vectorised generators of regular patterns.
    ``self_copy_bytes`` > 0 adds every rank's copy of its own block (level 0)."""
    copies = nranks if self_copy_bytes > 0 else 0
    return Program(
        nranks=nranks, itemsize=1, source=source,
        msg_src=np.asarray(src, dtype=np.int32), msg_dst=np.asarray(dst, dtype=np.int32),
        msg_bytes=np.asarray(nbytes, dtype=np.int64), msg_phase=np.asarray(phase, np.int64),
        msg_order=np.asarray(order, dtype=np.int64),
        local_rank=np.arange(copies, dtype=np.int64), local_level=np.zeros(copies, np.int64),
        local_bytes=np.full(copies, self_copy_bytes, dtype=np.int64),
        local_is_reduce=np.zeros(copies, dtype=bool),
    )
