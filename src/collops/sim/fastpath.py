"""Vectorised message generators for the large regular patterns (the simulator's fast path).

Building thousands of schedules step by step through the registry costs a Python call per
step: alltoall on 4096 ranks is 33.5 M steps. For the regular algorithms whose registry
builders are written step by step, this module produces the *same messages* (source,
destination, bytes, phase, issue order) directly as arrays. Each generator mirrors one
registry builder; `tests/sim/test_fastpath.py` checks, at small sizes, that the generated
messages equal those derived from the registry's schedules, so the two cannot drift apart
silently. `simulate` uses a generator only above a size threshold and records which path
it took (``SimResult.source``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..algorithms.alltoall import chunk_elements, destination_order, linear_order
from ..algorithms.patterns import is_power_of_two
from ..algorithms.spec import CallSpec
from .program import Program, program_from_messages

Generator = Callable[[CallSpec, Mapping[str, Any]], Program]


def _uniform_elements(spec: CallSpec) -> int | None:
    """Elements every rank sends to every other rank, or None when they differ."""
    counts = (set(spec.counts) if spec.collective == "allgather"
              else set(spec.sendcounts) | set(spec.recvcounts))
    if len(counts) != 1:
        return None
    return int(next(iter(counts)))


def _uniform_block_bytes(spec: CallSpec) -> int | None:
    elements = _uniform_elements(spec)
    return None if elements is None else elements * spec.itemsize


def random_orders(p: int, seed: int) -> np.ndarray:
    """Every rank's destination order of ``random_chunked`` / ``linear:order=random``, (p, p−1)."""
    out = np.empty((p, max(p - 1, 0)), dtype=np.int32)
    for r in range(p):
        out[r] = destination_order(r, p, seed)
    return out


def alltoall_linear_messages(spec: CallSpec, params: Mapping[str, Any]) -> Program:
    """``alltoall.linear``: rank r sends to r+1, r+2, … (mod p), to 0, 1, 2, … skipping r
    (``order=plain``) or in its own random permutation (``order=random``), all in phase 0."""
    p = spec.size
    block = _uniform_block_bytes(spec) or 0
    ranks = np.arange(p, dtype=np.int64)
    k = np.arange(1, p, dtype=np.int64)
    src = np.repeat(ranks, p - 1)
    dst = (src + np.tile(k, p)) % p
    order = linear_order(params)
    if order == "plain":
        dst = np.tile(k - 1, p)
        dst += dst >= src  # the k-th destination of rank r in 0, 1, …, p−1 without r
    elif order == "random":
        dst = random_orders(p, int(params.get("seed", 0))).reshape(-1).astype(np.int64)
    issue = src * p + np.tile(k, p)
    n = len(src)
    return program_from_messages(p, src, dst, np.full(n, block, np.int64),
                                 np.zeros(n, np.int64), issue)


def alltoall_pairwise_messages(spec: CallSpec, params: Mapping[str, Any]) -> Program:
    """``alltoall.pairwise``: round k (1 ≤ k < p) sends to r XOR k (2^n ranks) or r+k."""
    p = spec.size
    block = _uniform_block_bytes(spec) or 0
    src = np.repeat(np.arange(p, dtype=np.int64), p - 1)
    k = np.tile(np.arange(1, p, dtype=np.int64), p)
    dst = (src ^ k) if is_power_of_two(p) else (src + k) % p
    n = len(src)
    return program_from_messages(p, src, dst, np.full(n, block, np.int64), k - 1, src * p + k)


def random_chunked_messages(spec: CallSpec, params: Mapping[str, Any]) -> Program:
    """``random_chunked`` with equal blocks (and the allgather built on it): cycle t of rank r
    sends the t-th chunk of every block, to its destinations in r's random order, all in
    phase 0 and issued in that order (pruning removes nothing when every block is as long);
    every rank also copies its own block."""
    p = spec.size
    elements = _uniform_elements(spec) or 0
    per_chunk = chunk_elements(spec, int(params["chunk"]))
    cycles = -(-elements // per_chunk)
    orders = random_orders(p, int(params["seed"]))
    per_rank = cycles * (p - 1)
    cycle = np.repeat(np.arange(cycles, dtype=np.int64), p - 1)
    count = np.minimum(per_chunk, elements - cycle * per_chunk) * spec.itemsize
    src = np.repeat(np.arange(p, dtype=np.int32), per_rank)
    dst = np.tile(orders, (1, cycles)).reshape(-1)
    issue = np.arange(p * per_rank, dtype=np.int64)  # rank by rank, in issue order
    return program_from_messages(p, src, dst, np.tile(count, p), np.zeros(p * per_rank, np.int64),
                                 issue, self_copy_bytes=elements * spec.itemsize)


GENERATORS: dict[tuple[str, str], Generator] = {
    ("alltoall", "linear"): alltoall_linear_messages,
    ("alltoallv", "linear"): alltoall_linear_messages,
    ("alltoall", "pairwise"): alltoall_pairwise_messages,
    ("alltoallv", "pairwise"): alltoall_pairwise_messages,
    ("alltoall", "random_chunked"): random_chunked_messages,
    ("alltoallv", "random_chunked"): random_chunked_messages,
    ("allgather", "alltoallv"): random_chunked_messages,
}


def fast_generator(collective: str, algorithm: str, spec: CallSpec) -> Generator | None:
    """The vectorised generator for this call, or None when the registry path must be used."""
    gen = GENERATORS.get((collective, algorithm))
    if gen is None or spec.size < 2:
        return None
    block = _uniform_block_bytes(spec)
    if not block:
        return None  # zero or unequal blocks: builders skip messages; use the registry
    return gen
