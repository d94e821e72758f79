"""Selection: which algorithm runs a call, as data plus a tiny engine.

Order of precedence (first that applies wins):

1. the call's ``algorithm=`` argument;
2. the communicator's override (`Comm.set_algorithm`);
3. the environment, ``COLLOPS_<COLLECTIVE>_ALGORITHM=name``;
4. the tuning file (TOML, ``COLLOPS_TUNING_FILE`` or `load_tuning`), by message size;
5. automatic: among eligible algorithms the transport offers, the one with the lowest α-β-γ
   cost estimate (ties go to the earlier registered).

An explicit choice (1–3) that cannot take the call is an error naming the restriction; a
tuning-file rule that cannot is skipped (fall back to automatic), as UCC does. `explain`
prints the table behind a choice.

A tuning file::

    [allreduce]
    algorithm = "ring"                 # default for this collective
    [[allreduce.rule]]                 # first matching rule wins
    max_bytes = 4096
    algorithm = "recursive_doubling"
    [alltoall.params]                  # parameters given to the chosen algorithm
    chunk = 2048
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ..errors import ArgumentError
from .registry import Algorithm, CostModel, algorithms, get_algorithm
from .spec import CallSpec


@dataclass(frozen=True)
class Rule:
    """One tuning-file rule: an algorithm for messages within a size range."""

    algorithm: str
    min_bytes: int = 0
    max_bytes: int | None = None
    params: tuple[tuple[str, Any], ...] = ()

    def applies(self, nbytes: int) -> bool:
        """Whether the rule covers a message of ``nbytes``."""
        return nbytes >= self.min_bytes and (self.max_bytes is None or nbytes <= self.max_bytes)


@dataclass(frozen=True)
class Tuning:
    """Rules per collective, read from a TOML file."""

    rules: Mapping[str, tuple[Rule, ...]] = field(default_factory=dict)
    source: str = ""

    def pick(self, collective: str, nbytes: int) -> Rule | None:
        """The first rule for ``collective`` covering ``nbytes``."""
        for rule in self.rules.get(collective, ()):
            if rule.applies(nbytes):
                return rule
        return None


def load_tuning(path: str) -> Tuning:
    """Read a TOML tuning file (see the module docstring for its shape)."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ArgumentError("load_tuning", "path", path, f"cannot read tuning file: {exc}") from exc
    rules: dict[str, tuple[Rule, ...]] = {}
    for collective, table in data.items():
        algorithms(collective)  # validates the collective name
        params = tuple(sorted(dict(table.get("params", {})).items()))
        entries = [Rule(r["algorithm"], int(r.get("min_bytes", 0)),
                        None if r.get("max_bytes") is None else int(r["max_bytes"]),
                        tuple(sorted({**dict(params), **dict(r.get("params", {}))}.items())))
                   for r in table.get("rule", [])]
        if "algorithm" in table:
            entries.append(Rule(table["algorithm"], params=params))
        for rule in entries:
            get_algorithm(collective, rule.algorithm)
        rules[collective] = tuple(entries)
    return Tuning(rules, path)


@lru_cache(maxsize=8)
def _cached_tuning(path: str) -> Tuning:
    return load_tuning(path)


def clear_cache() -> None:
    """Forget cached tuning files (after the environment changed)."""
    _cached_tuning.cache_clear()


@dataclass(frozen=True)
class Choice:
    """The algorithm chosen for a call, its parameters, and why."""

    algorithm: Algorithm
    params: Mapping[str, Any]
    reason: str


def offered(collective: str, resources: frozenset[str] = frozenset()) -> list[Algorithm]:
    """Algorithms of ``collective`` a transport with ``resources`` can run."""
    return [a for a in algorithms(collective) if a.needs <= resources]


def select(
    spec: CallSpec,
    *,
    requested: str | None = None,
    comm_override: str | None = None,
    env_override: str | None = None,
    tuning_file: str | None = None,
    resources: frozenset[str] = frozenset(),
    model: CostModel | None = None,
    params: Mapping[str, Any] | None = None,
    rank: int | None = None,
) -> Choice:
    """Choose the algorithm for ``spec`` (see the module docstring for the precedence)."""
    params = dict(params or {})
    env_name = f"COLLOPS_{spec.collective.upper()}_ALGORITHM"
    for source, name in (("requested by the call", requested),
                         ("set on the communicator", comm_override),
                         (f"set by {env_name}", env_override)):
        if name:
            alg = get_algorithm(spec.collective, name, rank)
            if not alg.needs <= resources:
                raise ArgumentError(spec.collective, "algorithm", name,
                                    f"needs {', '.join(sorted(alg.needs))}, which this "
                                    "transport does not offer", rank)
            alg.check(spec, rank)
            return Choice(alg, alg.resolve(params, rank), source)
    agreed = rank_independent(spec)
    if tuning_file:
        rule = _cached_tuning(tuning_file).pick(spec.collective, agreed.message_bytes())
        if rule is not None:
            alg = get_algorithm(spec.collective, rule.algorithm, rank)
            if alg.eligible(spec) and alg.needs <= resources:
                return Choice(alg, alg.resolve({**dict(rule.params), **params}),
                              f"tuning file {tuning_file}")
    best = _cheapest(spec, agreed, resources, model or CostModel())
    return Choice(best, best.resolve(_known(best, params)), "lowest α-β cost estimate")


def _known(alg: Algorithm, params: Mapping[str, Any]) -> dict[str, Any]:
    names = {p.name for p in alg.params}
    return {k: v for k, v in params.items() if k in names}


def rank_independent(spec: CallSpec) -> CallSpec:
    """The part of ``spec`` every rank agrees on, which automatic choices must depend on alone.

    An alltoallv spec holds the calling rank's own counts; were the choice made from them,
    ranks could choose different algorithms. Its counts are replaced by their size alone.
    """
    if spec.collective != "alltoallv":
        return spec
    zeros = (0,) * spec.size
    return spec.with_(sendcounts=zeros, recvcounts=zeros, sdispls=zeros, rdispls=zeros)


def _cheapest(spec: CallSpec, agreed: CallSpec, resources: frozenset[str],
              model: CostModel) -> Algorithm:
    candidates = [a for a in offered(spec.collective, resources) if a.eligible(spec)]
    if not candidates:
        raise ArgumentError(spec.collective, "spec", spec, "no registered algorithm can take it")
    return min(candidates, key=lambda a: a.estimate(agreed, model))


def explain(
    spec: CallSpec,
    resources: frozenset[str] = frozenset(),
    model: CostModel | None = None,
    **overrides: Any,
) -> str:
    """The table behind a choice: each algorithm, its eligibility, cost estimate and the pick."""
    model = model or CostModel()
    choice = select(spec, resources=resources, model=model, **overrides)
    lines = [f"{spec.collective}: p={spec.size}, {spec.message_bytes()} bytes, dtype {spec.dtype}"
             + (f", op {spec.op.name}" if spec.op else ""),
             f"{'algorithm':<22} {'eligible':<40} {'est. time':>12}  chosen"]
    for alg in algorithms(spec.collective):
        why = alg.reasons_ineligible(spec)
        if not alg.needs <= resources:
            why = [f"needs {', '.join(sorted(alg.needs))}"] + why
        cost = alg.estimate(spec, model)
        mark = "  <-- " + choice.reason if alg is choice.algorithm else ""
        elig = "yes" if not why else "no: " + "; ".join(why)
        lines.append(f"{alg.name:<22} {elig[:40]:<40} {cost * 1e6:>10.2f}µs{mark}")
    return "\n".join(lines)
