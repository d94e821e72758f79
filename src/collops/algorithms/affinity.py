"""Collectives shaped by thread affinity (seed 003): ``affinity_tree``.

A machine is a hierarchy of hardware threads — ``machine:2x4x2`` is 2 modules (multi-chip
modules, sockets) × 4 cores × 2 threads, factors outermost first — and every rank is bound to
one hardware thread (``mapping``). Ranks bound to the same core form a *core domain*, ranks
on the same module a *module domain*, all ranks the *node domain* (more factors give more
levels: ``2x2x4x2`` is nodes × modules × cores × threads, and oversubscribed ranks sharing one
hardware thread form a *thread domain* below the cores).

The collective runs domain by domain, innermost first. Each domain's ranks (sorted by rank,
its *leader* first) are joined by a k-ary tree numbered in preorder (``arity`` a parameter);
the leader alone goes on to the next level's domain. A reduction climbs the trees — inside
every core, then across the cores of a module, then across modules — so the slow links are
crossed once per domain instead of once per tree edge; a broadcast descends the same trees,
the widest level first.

**Rank order.** A domain's leader is its lowest rank and the trees are preorder, so when
every domain holds a contiguous run of ranks (``fill`` mapping, the default) every subtree
is such a run and a non-commutative reduction still combines in rank order; the tree's top
then sends the result to the root if they differ. Other mappings break the runs; a
non-commutative operator is then refused (`AlgorithmIneligible`). A broadcast makes the root
the leader of each domain it belongs to.

Builders stay pure: the machine and the mapping arrive as string parameters, so the same
schedule can be built for a virtual machine on a 2-core laptop, the simulator or real runs.
On a communicator whose ranks are bound to CPUs (``collops run --bind-to core``, or where
the launcher binds them), the runtime supplies ``machine`` and ``mapping`` from the real
machine (`collops.topology.machine.detect_machine`: packages, cores, threads from sysfs) and
each rank's CPU, as the endpoints do from their tasks' CPUs. Elsewhere the default machine
(``machine=""``) is a stand-in that exercises every level at any size: 2 threads per core, 4
cores per module, as many modules as needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..errors import AlgorithmIneligible, ArgumentError
from ..schedule import RECV, SEND, Schedule, ScheduleBuilder
from . import allreduce as _allreduce  # noqa: F401  (registered first: cost ties go to them)
from . import barrier as _barrier  # noqa: F401
from . import bcast as _bcast  # noqa: F401
from . import reduce as _reduce  # noqa: F401
from .reduce import combine_subtree, contiguous_kary_shape
from .registry import CostFn, CostModel, Param, register
from .spec import CallSpec, builder_for

ALGORITHM = "affinity_tree"
#: threads per core and cores per module of the default (stand-in) machine
DEFAULT_THREADS, DEFAULT_CORES = 2, 4
#: names of the domain levels, innermost first (after "thread", one per machine factor)
LEVEL_NAMES = ("thread", "core", "module", "node", "system")
MAPPINGS = ("fill", "spread")


def parse_shape(text: str) -> tuple[int, ...]:
    """``"machine:2x4x2"`` or ``"2x4x2"`` → (2, 4, 2), factors outermost first."""
    body = text.strip()
    if body.lower().startswith("machine:"):
        body = body[len("machine:"):]
    try:
        shape = tuple(int(f) for f in body.lower().split("x"))
    except ValueError:
        raise ArgumentError(ALGORITHM, "machine", text,
                            "expected factors like 2x4x2 (modules x cores x threads)") from None
    if not shape or min(shape) < 1:
        raise ArgumentError(ALGORITHM, "machine", text, "every factor must be >= 1")
    return shape


def default_shape(size: int) -> tuple[int, ...]:
    """The stand-in machine for ``size`` ranks: modules × 4 cores × 2 threads, enough modules."""
    per_module = DEFAULT_THREADS * DEFAULT_CORES
    return (max(1, -(-size // per_module)), DEFAULT_CORES, DEFAULT_THREADS)


def level_names(shape: tuple[int, ...]) -> tuple[str, ...]:
    """Names of the domain levels of ``shape``, innermost (thread) to outermost (whole)."""
    names = list(LEVEL_NAMES[: len(shape) + 1])
    names += [f"level{i}" for i in range(len(names), len(shape) + 1)]
    return tuple(names)


def threads_of_ranks(shape: tuple[int, ...], mapping: str, size: int) -> tuple[int, ...]:
    """The hardware thread of every rank under ``mapping`` (fill, spread or a list "0,2,…")."""
    total = 1
    for f in shape:
        total *= f
    text = mapping.strip().lower()
    if text in ("", "fill"):
        if size <= total:
            return tuple(range(size))
        return tuple(r * total // size for r in range(size))  # contiguous blocks per thread
    if text == "spread":
        order = sorted(range(total), key=lambda h: _coordinates(shape, h)[::-1])
        return tuple(order[r % total] for r in range(size))
    try:
        threads = tuple(int(t) for t in text.replace(" ", "").split(","))
    except ValueError:
        raise ArgumentError(ALGORITHM, "mapping", mapping,
                            f"one of {', '.join(MAPPINGS)} or a list of thread ids") from None
    if len(threads) != size:
        raise ArgumentError(ALGORITHM, "mapping", mapping,
                            f"lists {len(threads)} threads for {size} ranks")
    if min(threads, default=0) < 0 or max(threads, default=0) >= total:
        raise ArgumentError(ALGORITHM, "mapping", mapping,
                            f"thread ids must lie in 0..{total - 1}")
    return threads


def _coordinates(shape: tuple[int, ...], thread: int) -> tuple[int, ...]:
    """Mixed-radix digits of a hardware thread id, outermost first."""
    digits = []
    for f in reversed(shape):
        digits.append(thread % f)
        thread //= f
    return tuple(reversed(digits))


def domain_key(shape: tuple[int, ...], thread: int, level: int) -> int:
    """Which domain of ``level`` (0 = one hardware thread) hardware thread ``thread`` is in."""
    span = 1
    for f in shape[len(shape) - level:] if level else ():
        span *= f
    return thread // span


@dataclass(frozen=True)
class AffinityTree:
    """The domains and trees of one machine, mapping, arity and root (a value)."""

    shape: tuple[int, ...]
    threads: tuple[int, ...]
    arity: int
    #: per level (innermost first), the domains with more than one rank: rank lists, leader first
    domains: tuple[tuple[tuple[int, ...], ...], ...]
    parent: tuple[int, ...]
    #: children of every rank, innermost level first, each level's in preorder
    children: tuple[tuple[int, ...], ...]
    #: the level at which each rank joins its parent (-1 for the top)
    joins_at: tuple[int, ...]
    top: int

    @property
    def size(self) -> int:
        """Number of ranks."""
        return len(self.threads)

    def keeps_rank_order(self) -> bool:
        """Whether combining own value then children's subtrees visits ranks in order."""
        order: list[int] = []
        stack = [self.top]
        while stack:
            v = stack.pop()
            order.append(v)
            stack.extend(reversed(self.children[v]))
        return order == list(range(self.size))

    def critical_messages(self) -> int:
        """Most messages handled in sequence on any top-to-leaf path (for cost estimates)."""
        worst = {self.top: len(self.children[self.top])}
        stack = [self.top]
        best = worst[self.top]
        while stack:
            v = stack.pop()
            for c in self.children[v]:
                worst[c] = worst[v] + len(self.children[c])
                best = max(best, worst[c])
                stack.append(c)
        return best

    def describe(self) -> str:
        """The domains level by level, as text."""
        names = level_names(self.shape)
        lines = [f"machine {'x'.join(map(str, self.shape))}, arity {self.arity}, top {self.top}"]
        for level, doms in enumerate(self.domains):
            if doms:
                shown = " ".join("{" + ",".join(map(str, d)) + "}" for d in doms)
                lines.append(f"  {names[level]:<7} {shown}")
        return "\n".join(lines)


@lru_cache(maxsize=256)
def build_tree(shape: tuple[int, ...], threads: tuple[int, ...], arity: int,
               root: int | None = None) -> AffinityTree:
    """Domains level by level, a preorder ``arity``-ary tree in each (cached: it is pure)."""
    size = len(threads)
    parent = [-1] * size
    joins = [-1] * size
    children: list[list[int]] = [[] for _ in range(size)]
    active = list(range(size))
    all_domains: list[tuple[tuple[int, ...], ...]] = []
    shape_of = contiguous_kary_shape(arity)
    for level in range(len(shape) + 1):
        groups: dict[int, list[int]] = {}
        for r in active:
            groups.setdefault(domain_key(shape, threads[r], level), []).append(r)
        leaders, domains = [], []
        for key in sorted(groups, key=lambda k: min(groups[k])):
            members = sorted(groups[key])
            leader = root if root is not None and root in members else members[0]
            ordered = [leader] + [m for m in members if m != leader]
            leaders.append(leader)
            if len(ordered) > 1:
                domains.append(tuple(ordered))
            for v, member in enumerate(ordered):
                vparent, vchildren = shape_of(v, len(ordered))
                if vparent >= 0:
                    parent[member], joins[member] = ordered[vparent], level
                children[member].extend(ordered[c] for c in vchildren)
        all_domains.append(tuple(domains))
        active = sorted(leaders)
    (top,) = active
    return AffinityTree(shape, threads, arity, tuple(all_domains), tuple(parent),
                        tuple(tuple(c) for c in children), tuple(joins), top)


def tree_for(size: int, params: Mapping[str, Any], root: int | None = None) -> AffinityTree:
    """The affinity tree the parameters describe for ``size`` ranks."""
    text = str(params.get("machine", "") or "")
    shape = parse_shape(text) if text else default_shape(size)
    threads = threads_of_ranks(shape, str(params.get("mapping", "") or ""), size)
    return build_tree(shape, threads, int(params.get("arity", 2)), root)


def _ordered_tree(spec: CallSpec, params: Mapping[str, Any]) -> AffinityTree:
    """The reduction tree, checking that a non-commutative operator keeps rank order."""
    tree = tree_for(spec.size, params)
    if not spec.commutative and not tree.keeps_rank_order():
        raise AlgorithmIneligible(
            spec.collective, "algorithm", ALGORITHM,
            "the mapping puts ranks out of rank order within a domain, which a "
            "non-commutative operator cannot take (use a contiguous mapping such as fill)")
    return tree


#: what the algorithm is built for: every rank on the one machine its parameters describe
RESOURCES = ("one_node",)
PARAMS = (
    Param("machine", "", "machine shape such as 2x4x2 (modules x cores x threads); on a "
          "communicator whose ranks are bound to CPUs, the real machine; else '' = modules of "
          "4 cores x 2 threads", supplied="binding.machine"),
    Param("mapping", "", "rank → hardware thread: fill, spread, or a list '0,2,1,…'; on a "
          "communicator whose ranks are bound to CPUs, their CPUs' threads",
          supplied="binding.mapping"),
    Param("arity", 2, "children per node in each domain's tree", minimum=1),
)


def _cost(factor: float, reduces: bool, with_data: bool = True) -> CostFn:
    """An α-β-γ estimate from the default machine's tree (messages in sequence on its
    longest path, twice for the all- and barrier forms)."""

    def cost(spec: CallSpec, m: CostModel) -> float:
        tree = tree_for(spec.size, {})
        nbytes = spec.count * spec.itemsize if with_data else 0
        per = m.message(nbytes) + (nbytes * m.gamma if reduces else 0.0)
        extra = per if spec.collective == "reduce" and spec.root != tree.top else 0.0
        return factor * tree.critical_messages() * per + extra
    return cost


@register("reduce", ALGORITHM, "Seed 003: reduce inside cores, then modules, then nodes, along "
          "an n-ary tree per affinity domain", params=PARAMS, resources=RESOURCES,
          cost=_cost(1, True))
def reduce_affinity(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Climb the domain trees; the top sends the result to the root if they differ."""
    tree = _ordered_tree(spec, params)
    n, root = spec.count, spec.root
    b = builder_for(rank, spec)
    keep = RECV(0, n) if rank == root == tree.top else None
    acc, done = combine_subtree(b, n, tree.children[rank], keep)
    if tree.parent[rank] >= 0:
        b.send(tree.parent[rank], acc, done)
    elif rank != root:
        b.send(root, acc, done)
    if rank == root != tree.top:
        b.recv(tree.top, RECV(0, n))
    return b.build()


@register("allreduce", ALGORITHM, "Seed 003: reduce up the affinity-domain trees (cores, "
          "modules, nodes), broadcast back down them", params=PARAMS, resources=RESOURCES,
          cost=_cost(2, True))
def allreduce_affinity(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Climb the domain trees into RECV, then receive the total and pass it down."""
    tree = _ordered_tree(spec, params)
    n = spec.count
    b = builder_for(rank, spec)
    kids = tree.children[rank]
    acc, done = combine_subtree(b, n, kids, RECV(0, n) if kids or tree.parent[rank] < 0
                                else None)
    if tree.parent[rank] >= 0:
        sent = b.send(tree.parent[rank], acc, done)
        done = [b.recv(tree.parent[rank], RECV(0, n), [sent])]
    for child in reversed(kids):
        b.send(child, RECV(0, n), done)
    return b.build()


@register("bcast", ALGORITHM, "Seed 003: down the affinity-domain trees, across modules first, "
          "then cores, then threads", params=PARAMS, resources=RESOURCES,
          cost=_cost(1, False))
def bcast_affinity(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """The root leads every domain it is in; others receive from their parent and forward."""
    tree = tree_for(spec.size, params, spec.root)
    n = spec.count
    b = builder_for(rank, spec)
    if rank == spec.root:
        b.copy(RECV(0, n), SEND(0, n))
        source, after = SEND(0, n), []
    else:
        source, after = RECV(0, n), [b.recv(tree.parent[rank], RECV(0, n))]
    for child in reversed(tree.children[rank]):
        b.send(child, source, after)
    return b.build()


@register("barrier", ALGORITHM, "Seed 003: zero-byte fan-in up the affinity-domain trees, "
          "fan-out back down", params=PARAMS, resources=RESOURCES,
          cost=_cost(2, False, with_data=False))
def barrier_affinity(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Wait for the children, tell the parent, wait for its release, release the children."""
    tree = tree_for(spec.size, params)
    b = ScheduleBuilder(rank, spec.size)
    kids = tree.children[rank]
    arrived = [b.recv(child, RECV(0, 0)) for child in kids]
    released = arrived
    if tree.parent[rank] >= 0:
        told = b.send(tree.parent[rank], SEND(0, 0), arrived)
        released = [b.recv(tree.parent[rank], RECV(0, 0), [told])]
    for child in reversed(kids):
        b.send(child, SEND(0, 0), released)
    return b.build()
