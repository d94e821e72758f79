"""The registry: the single source of truth for algorithms.

An algorithm is registered once, by decorating its builder with `register`, giving its name,
a one-line description, its restrictions (predicates on the call spec, each with a reason),
its tunable parameters (with defaults) and its α-β-γ cost formula. The CLI listing, the docs
table, selection, the override settings and the test matrix all read this table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import AlgorithmIneligible, ArgumentError, UnknownAlgorithm
from ..schedule import Schedule
from .native import NativeAlgorithm
from .spec import COLLECTIVES, CallSpec

Builder = Callable[[int, CallSpec, Mapping[str, Any]], Schedule]


@dataclass(frozen=True)
class CostModel:
    """Hockney's α-β plus γ: latency per message, time per byte, reduction time per byte.

    The defaults are for collops's own transports on one machine, where a message costs the
    Python that posts, matches and completes it on both sides (a 2-rank 8-byte schedule
    broadcast over shared memory, ``collops bench -n 2 --algorithm linear``), so α is 20 µs,
    not the 2 µs of a C library.
    """

    alpha: float = 20e-6
    beta: float = 1e-10
    gamma: float = 2e-10

    def message(self, nbytes: float, count: float = 1.0) -> float:
        """Time of ``count`` sequential messages of ``nbytes`` each."""
        return count * (self.alpha + nbytes * self.beta)


CostFn = Callable[[CallSpec, CostModel], float]


@dataclass(frozen=True)
class Restriction:
    """A condition an algorithm needs of the call, with a reason to show when it fails."""

    name: str
    description: str
    check: Callable[[CallSpec], bool]


@dataclass(frozen=True)
class Param:
    """A tunable parameter of an algorithm."""

    name: str
    default: Any
    description: str
    minimum: int | None = None
    #: a fact the runtime supplies when the caller gives no value (e.g. ``binding.machine``:
    #: the machine and CPUs the ranks are bound to); the default applies where it cannot
    supplied: str | None = None

    def coerce(self, value: Any, algorithm: str, rank: int | None = None) -> Any:
        """Check and convert a given value, or raise naming the parameter."""
        if self.default is None or isinstance(self.default, int):
            try:
                value = int(value)
            except (TypeError, ValueError) as exc:
                raise ArgumentError(algorithm, self.name, value, "must be an integer",
                                    rank) from exc
        if self.minimum is not None and value < self.minimum:
            raise ArgumentError(algorithm, self.name, value, f"must be at least {self.minimum}",
                                rank)
        return value


POWER_OF_TWO = Restriction(
    "power_of_two", "the number of ranks is a power of two",
    lambda s: s.size > 0 and s.size & (s.size - 1) == 0)
COMMUTATIVE = Restriction(
    "commutative", "the operator is commutative", lambda s: s.commutative)
EQUAL_COUNTS = Restriction(
    "equal_counts", "every rank has the same count",
    lambda s: len(set(s.counts)) <= 1 if s.counts else True)


@dataclass(frozen=True)
class Algorithm:
    """One registered algorithm of one collective."""

    collective: str
    name: str
    description: str
    builder: Builder = field(repr=False)
    restrictions: tuple[Restriction, ...] = ()
    params: tuple[Param, ...] = ()
    cost: CostFn | None = field(default=None, repr=False)
    #: resources the algorithm *wants* (it runs everywhere, best where they exist)
    resources: frozenset[str] = frozenset()
    #: resources the algorithm *needs*: offered only by transports that have them (e.g. "mpi")
    needs: frozenset[str] = frozenset()
    #: for algorithms that are not schedules (a transport component's own collectives,
    #: e.g. MPI's): how the runtime starts them and binds their blocking runners
    native: NativeAlgorithm | None = field(default=None, repr=False, compare=False)
    #: the transports that can run the algorithm (empty: every one)
    transports: tuple[str, ...] = ()
    #: whether the algorithm is right when the rank's input is its output (``x`` is ``out``,
    #: MPI_IN_PLACE): it reads every input element before writing that element of the
    #: output. Otherwise an in-place call runs on a copy of ``x``
    in_place: bool = False
    #: whether the algorithm itself makes every member of a rooted call wait for every other
    #: member's fingerprint (root included), so ranks that disagree on the root raise
    #: `CollectiveMismatch`; otherwise the runtime runs a root agreement first
    agrees_on_root: bool = False
    #: where a user's algorithm was defined (its builder's file); None for collops' own
    origin: str | None = None

    def reasons_ineligible(self, spec: CallSpec) -> list[str]:
        """Why the algorithm cannot take ``spec`` (empty when it can)."""
        return [r.description for r in self.restrictions if not r.check(spec)]

    def eligible(self, spec: CallSpec) -> bool:
        """Whether the algorithm can take ``spec``."""
        return not self.reasons_ineligible(spec)

    def check(self, spec: CallSpec, rank: int | None = None) -> None:
        """Raise `AlgorithmIneligible` naming the first restriction ``spec`` breaks."""
        reasons = self.reasons_ineligible(spec)
        if reasons:
            raise AlgorithmIneligible(
                spec.collective, "algorithm", self.name, f"requires that {reasons[0]}", rank)

    def resolve(self, given: Mapping[str, Any], rank: int | None = None) -> dict[str, Any]:
        """Parameters with defaults filled in; unknown names are an error."""
        known = {p.name: p for p in self.params}
        call = f"{self.collective}[{self.name}]"
        for name in given:
            if name not in known:
                raise ArgumentError(
                    call, name, given[name],
                    f"not a parameter of this algorithm (it takes: {', '.join(known) or 'none'})",
                    rank)
        return {n: (p.coerce(given[n], call, rank) if n in given else p.default)
                for n, p in known.items()}

    def build(self, rank: int, spec: CallSpec, params: Mapping[str, Any] | None = None) -> Schedule:
        """This rank's schedule for ``spec``."""
        return self.builder(rank, spec, self.resolve(params or {}))

    def build_all(self, specs: CallSpec | list[CallSpec],
                  params: Mapping[str, Any] | None = None) -> list[Schedule]:
        """Every rank's schedule (one spec for all ranks, or one per rank)."""
        if isinstance(specs, CallSpec):
            specs = [specs] * specs.size
        resolved = self.resolve(params or {})
        return [self.builder(r, s, resolved) for r, s in enumerate(specs)]

    def estimate(self, spec: CallSpec, model: CostModel | None = None) -> float:
        """The α-β-γ cost of the call (infinite where no formula is given)."""
        if self.cost is None:
            return math.inf
        return float(self.cost(spec, model or CostModel()))


_REGISTRY: dict[str, dict[str, Algorithm]] = {c: {} for c in COLLECTIVES}


def register(
    collectives: str | Iterable[str],
    name: str,
    description: str,
    *,
    restrictions: Iterable[Restriction] = (),
    params: Iterable[Param] = (),
    cost: CostFn | None = None,
    resources: Iterable[str] = (),
    needs: Iterable[str] = (),
) -> Callable[[Builder], Builder]:
    """Decorator: register ``builder`` as algorithm ``name`` of one or more collectives."""
    names = (collectives,) if isinstance(collectives, str) else tuple(collectives)

    def decorate(builder: Builder) -> Builder:
        for c in names:
            add_algorithm(Algorithm(
                c, name, description, builder, tuple(restrictions), tuple(params), cost,
                frozenset(resources), frozenset(needs)))
        return builder

    return decorate


def check_name_free(collective: str, name: str, call: str = "register") -> None:
    """`ArgumentError` naming ``call`` unless ``collective`` is one and has no algorithm
    ``name`` yet (the message says where the one of that name comes from)."""
    table = _REGISTRY.get(collective)
    if table is None:
        raise ArgumentError(call, "collectives", collective,
                            f"not a collective (one of {', '.join(COLLECTIVES)})")
    if name in table:
        raise ArgumentError(call, "name", name,
                            f"{collective} already has an algorithm of this name "
                            f"({table[name].origin or 'built in'}); choose another")


def add_algorithm(algorithm: Algorithm, call: str = "register") -> None:
    """Register a ready-made `Algorithm` record (a transport component's native ones, a
    user's); its name must be free for its collective (`check_name_free`)."""
    check_name_free(algorithm.collective, algorithm.name, call)
    _REGISTRY[algorithm.collective][algorithm.name] = algorithm


def algorithms(collective: str) -> list[Algorithm]:
    """The registered algorithms of ``collective``, in registration order."""
    if collective not in _REGISTRY:
        raise UnknownAlgorithm("algorithms", "collective", collective,
                               f"not a collective (one of {', '.join(COLLECTIVES)})")
    return list(_REGISTRY[collective].values())


def get_algorithm(collective: str, name: str, rank: int | None = None,
                  call: str = "get_algorithm") -> Algorithm:
    """The algorithm ``name`` of ``collective``, or `UnknownAlgorithm` (naming ``call`` when
    ``collective`` is not one)."""
    table = _REGISTRY.get(collective)
    if table is None:
        raise UnknownAlgorithm(call, "collective", collective,
                               f"not a collective (one of {', '.join(COLLECTIVES)})", rank)
    if name not in table:
        raise UnknownAlgorithm(collective, "algorithm", name,
                               f"no such algorithm (known: {', '.join(table)})", rank)
    return table[name]


def all_algorithms() -> list[Algorithm]:
    """Every registered algorithm of every collective."""
    return [a for c in COLLECTIVES for a in _REGISTRY[c].values()]


def check_call_params(collective: str, params: Mapping[str, Any],
                      rank: int | None = None) -> None:
    """Refuse a call's algorithm parameters that no registered algorithm takes (a misspelt
    keyword such as ``recvcounts=`` would otherwise be dropped by automatic selection, which
    passes each algorithm only the parameters it knows) or whose value is not one value."""
    known = {p.name for a in all_algorithms() for p in a.params}
    for name, value in params.items():
        if name not in known:
            raise ArgumentError(collective, name, value,
                                "not an argument of the call nor a parameter of any algorithm "
                                f"(parameters: {', '.join(sorted(known))})", rank)
        try:
            hash(value)
        except TypeError:
            raise ArgumentError(collective, name, value, "must be one value (a number, a "
                                "string, a tuple), not a mutable container", rank) from None
