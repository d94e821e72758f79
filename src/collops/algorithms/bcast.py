"""Broadcast: the root's RECV-sized data ends in every rank's RECV area.

Four shapes: ``linear`` (root sends to all), ``binomial`` (log-depth tree of whole messages),
``scatter_allgather`` (van de Geijn: a binomial scatter cuts the message in p pieces, a ring
allgather reassembles it everywhere — bandwidth-optimal for long messages) and ``pipeline``
(chunks flow down a chain in root-relative rank order; each rank forwards a chunk as soon as it
has it, so the chain's latency is paid once, not once per chunk).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..schedule import RECV, SEND, Region, Schedule
from .patterns import (
    absolute,
    binomial_children,
    binomial_parent,
    binomial_subtree_size,
    ceil_log2,
    even_split,
    relative,
    ring_neighbours,
)
from .registry import CostModel, Param, register
from .spec import CallSpec, builder_for, prefix


@register(
    "bcast", "linear", "The root sends the whole message to every other rank at once",
    cost=lambda s, m: m.message(s.vector_bytes(), s.size - 1),
)
def bcast_linear(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Root posts p−1 sends of the whole buffer; everyone else receives once."""
    n, root = spec.count, spec.root
    b = builder_for(rank, spec)
    if rank == root:
        b.copy(RECV(0, n), SEND(0, n))
        for peer in range(spec.size):
            if peer != root:
                b.send(peer, SEND(0, n))
    else:
        b.recv(root, RECV(0, n))
    return b.build()


def _binomial_cost(spec: CallSpec, m: CostModel) -> float:
    return m.message(spec.vector_bytes(), ceil_log2(spec.size))


@register(
    "bcast", "binomial", "Binomial tree: each rank forwards to ⌈log2 p⌉ subtrees, largest first",
    cost=_binomial_cost,
)
def bcast_binomial(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Receive from the binomial parent, then forward to children, largest subtree first."""
    n, root, p = spec.count, spec.root, spec.size
    b = builder_for(rank, spec)
    v = relative(rank, root, p)
    if v == 0:
        b.copy(RECV(0, n), SEND(0, n))
        source, after = SEND(0, n), []
    else:
        got = b.recv(absolute(binomial_parent(v), root, p), RECV(0, n))
        source, after = RECV(0, n), [got]
    for child in binomial_children(v, p):
        b.send(absolute(child, root, p), source, after)
    return b.build()


def _scatter_allgather_cost(spec: CallSpec, m: CostModel) -> float:
    p, nbytes = spec.size, spec.vector_bytes()
    if p == 1:
        return 0.0
    spread = (p - 1) / p * nbytes * m.beta
    return (ceil_log2(p) + p - 1) * m.alpha + 2 * spread


@register(
    "bcast", "scatter_allgather",
    "van de Geijn: binomial scatter of p pieces, then a ring allgather of the pieces",
    cost=_scatter_allgather_cost,
)
def bcast_scatter_allgather(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Scatter the message's p pieces down a binomial tree, then circulate them on a ring."""
    n, root, p = spec.count, spec.root, spec.size
    b = builder_for(rank, spec)
    v = relative(rank, root, p)
    sizes = even_split(n, p)  # piece i belongs to virtual rank i; empty pieces when n < p
    offsets = prefix(tuple(sizes))

    def pieces(first: int, number: int) -> tuple[int, int]:
        return offsets[first], sum(sizes[first: first + number])

    with b.round():  # binomial scatter: virtual rank v ends with pieces v … v+subtree−1
        after: list[int] = []
        if v == 0:
            if n:
                b.copy(RECV(0, n), SEND(0, n))
            source = SEND
        else:
            offset, count = pieces(v, binomial_subtree_size(v, p))
            if count:
                after = [b.recv(absolute(binomial_parent(v), root, p), RECV(offset, count))]
            source = RECV
        for child in binomial_children(v, p):
            offset, count = pieces(child, binomial_subtree_size(child, p))
            if count:
                b.send(absolute(child, root, p), source(offset, count), after)
    left, right = (absolute(u, root, p) for u in ring_neighbours(v, p))
    for step in range(p - 1):  # ring allgather: pass on the piece received one step earlier
        outgoing, incoming = (v - step) % p, (v - step - 1) % p
        with b.round():
            if sizes[outgoing]:
                b.send(right, RECV(offsets[outgoing], sizes[outgoing]))
            if sizes[incoming]:
                b.recv(left, RECV(offsets[incoming], sizes[incoming]))
    return b.build()


DEFAULT_CHUNK_BYTES = 64 * 1024


def _chunk_elements(spec: CallSpec, chunk_bytes: int) -> int:
    return max(1, int(chunk_bytes) // max(1, spec.itemsize))


def _pipeline_cost(spec: CallSpec, m: CostModel) -> float:
    if spec.size == 1:
        return 0.0
    chunk = _chunk_elements(spec, DEFAULT_CHUNK_BYTES)
    chunks = max(1, -(-spec.count // chunk))
    return m.message(min(chunk, spec.count) * spec.itemsize, spec.size - 2 + chunks)


@register(
    "bcast", "pipeline",
    "Chunked chain in root-relative rank order; each rank forwards a chunk once it has it",
    params=(Param("chunk", DEFAULT_CHUNK_BYTES, "bytes per chunk", minimum=1),),
    cost=_pipeline_cost,
)
def bcast_pipeline(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Cut the message in chunks and stream them down the chain root → root+1 → … ."""
    n, root, p = spec.count, spec.root, spec.size
    b = builder_for(rank, spec)
    v = relative(rank, root, p)
    chunk = _chunk_elements(spec, params["chunk"])
    previous = absolute(v - 1, root, p) if v > 0 else None
    following = absolute(v + 1, root, p) if v + 1 < p else None
    if v == 0 and n:
        b.copy(RECV(0, n), SEND(0, n))
    for start in range(0, n, chunk):
        piece: Region = RECV(start, min(chunk, n - start))
        if previous is None:
            after: list[int] = []
            source = SEND(piece.offset, piece.count)
        else:
            after = [b.recv(previous, piece)]
            source = piece
        if following is not None:
            b.send(following, source, after)
    return b.build()
