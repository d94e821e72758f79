"""Whole programs (steps and messages) of the large regular alltoalls, built as arrays.

The event-driven models (flow, packet) execute steps, not just messages, so the message-only
generators of `collops.sim.fastpath` do not serve them, and building thousands of schedules
through the registry costs a Python call per step: ``alltoall.linear`` on 4096 ranks is
33.5 M steps and took minutes and gigabytes. For ``linear`` and ``random_chunked`` with
equal, non-empty blocks this module writes the very `Program` that
`collops.sim.program.program_from_schedules` derives from the registry's schedules — the
same step columns in the same global order, the same matching, levels and dependency CSR —
directly from the builders' layout:

* ``linear``: per rank the copy of its own block, the p−1 receives from r−1, r−2, … (mod p),
  then the p−1 sends in the chosen order; with ``throttle`` W send i waits for send i−W.
* ``random_chunked``: the copy, the sends cycle by cycle in the rank's random order, each
  chained to the one before, then the receives source by source, chunk by chunk.

Sends and copies are at level 0 (a local edge out of a send weighs nothing), receives at 1.
`tests/sim/test_step_programs.py` holds every column to the registry's program.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..algorithms.alltoall import chunk_elements, linear_order
from ..algorithms.spec import CallSpec
from ..schedule import StepKind
from .fastpath import random_orders
from .program import Program

StepGenerator = Callable[[CallSpec, Mapping[str, Any]], Program]


def _uniform_elements(spec: CallSpec) -> int:
    """Elements every rank sends to every rank (0 unless all counts are equal)."""
    counts = set(spec.sendcounts) | set(spec.recvcounts)
    return int(next(iter(counts))) if len(counts) == 1 else 0


def linear_destinations_table(p: int, params: Mapping[str, Any]) -> np.ndarray:
    """Every rank's destinations in ``linear``'s send order, (p, p−1) int64."""
    order = linear_order(params)
    k = np.arange(1, p, dtype=np.int64)
    ranks = np.arange(p, dtype=np.int64)[:, None]
    if order == "random":
        return random_orders(p, int(params.get("seed", 0))).astype(np.int64)
    if order == "plain":
        dst = np.broadcast_to(k - 1, (p, p - 1))
        return dst + (dst >= ranks)
    return (ranks + k) % p


def _program(p: int, itemsize: int, steps_per_rank: int, kind_row: np.ndarray,
             bytes_row: np.ndarray, send_steps: np.ndarray, recv_steps: np.ndarray,
             dst: np.ndarray, dep_from: np.ndarray, dep_to: np.ndarray) -> Program:
    """The `Program` of ranks laid out alike (``*_row``: one rank's columns; ``send_steps``,
    ``recv_steps``: matched global step ids in send order; ``dep_*``: local edges, sorted by
    ``dep_from``); the copy of the own block is every rank's step 0."""
    total = p * steps_per_rank
    preds = np.bincount(dep_to, minlength=total)
    succ_ptr = np.zeros(total + 1, dtype=np.int64)
    np.cumsum(np.bincount(dep_from, minlength=total), out=succ_ptr[1:])
    n = len(send_steps)
    msg_bytes = np.tile(bytes_row, p)[send_steps] if n else np.zeros(0, np.int64)
    return Program(
        nranks=p, itemsize=itemsize, source="vectorised steps",
        msg_src=(send_steps // steps_per_rank).astype(np.int32), msg_dst=dst.astype(np.int32),
        msg_bytes=msg_bytes, msg_phase=np.zeros(n, np.int64), msg_order=send_steps,
        local_rank=np.arange(p, dtype=np.int64), local_level=np.zeros(p, np.int64),
        local_bytes=np.full(p, int(bytes_row[0]), np.int64),
        local_is_reduce=np.zeros(p, dtype=bool),
        step_rank=np.repeat(np.arange(p, dtype=np.int64), steps_per_rank),
        step_kind=np.tile(kind_row.astype(np.int8), p), step_bytes=np.tile(bytes_row, p),
        succ_ptr=succ_ptr, succ_idx=dep_to, local_preds=preds,
        msg_send_step=send_steps, msg_recv_step=recv_steps)


def alltoall_linear_steps(spec: CallSpec, params: Mapping[str, Any]) -> Program:
    """The registry's program of ``alltoall.linear`` (equal, non-empty blocks)."""
    p, block = spec.size, _uniform_elements(spec) * spec.itemsize
    n = 2 * p - 1  # copy, p−1 receives, p−1 sends
    kind_row = np.r_[[StepKind.COPY], np.full(p - 1, StepKind.RECV), np.full(p - 1, StepKind.SEND)]
    src = np.repeat(np.arange(p, dtype=np.int64), p - 1)
    j = np.tile(np.arange(p - 1, dtype=np.int64), p)
    dst = linear_destinations_table(p, params).reshape(-1)
    send_steps = src * n + p + j
    recv_steps = dst * n + (dst - src) % p  # receive k = (d − s) mod p sits at step k
    throttle = int(params.get("throttle", 0) or 0)
    if throttle:
        later = j >= throttle
        dep_to = send_steps[later]
        dep_from = dep_to - throttle
    else:
        dep_from = dep_to = np.zeros(0, np.int64)
    return _program(p, spec.itemsize, n, kind_row, np.full(n, block, np.int64), send_steps,
                    recv_steps, dst, dep_from, dep_to)


def alltoall_random_chunked_steps(spec: CallSpec, params: Mapping[str, Any]) -> Program:
    """The registry's program of ``alltoall.random_chunked`` (equal, non-empty blocks)."""
    p, elements = spec.size, _uniform_elements(spec)
    per_chunk = chunk_elements(spec, int(params["chunk"]))
    cycles = -(-elements // per_chunk)
    per_rank = cycles * (p - 1)  # sends, and as many receives
    n = 1 + 2 * per_rank
    chunk_bytes = np.minimum(per_chunk, elements - np.arange(cycles) * per_chunk) * spec.itemsize
    kind_row = np.r_[[StepKind.COPY], np.full(per_rank, StepKind.SEND),
                     np.full(per_rank, StepKind.RECV)]
    bytes_row = np.r_[[elements * spec.itemsize], np.repeat(chunk_bytes, p - 1),
                      np.tile(chunk_bytes, p - 1)].astype(np.int64)
    visit = np.arange(per_rank, dtype=np.int64)  # cycle t = visit // (p−1), j = visit % (p−1)
    src = np.repeat(np.arange(p, dtype=np.int64), per_rank)
    dst = np.tile(random_orders(p, int(params["seed"])).astype(np.int64), (1, cycles)).reshape(-1)
    send_steps = src * n + 1 + np.tile(visit, p)
    source_index = src - (src > dst)  # s among d's sources 0, …, d−1, d+1, …
    recv_steps = dst * n + 1 + per_rank + source_index * cycles + np.tile(visit // (p - 1), p)
    chained = np.ones(len(send_steps), dtype=bool)
    chained[per_rank - 1::per_rank] = False  # the last send of a rank starts no edge
    dep_from = send_steps[chained]
    return _program(p, spec.itemsize, n, kind_row, bytes_row, send_steps, recv_steps, dst,
                    dep_from, dep_from + 1)


STEP_GENERATORS: dict[tuple[str, str], StepGenerator] = {
    ("alltoall", "linear"): alltoall_linear_steps,
    ("alltoallv", "linear"): alltoall_linear_steps,
    ("alltoall", "random_chunked"): alltoall_random_chunked_steps,
    ("alltoallv", "random_chunked"): alltoall_random_chunked_steps,
}


def step_generator(collective: str, algorithm: str, spec: CallSpec) -> StepGenerator | None:
    """The vectorised whole-program builder for this call, or None (use the registry)."""
    gen = STEP_GENERATORS.get((collective, algorithm))
    if gen is None or spec.size < 2 or not _uniform_elements(spec):
        return None
    return gen
