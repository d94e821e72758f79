"""Algorithm lists per geometry (seed 001): *always works* and *must query*.

Everything comes from the registry, never from a hand-kept list:

- an algorithm's **resources** are what it needs (`Algorithm.needs`, e.g. ``mpi``), what it
  is built for (`Algorithm.resources`, e.g. ``in_network_reduction``, ``one_node``), what its
  geometry-wide restrictions ask (``power_of_two_size``) and, for every schedule, that the
  buffers it addresses are contiguous (``contiguous_buffers``);
- a geometry's resources come from its transport (`Transport.capabilities`: in-network
  reduction, named resources), from where its endpoints live (``one_node``), from its size
  (``power_of_two_size``) — the endpoint layer always hands schedules contiguous buffers;
- an algorithm missing a resource is offered on neither list; one whose remaining
  restrictions depend on the call (a commutative operator, equal counts) or that the
  geometry's preferences limit to a range of message sizes is on the *must query* list, with
  a `check` that says, for a given call, whether it is valid and why not; the rest *always
  work*.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..algorithms.registry import Algorithm, algorithms
from ..algorithms.spec import CallSpec

#: restrictions that depend only on the geometry, and the resource each stands for
GEOMETRY_RESTRICTIONS = {"power_of_two": "power_of_two_size"}
CONTIGUOUS = "contiguous_buffers"


@dataclass(frozen=True)
class Verdict:
    """Whether a call is valid for an algorithm, and if not, why (truthy when valid)."""

    valid: bool
    reasons: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.valid

    def __str__(self) -> str:
        return "valid" if self.valid else "invalid: " + "; ".join(self.reasons)


@dataclass(frozen=True)
class AlgorithmInfo:
    """One entry of a geometry's algorithm list, with its metadata and its call check."""

    collective: str
    name: str
    description: str
    restrictions: tuple[str, ...]
    #: bytes per rank the algorithm is meant for: (min, max), max None for no limit
    message_sizes: tuple[int, int | None]
    resources: tuple[str, ...]
    params: tuple[tuple[str, Any], ...]
    algorithm: Algorithm = field(repr=False, compare=False)
    checker: Callable[[Any], Verdict] = field(repr=False, compare=False)

    def check(self, call: Any) -> Verdict:
        """Whether ``call`` (an `Xfer` or a `CallSpec`) is valid for this algorithm, and why not."""
        return self.checker(call)


class AlgorithmLists(NamedTuple):
    """The two lists of `Geometry.algorithms`."""

    always: list[AlgorithmInfo]
    must_query: list[AlgorithmInfo]

    def names(self) -> tuple[list[str], list[str]]:
        """Just the names, list by list."""
        return [a.name for a in self.always], [a.name for a in self.must_query]


def resources_of(alg: Algorithm) -> frozenset[str]:
    """Everything ``alg`` needs of a geometry (see the module docstring)."""
    needed = set(alg.needs) | set(alg.resources)
    needed |= {GEOMETRY_RESTRICTIONS[r.name] for r in alg.restrictions
               if r.name in GEOMETRY_RESTRICTIONS}
    if alg.native is None:
        needed.add(CONTIGUOUS)
    return frozenset(needed)


def _call_restrictions(alg: Algorithm) -> list[str]:
    return [r.description for r in alg.restrictions if r.name not in GEOMETRY_RESTRICTIONS]


def algorithm_lists(
    collective: str,
    resources: frozenset[str],
    spec_of: Callable[[Any], CallSpec | Verdict],
    size_ranges: dict[str, tuple[int, int | None]] | None = None,
) -> AlgorithmLists:
    """The lists for a geometry with ``resources``; ``spec_of`` turns a call into a spec
    (or a `Verdict` explaining why it cannot be one); ``size_ranges`` limit algorithms to
    message sizes (from the geometry's preferences)."""
    ranges = size_ranges or {}
    always: list[AlgorithmInfo] = []
    must_query: list[AlgorithmInfo] = []
    for alg in algorithms(collective):
        needed = resources_of(alg)
        if not needed <= resources:
            continue
        sizes = ranges.get(alg.name, (0, None))
        restricted = _call_restrictions(alg)
        info = AlgorithmInfo(
            collective, alg.name, alg.description, tuple(r.description for r in
                                                          alg.restrictions),
            sizes, tuple(sorted(needed)), tuple((p.name, p.default) for p in alg.params), alg,
            _checker(alg, sizes, spec_of))
        (must_query if restricted or sizes != (0, None) else always).append(info)
    return AlgorithmLists(always, must_query)


def _checker(alg: Algorithm, sizes: tuple[int, int | None],
             spec_of: Callable[[Any], CallSpec | Verdict]) -> Callable[[Any], Verdict]:
    def check(call: Any) -> Verdict:
        spec = call if isinstance(call, CallSpec) else spec_of(call)
        if isinstance(spec, Verdict):
            return spec
        reasons = [f"requires that {why}" for why in alg.reasons_ineligible(spec)]
        nbytes = spec.message_bytes()
        low, high = sizes
        if nbytes < low or (high is not None and nbytes > high):
            reasons.append(f"{nbytes} bytes is outside its message sizes "
                           f"[{low}, {'∞' if high is None else high}]")
        return Verdict(not reasons, tuple(reasons))

    return check


def describe(lists: AlgorithmLists) -> str:
    """The two lists as a readable table."""
    lines: list[str] = []
    for title, entries in (("always works", lists.always), ("must query", lists.must_query)):
        lines.append(f"{title}:")
        for a in entries:
            extra = "; ".join(a.restrictions)
            lines.append(f"  {a.name:<22} {a.description[:60]}" + (f" [{extra}]" if extra else ""))
    return "\n".join(lines)


def names(entries: Sequence[AlgorithmInfo]) -> list[str]:
    """Names of some entries."""
    return [a.name for a in entries]
