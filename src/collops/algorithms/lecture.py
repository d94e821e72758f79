"""The lecture's exchanges (seed 004) as schedules.

Seed 004 tabulates allgather and alltoall on a ring, a √p×√p torus and a hypercube, every
scheme moving data between neighbours only. The ring allgather and the hypercube allgather
(recursive doubling) were already here; these are the other four:

* ``allgather.torus_dimensions`` — a ring allgather along each dimension of the torus in turn;
  along dimension k every message carries the blocks gathered in the dimensions before;
* ``alltoall.ring_relay`` — p−1 steps round a ring: a rank sends its right neighbour every
  block it holds for someone else; the neighbour keeps its own and passes the rest on
  (messages of p−1, p−2, …, 1 blocks: on average ½·p·m bytes);
* ``alltoall.torus_dimensions`` — the ring relay along each dimension in turn, the blocks
  bound for one coordinate travelling together (after dimension k a rank holds every block
  whose destination shares its coordinates in the dimensions done);
* ``alltoall.hypercube_exchange`` — along each dimension k, exchange with ``rank XOR 2^k`` the
  half of the held blocks whose destination differs from the rank in bit k (not Bruck's
  ``rank ± 2^k``).

A torus shape is the ``shape`` parameter (``"4x4x4"``, last coordinate fastest, as collops'
``torus:`` topologies number their nodes); by default the most nearly square two-dimensional
one. The builders keep track of where every block is (`_Holdings`): a message is packed once
into scratch (contiguous runs copied at once) and a received bundle is forwarded as it came.
Contention-free, their simulated times are the lecture's formulas (`collops.model.seed004`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ..errors import ArgumentError
from ..schedule import RECV, SEND, Region, Schedule, ScheduleBuilder
from .patterns import is_power_of_two
from .registry import POWER_OF_TWO, CostModel, Param, Restriction, register
from .spec import CallSpec, builder_for

#: a block: (source rank, destination rank) for alltoall, (source rank, -1) for allgather
Block = tuple[int, int]

SHAPE = Param("shape", "", "torus dimensions, e.g. 4x4x4 (default: the declared torus the "
              "ranks fill, else the squarest 2-D one)", supplied="network.shape")
UNIFORM = Restriction(
    "equal_counts", "every rank sends and receives the same count to and from every rank",
    lambda s: len(set(s.sendcounts) | set(s.recvcounts)) <= 1)


def torus_shape(text: str, p: int, algorithm: str = "torus_dimensions") -> tuple[int, ...]:
    """``"4x4x4"`` as dimensions multiplying to ``p``; empty: the squarest a×b with a ≤ b."""
    if not text:
        a = max(d for d in range(1, math.isqrt(p) + 1) if p % d == 0)
        return (a, p // a) if a > 1 else (p,)
    try:
        dims = tuple(int(x) for x in str(text).lower().split("x"))
    except ValueError:
        raise ArgumentError(algorithm, "shape", text, "expected dimensions like 4x4x4") from None
    if not dims or min(dims) < 1 or math.prod(dims) != p:
        raise ArgumentError(algorithm, "shape", text,
                            f"its dimensions must multiply to the {p} ranks")
    return dims


def _coords(rank: int, dims: Sequence[int]) -> tuple[int, ...]:
    out = []
    for d in reversed(dims):
        out.append(rank % d)
        rank //= d
    return tuple(reversed(out))


def _rank(coords: Sequence[int], dims: Sequence[int]) -> int:
    r = 0
    for c, d in zip(coords, dims, strict=True):
        r = r * d + c
    return r


def _along(rank: int, dims: Sequence[int], k: int, value: int) -> int:
    """The rank whose coordinates are ``rank``'s with coordinate ``k`` set to ``value``."""
    c = list(_coords(rank, dims))
    c[k] = value % dims[k]
    return _rank(c, dims)


def _varying(rank: int, dims: Sequence[int], free: set[int]) -> list[int]:
    """Every rank that agrees with ``rank`` outside the dimensions ``free``, sorted."""
    base = _coords(rank, dims)
    axes = [range(dims[k]) if k in free else (base[k],) for k in range(len(dims))]
    return sorted(_rank(c, dims) for c in itertools.product(*axes))


def _lines(rank: int, dims: Sequence[int]) -> Iterator[tuple[int, int, int, int, int, set[int]]]:
    """The dimensions a rank exchanges along, last first (those of length 1 skipped): the
    dimension, its length, the rank's coordinate, its right and left neighbours on that ring,
    and the dimensions done before it."""
    done: set[int] = set()
    for k in reversed(range(len(dims))):
        if dims[k] > 1:
            x = _coords(rank, dims)[k]
            yield (k, dims[k], x, _along(rank, dims, k, x + 1), _along(rank, dims, k, x - 1),
                   set(done))
        done.add(k)


class _Holdings:
    """Where each block a rank holds lies now, and the steps that put it there."""

    def __init__(self, b: ScheduleBuilder, m: int) -> None:
        self.b, self.m = b, m
        self.at: dict[Block, tuple[Region, list[int]]] = {}

    def pack(self, blocks: Sequence[Block]) -> tuple[Region, list[int]]:
        """The blocks, in order, in one region: where they already lie so, else copied into
        fresh scratch (each contiguous run in one copy)."""
        runs = self._runs(blocks)
        if len(runs) == 1:
            region, deps, _ = runs[0]
            return region, deps
        area = self.b.tmp(len(blocks) * self.m)
        steps, at = [], 0
        for region, deps, _ in runs:
            steps.append(self.b.copy(area.sub(at, region.count), region, deps))
            at += region.count
        return area, steps

    def unpack(self, blocks: Sequence[Block], place: Callable[[Block], Region]) -> None:
        """Copy each block to ``place(block)`` (contiguous runs with contiguous places at
        once)."""
        i = 0
        while i < len(blocks):
            region, deps = self.at[blocks[i]]
            target = place(blocks[i])
            j = i + 1
            while j < len(blocks):
                nxt, nxt_deps = self.at[blocks[j]]
                to = place(blocks[j])
                if (nxt.buffer != region.buffer or nxt.offset != region.end
                        or to.buffer != target.buffer or to.offset != target.end
                        or nxt_deps != deps):
                    break
                region = Region(region.buffer, region.offset, region.count + nxt.count)
                target = Region(target.buffer, target.offset, target.count + to.count)
                j += 1
            self.b.copy(target, region, deps)
            i = j

    def receive(self, peer: int, blocks: Sequence[Block]) -> tuple[Region, int]:
        """Receive ``blocks`` (in this order) from ``peer`` into fresh scratch."""
        area = self.b.tmp(len(blocks) * self.m)
        step = self.b.recv(peer, area)
        for i, block in enumerate(blocks):
            self.at[block] = (area.sub(i * self.m, self.m), [step])
        return area, step

    def _runs(self, blocks: Sequence[Block]) -> list[tuple[Region, list[int], int]]:
        runs: list[tuple[Region, list[int], int]] = []
        for block in blocks:
            region, deps = self.at[block]
            if runs:
                last, last_deps, n = runs[-1]
                if (region.buffer == last.buffer and region.offset == last.end
                        and deps == last_deps):
                    runs[-1] = (Region(last.buffer, last.offset, last.count + region.count),
                                deps, n + 1)
                    continue
            runs.append((region, list(deps), 1))
        return runs


# -- alltoall -----------------------------------------------------------------------------------
def _held(rank: int, dims: Sequence[int], done: set[int]) -> list[Block]:
    """The alltoall blocks ``rank`` holds once the dimensions ``done`` are exchanged: sources
    that agree with it outside ``done``, destinations that agree with it inside ``done``."""
    everything = set(range(len(dims)))
    return [(s, d) for s in _varying(rank, dims, done)
            for d in _varying(rank, dims, everything - done)]


def _relay_alltoall(rank: int, spec: CallSpec, dims: Sequence[int]) -> Schedule:
    """The ring relay along each dimension of ``dims`` in turn (one dimension: a ring)."""
    b = builder_for(rank, spec)
    m, p = spec.sendcounts[0], spec.size
    if m == 0:
        return b.build()
    h = _Holdings(b, m)
    for dst in range(p):
        h.at[(rank, dst)] = (SEND(spec.sdispls[dst], m), [])
    for k, length, x, right, left, done in _lines(rank, dims):

        def bundle(holder: int, first: int, k: int = k, length: int = length,
                   done: set[int] = done) -> list[Block]:
            """What ``holder`` sends at relay step ``first``: its blocks bound ``first`` or
            more steps along dimension k, nearest first."""
            hk = _coords(holder, dims)[k]
            out = [(bl, (_coords(bl[1], dims)[k] - hk) % length)
                   for bl in _held(holder, dims, done)]
            return [bl for bl, dist in sorted(out, key=lambda t: (t[1], t[0])) if dist >= first]

        area, deps = h.pack(bundle(rank, 1))
        b.send(right, area, deps)
        per_item = p // length
        for s in range(1, length):
            blocks = bundle(_along(rank, dims, k, x - s), s)
            area, step = h.receive(left, blocks)
            if s < length - 1:  # keep the first item (ours), pass the rest on
                b.send(right, area.sub(per_item * m, (len(blocks) - per_item) * m), [step])
    h.unpack([(src, rank) for src in range(p)], lambda bl: RECV(spec.rdispls[bl[0]], m))
    return b.build()


def _relay_cost(spec: CallSpec, model: CostModel, dims: Sequence[int]) -> float:
    m = spec.sendcounts[0] * spec.itemsize if spec.sendcounts else 0
    p = spec.size
    return sum((n - 1) * model.alpha + model.beta * m * p * (n - 1) / 2 for n in dims if n > 1)


@register(("alltoall", "alltoallv"), "ring_relay",
          "seed 004: p−1 steps round a ring, each rank passing on the blocks not yet home "
          "(on average ½·p·m bytes a step)",
          restrictions=[UNIFORM], cost=lambda s, m: _relay_cost(s, m, (s.size,)))
def alltoall_ring_relay(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Relay every block to its destination round the ring, nearest destinations first."""
    return _relay_alltoall(rank, spec, (spec.size,))


@register(("alltoall", "alltoallv"), "torus_dimensions",
          "seed 004: the ring relay along each torus dimension in turn, blocks for one "
          "coordinate travelling together", restrictions=[UNIFORM], params=[SHAPE],
          cost=lambda s, m: _relay_cost(s, m, torus_shape("", s.size)))
def alltoall_torus_dimensions(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Relay along the last dimension first, then the others, as the shape lists them."""
    return _relay_alltoall(rank, spec, torus_shape(params["shape"], spec.size))


def _hypercube_cost(spec: CallSpec, model: CostModel) -> float:
    m = spec.sendcounts[0] * spec.itemsize if spec.sendcounts else 0
    d = max(spec.size.bit_length() - 1, 0)
    return d * (model.alpha + model.beta * m * spec.size / 2)


@register(("alltoall", "alltoallv"), "hypercube_exchange",
          "seed 004: along each dimension k exchange with rank XOR 2^k the half of the held "
          "blocks bound across it", restrictions=[POWER_OF_TWO, UNIFORM], cost=_hypercube_cost)
def alltoall_hypercube_exchange(rank: int, spec: CallSpec,
                                params: Mapping[str, Any]) -> Schedule:
    """log₂p exchanges of ½·p blocks with the partner across each dimension."""
    b = builder_for(rank, spec)
    m, p = spec.sendcounts[0], spec.size
    if m == 0 or not is_power_of_two(p):
        return b.build()
    h = _Holdings(b, m)
    for dst in range(p):
        h.at[(rank, dst)] = (SEND(spec.sdispls[dst], m), [])
    bits = (2,) * (p.bit_length() - 1)  # the hypercube as a 2×2×…×2 torus
    done: set[int] = set()
    for k in reversed(range(len(bits))):  # the last coordinate is bit 0
        bit = len(bits) - 1 - k
        partner = rank ^ (1 << bit)
        mine = (rank >> bit) & 1
        out = sorted(bl for bl in _held(rank, bits, done) if (bl[1] >> bit) & 1 != mine)
        area, deps = h.pack(out)
        b.send(partner, area, deps)
        h.receive(partner, sorted(bl for bl in _held(partner, bits, done)
                                  if (bl[1] >> bit) & 1 == mine))
        done.add(k)
    h.unpack([(src, rank) for src in range(p)], lambda bl: RECV(spec.rdispls[bl[0]], m))
    return b.build()


# -- allgather ----------------------------------------------------------------------------------
def _allgather_cost(spec: CallSpec, model: CostModel) -> float:
    m = spec.count * spec.itemsize
    total, gathered = 0.0, 1
    for n in reversed(torus_shape("", spec.size)):
        total += (n - 1) * (model.alpha + model.beta * m * gathered)
        gathered *= n
    return total


@register("allgather", "torus_dimensions",
          "seed 004: a ring allgather along each torus dimension in turn, carrying the blocks "
          "gathered in the dimensions before", params=[SHAPE], cost=_allgather_cost)
def allgather_torus_dimensions(rank: int, spec: CallSpec,
                               params: Mapping[str, Any]) -> Schedule:
    """Along the last dimension first: each step forwards what arrived the step before."""
    b = builder_for(rank, spec)
    m, p = spec.count, spec.size
    dims = torus_shape(params["shape"], p)
    if m == 0:
        return b.build()
    h = _Holdings(b, m)
    h.at[(rank, -1)] = (SEND(0, m), [])
    b.copy(RECV(rank * m, m), SEND(0, m))
    for k, length, x, right, left, done in _lines(rank, dims):
        area, deps = h.pack([(s, -1) for s in _varying(rank, dims, done)])
        b.send(right, area, deps)
        for s in range(1, length):
            origin = _along(rank, dims, k, x - s)
            area, step = h.receive(left, [(o, -1) for o in _varying(origin, dims, done)])
            if s < length - 1:
                b.send(right, area, [step])
    others = [(s, -1) for s in range(p) if s != rank]
    h.unpack(others, lambda bl: RECV(bl[0] * m, m))
    return b.build()
