"""The step table: an algorithm's plan for one rank, as columns of numpy arrays.

A schedule lists *steps* — ``send(peer, region)``, ``recv(peer, region)``, ``copy(dst, src)``
and ``reduce(dst, src)`` — and the *dependencies* between them (an edge ``a → b`` means step
``b`` may start only once step ``a`` has completed). A region is ``(buffer, offset, count)``
in elements of the call's dtype, the buffer being the caller's ``SEND`` or ``RECV`` area or the
scratch ``TMP`` area whose size the schedule states.

Messages are matched by position: the k-th send from rank a to rank b (in step-index order)
matches the k-th receive posted by b from a. The ``seq`` column holds that k, so a transport
can match by ``(source, seq)`` whatever order the steps are posted in.

Columns rather than one object per step keep large schedules cheap: the simulator reads
millions of steps, and vectorised builders fill whole columns at once (`from_columns`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

import numpy as np


class StepKind(IntEnum):
    """What a step does."""

    SEND = 0
    RECV = 1
    COPY = 2
    REDUCE = 3


class Buffer(IntEnum):
    """The three memory areas a schedule addresses."""

    SEND = 0
    RECV = 1
    TMP = 2


#: ``op`` column: apply the call's reduction operator
OP_CALL = 0
#: ``op`` column: bitwise OR of the raw bytes, whatever the dtype (seed 002's gather)
OP_BOR_BYTES = 1
#: ``op`` column: set the destination's bytes to zero (a reduce whose source is its
#: destination; seed 002's zero-padded contributions)
OP_ZERO = 2

#: ``flags`` bit: a reduce computes ``dst = src ∘ dst`` (src holds lower ranks) instead of
#: ``dst = dst ∘ src``
FLAG_REVERSE = 1

SEND_ = StepKind.SEND
RECV_ = StepKind.RECV


class Region(NamedTuple):
    """A contiguous run of ``count`` elements at ``offset`` in one buffer."""

    buffer: int
    offset: int
    count: int  # type: ignore[assignment]

    @property
    def end(self) -> int:
        """One past the last element."""
        return self.offset + self.count

    def sub(self, offset: int, count: int) -> Region:
        """The part of this region starting ``offset`` elements in."""
        return Region(self.buffer, self.offset + offset, count)


class BufferRef:
    """Callable shorthand for regions: ``SEND(offset, count)``."""

    def __init__(self, buffer: Buffer) -> None:
        self.buffer = buffer

    def __call__(self, offset: int, count: int) -> Region:
        return Region(int(self.buffer), int(offset), int(count))

    def __repr__(self) -> str:
        return self.buffer.name


SEND = BufferRef(Buffer.SEND)
RECV = BufferRef(Buffer.RECV)
TMP = BufferRef(Buffer.TMP)

COLUMNS = ("kind", "peer", "src_buf", "src_off", "dst_buf", "dst_off", "count", "op", "flags")
_DTYPES = {
    "kind": np.int8, "peer": np.int32, "src_buf": np.int8, "src_off": np.int64,
    "dst_buf": np.int8, "dst_off": np.int64, "count": np.int64, "op": np.int8,
    "flags": np.int8,
}


@dataclass(frozen=True, eq=False)
class Schedule:
    """One rank's steps (columns) and dependency edges; build with `ScheduleBuilder`."""

    rank: int
    size: int
    send_count: int
    recv_count: int
    tmp_count: int
    kind: np.ndarray
    peer: np.ndarray
    src_buf: np.ndarray
    src_off: np.ndarray
    dst_buf: np.ndarray
    dst_off: np.ndarray
    count: np.ndarray
    op: np.ndarray
    flags: np.ndarray
    seq: np.ndarray
    dep_from: np.ndarray
    dep_to: np.ndarray

    @classmethod
    def from_columns(
        cls,
        rank: int,
        size: int,
        buffers: tuple[int, int, int],
        columns: Mapping[str, np.ndarray | Sequence[int]],
        deps: tuple[np.ndarray | Sequence[int], np.ndarray | Sequence[int]] = ((), ()),
    ) -> Schedule:
        """Make a schedule from whole columns (vectorised builders); missing columns default."""
        n = len(columns["kind"])
        cols: dict[str, np.ndarray] = {}
        for name in COLUMNS:
            if name in columns:
                cols[name] = np.asarray(columns[name], dtype=_DTYPES[name]).reshape(n)
            else:
                fill = -1 if name in ("peer",) else 0
                cols[name] = np.full(n, fill, dtype=_DTYPES[name])
        dep_from = np.asarray(deps[0], dtype=np.int64)
        dep_to = np.asarray(deps[1], dtype=np.int64)
        return cls(
            rank, size, int(buffers[0]), int(buffers[1]), int(buffers[2]),
            seq=message_sequence(cols["kind"], cols["peer"]),
            dep_from=dep_from, dep_to=dep_to, **cols,
        )

    def __len__(self) -> int:
        return len(self.kind)

    @property
    def buffer_counts(self) -> tuple[int, int, int]:
        """Element counts of the SEND, RECV and TMP areas."""
        return (self.send_count, self.recv_count, self.tmp_count)

    def steps(self) -> Iterator[dict[str, int]]:
        """Iterate the steps as dicts (for inspection and debugging, not for speed)."""
        for i in range(len(self)):
            yield {name: int(getattr(self, name)[i]) for name in (*COLUMNS, "seq")}

    def predecessors(self) -> list[list[int]]:
        """For every step, the steps it waits for."""
        preds: list[list[int]] = [[] for _ in range(len(self))]
        for a, b in zip(self.dep_from.tolist(), self.dep_to.tolist(), strict=True):
            preds[b].append(a)
        return preds

    def successors(self) -> list[list[int]]:
        """For every step, the steps that wait for it, in dependency order."""
        succ: list[list[int]] = [[] for _ in range(len(self))]
        for a, b in zip(self.dep_from.tolist(), self.dep_to.tolist(), strict=True):
            succ[a].append(b)
        return succ

    def indegrees(self) -> np.ndarray:
        """For every step, how many steps it waits for."""
        return np.bincount(self.dep_to, minlength=len(self)).astype(np.int64)

    def messages(self) -> tuple[np.ndarray, np.ndarray]:
        """Indices of the send steps and of the receive steps."""
        return np.nonzero(self.kind == SEND_)[0], np.nonzero(self.kind == RECV_)[0]

    def describe(self) -> str:
        """A readable listing of the steps, one per line."""
        names = {0: "SEND", 1: "RECV", 2: "TMP"}
        preds = self.predecessors()
        lines = [f"rank {self.rank}/{self.size}: send={self.send_count} recv={self.recv_count} "
                 f"tmp={self.tmp_count}"]
        for i, s in enumerate(self.steps()):
            kind = StepKind(s["kind"]).name.lower()
            src = f"{names[s['src_buf']]}[{s['src_off']}:+{s['count']}]"
            dst = f"{names[s['dst_buf']]}[{s['dst_off']}:+{s['count']}]"
            if kind == "send":
                body = f"send to {s['peer']} #{s['seq']} {src}"
            elif kind == "recv":
                body = f"recv from {s['peer']} #{s['seq']} {dst}"
            else:
                body = f"{kind} {dst} <- {src}"
            after = f" after {preds[i]}" if preds[i] else ""
            lines.append(f"  {i:4d} {body}{after}")
        return "\n".join(lines)


def message_sequence(kind: np.ndarray, peer: np.ndarray) -> np.ndarray:
    """Per step, its position among the same-direction messages with the same peer."""
    seq = np.full(len(kind), -1, dtype=np.int64)
    for which in (SEND_, RECV_):
        idx = np.nonzero(kind == which)[0]
        if len(idx) == 0:
            continue
        peers = peer[idx]
        order = np.argsort(peers, kind="stable")
        sorted_peers = peers[order]
        starts = np.r_[0, np.nonzero(np.diff(sorted_peers))[0] + 1]
        group_start = np.repeat(starts, np.diff(np.r_[starts, len(order)]))
        seq[idx[order]] = np.arange(len(order)) - group_start
    return seq


class ScheduleBuilder:
    """Builds one rank's schedule step by step; `round` adds round-by-round dependencies."""

    def __init__(self, rank: int, size: int, send: int = 0, recv: int = 0, tmp: int = 0) -> None:
        self.rank = rank
        self.size = size
        self.send_count = int(send)
        self.recv_count = int(recv)
        self.tmp_count = int(tmp)
        self._rows: list[tuple[int, int, int, int, int, int, int, int, int]] = []
        self._dep_from: list[int] = []
        self._dep_to: list[int] = []
        self._in_round: list[int] | None = None
        self._previous_round: list[int] = []

    def __len__(self) -> int:
        return len(self._rows)

    # -- steps ---------------------------------------------------------------------------
    def _add(self, row: tuple[int, ...], after: Iterable[int]) -> int:
        step = len(self._rows)
        self._rows.append(row)  # type: ignore[arg-type]
        deps = set(after)
        if self._in_round is not None:
            deps.update(self._previous_round)
            self._in_round.append(step)
        for d in sorted(deps):
            self._dep_from.append(d)
            self._dep_to.append(step)
        return step

    def send(self, peer: int, src: Region, after: Iterable[int] = ()) -> int:
        """Send the elements of ``src`` to ``peer``; returns the step id."""
        return self._add((SEND_, peer, src[0], src[1], 0, 0, src[2], 0, 0), after)

    def recv(self, peer: int, dst: Region, after: Iterable[int] = ()) -> int:
        """Receive ``dst.count`` elements from ``peer`` into ``dst``; returns the step id."""
        return self._add((RECV_, peer, 0, 0, dst[0], dst[1], dst[2], 0, 0), after)

    def copy(self, dst: Region, src: Region, after: Iterable[int] = ()) -> int:
        """Copy ``src`` into ``dst`` locally (same count); returns the step id."""
        if dst[2] != src[2]:
            raise ValueError(f"copy of {src[2]} elements into a region of {dst[2]}")
        return self._add((StepKind.COPY, -1, src[0], src[1], dst[0], dst[1], src[2], 0, 0), after)

    def reduce(
        self,
        dst: Region,
        src: Region,
        after: Iterable[int] = (),
        *,
        reverse: bool = False,
        op: int = OP_CALL,
    ) -> int:
        """``dst = dst ∘ src`` (or ``src ∘ dst`` with ``reverse``); returns the step id."""
        if dst[2] != src[2]:
            raise ValueError(f"reduce of {src[2]} elements into a region of {dst[2]}")
        flags = FLAG_REVERSE if reverse else 0
        return self._add(
            (StepKind.REDUCE, -1, src[0], src[1], dst[0], dst[1], src[2], op, flags), after
        )

    def zero(self, dst: Region, after: Iterable[int] = ()) -> int:
        """Set ``dst``'s bytes to zero; returns the step id."""
        return self.reduce(dst, dst, after, op=OP_ZERO)

    def tmp(self, count: int) -> Region:
        """Reserve ``count`` more elements of scratch and return their region."""
        region = TMP(self.tmp_count, count)
        self.tmp_count += int(count)
        return region

    # -- structure -----------------------------------------------------------------------
    @contextmanager
    def round(self) -> Iterator[list[int]]:
        """Steps added inside depend on every step of the previous round block."""
        if self._in_round is not None:
            raise RuntimeError("rounds do not nest")
        self._in_round = []
        try:
            yield self._in_round
        finally:
            if self._in_round:
                self._previous_round = self._in_round
            self._in_round = None

    @property
    def previous_round(self) -> list[int]:
        """Step ids of the last completed round block."""
        return list(self._previous_round)

    def extend(
        self,
        schedule: Schedule,
        after: Iterable[int] = (),
        remap: dict[int, tuple[int, int]] | None = None,
    ) -> list[int]:
        """Append another schedule's steps, its first steps waiting for ``after``.

        ``remap`` maps a buffer of the appended schedule to ``(buffer, offset)`` here; by
        default its TMP area is placed after this builder's. Copies that become no-ops
        (source and destination identical) are dropped. Returns the new ids of its steps
        that nothing else in it depends on (its exits).
        """
        mapping = {int(Buffer.SEND): (int(Buffer.SEND), 0), int(Buffer.RECV): (int(Buffer.RECV), 0)}
        mapping[int(Buffer.TMP)] = (int(Buffer.TMP), self.tmp_count)
        if remap:
            mapping.update({int(k): v for k, v in remap.items()})
        if mapping[int(Buffer.TMP)] == (int(Buffer.TMP), self.tmp_count):
            self.tmp_count += schedule.tmp_count
        preds = schedule.predecessors()
        after = list(after)
        new_id: list[int | None] = []
        forward: list[list[int]] = []
        for i, s in enumerate(schedule.steps()):
            sb, so = mapping[s["src_buf"]]
            db, do = mapping[s["dst_buf"]]
            row = (s["kind"], s["peer"], sb, so + s["src_off"], db, do + s["dst_off"], s["count"],
                   s["op"], s["flags"])
            deps: list[int] = []
            for p in preds[i]:
                mapped = new_id[p]
                deps.extend([mapped] if mapped is not None else forward[p])
            if not preds[i]:
                deps.extend(after)
            if s["kind"] == StepKind.COPY and (sb, so + s["src_off"]) == (db, do + s["dst_off"]):
                new_id.append(None)
                forward.append(deps)
                continue
            new_id.append(self._add(row, deps))
            forward.append([])
        has_succ = set(schedule.dep_from.tolist())
        exits: list[int] = []
        for i in range(len(schedule)):
            if i not in has_succ:
                mapped = new_id[i]
                exits.extend([mapped] if mapped is not None else forward[i])
        return sorted(set(exits))

    def all_steps(self) -> list[int]:
        """Ids of every step added so far."""
        return list(range(len(self._rows)))

    def build(self) -> Schedule:
        """Freeze the steps into a `Schedule`."""
        n = len(self._rows)
        table = np.array(self._rows, dtype=np.int64).reshape(n, len(COLUMNS))
        columns = {name: table[:, j] for j, name in enumerate(COLUMNS)}
        return Schedule.from_columns(
            self.rank, self.size, (self.send_count, self.recv_count, self.tmp_count), columns,
            (self._dep_from, self._dep_to),
        )
