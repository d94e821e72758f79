"""The progress engine's side of stall reports: what a waiting execution is (its call, its
number, its algorithm, its step) for `collops.transport.stall`.

`note_wait` runs where the engine is about to sleep in the transport (never on a fast path).
Executions of every kind pass through it — schedules (`Execution`), root agreements and the
transports' native collectives — so it reads what each kind has, by attribute.
"""

from __future__ import annotations

import sys
from typing import Any

from .. import config
from ..schedule.table import StepKind
from ..transport.stall import report, watch_of
from ..transport.tags import SEQ_BITS, call_of_tag_base

_RECV = int(StepKind.RECV)


def call_of(ex: Any) -> tuple[int, int] | None:
    """``(context, call number)`` of an execution, where it says (the number may be modulo
    ``2**CALL_BITS``)."""
    tag_base = getattr(ex, "tag_base", None)  # a schedule's `Execution`
    if isinstance(tag_base, int):
        return call_of_tag_base(tag_base)
    phase_tag = getattr(ex, "phase_tag", None)  # a root agreement
    if isinstance(phase_tag, int):
        return call_of_tag_base(phase_tag << SEQ_BITS)
    tag = getattr(ex, "tag", None)  # shm's direct and stream executions: (value, shift)
    if isinstance(tag, tuple) and len(tag) == 2:
        return call_of_tag_base(tag[0] << tag[1])
    seq, context = getattr(ex, "seq", None), getattr(ex, "context", None)
    if isinstance(seq, int) and isinstance(context, int):
        return context, seq
    return None


def _group_of(ex: Any) -> list[int] | None:
    """The transport ranks of the execution's communicator, in rank order."""
    for holder in (ex, getattr(ex, "call", None), getattr(ex, "area", None),
                   getattr(ex, "direct", None)):
        for name in ("peer_map", "group"):
            group = getattr(holder, name, None)
            if isinstance(group, (list, tuple)):
                return list(group)
    comm = getattr(ex, "comm", None)
    return None if comm is None else list(comm._group)


def _names(ex: Any) -> tuple[int | None, str, str]:
    """(communicator rank, collective, algorithm) of an execution."""
    info = getattr(ex, "info", None)
    if info is not None:
        return info.rank, info.collective, info.algorithm
    spec = getattr(ex, "spec", None)
    algorithm = getattr(ex, "algorithm", None) or getattr(
        sys.modules.get(type(ex).__module__), "NAME", type(ex).__name__)
    return (getattr(ex, "rank", None), getattr(spec, "collective", "a collective"),
            str(algorithm))


def _where(ex: Any) -> str:
    """The step a schedule's execution waits at and the ranks it has not heard from (or
    what a wait of another kind says it waits for: its ``waits_for``)."""
    waits_for = getattr(ex, "waits_for", None)
    if isinstance(waits_for, str):
        return waits_for
    if getattr(ex, "phase_tag", None) is not None and getattr(ex, "main", None) is None:
        return "agreeing on the call with its members"
    plan, pending = getattr(ex, "plan", None), getattr(ex, "pending", None)
    if plan is None or not pending or not hasattr(plan, "schedule"):
        return ""
    step = pending[0][1]
    lines = plan.schedule.describe().splitlines()
    heard = sorted({plan.peer[i] for _, i in pending if plan.kind[i] == _RECV})
    where = f"at step {lines[step + 1].strip()}" if step + 1 < len(lines) else f"at step {step}"
    return where + (f", not heard from ranks {heard}" if heard else "")


def note_wait(transport: Any, ex: Any) -> None:
    """Tell ``transport``'s stall watch that this rank is about to sleep waiting for ``ex``."""
    threshold = config.settings.stall_report
    if threshold is None:
        return
    call = call_of(ex)
    key = call if call is not None else id(ex)

    def describe(waited: float) -> str:
        rank, collective, algorithm = _names(ex)
        group = _group_of(ex)
        counters = None
        if call is not None and group is not None:
            counters = transport.calls_started(call[0], group)
        return report(rank if rank is not None else transport.rank,
                      f"{collective}[{algorithm}]", None if call is None else call[1],
                      _where(ex), waited, counters, threshold)

    watch_of(transport).waiting(key, threshold, describe)
