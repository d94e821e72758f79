"""Selection: which algorithm runs a call, as data plus a tiny engine.

Order of precedence (first that applies wins):

1. the call's ``algorithm=`` argument;
2. the communicator's override (`Comm.set_algorithm`);
3. the environment, ``COLLOPS_<COLLECTIVE>_ALGORITHM=name``;
4. the user's selection table (TOML, ``COLLOPS_TUNING_FILE`` or `load_tuning`);
5. the built-in selection table, ``collops/algorithms/defaults.toml``;
6. automatic: among eligible algorithms the transport offers, and that no table rule
   covering the call excludes, the one with the lowest cost estimate (ties go to the
   earlier registered): α-β-γ, or — where the network is known (`collops sim`, or a real
   run whose network the user declared with ``COLLOPS_TOPOLOGY``) — the time on that
   network, contention included, from a `NetworkTerm` (`collops.sim.network_cost`). On a
   network only the algorithms it can time compete (a transport's native collectives,
   which it cannot, are chosen there by the table's rules alone).

An explicit choice (1–3) that cannot take the call is an error naming the restriction; a
table rule that cannot is skipped (the next rule, then the cost model, decides), as UCC
does. The tables' format is described in `collops.algorithms.tuning`; each built-in rule
names its ``source``, the benchmark record or finding behind it. `explain` prints the table
behind a choice: the rule or the costs that decided and the protocol settings in force.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from ..errors import ArgumentError
from .registry import Algorithm, CostModel, algorithms, get_algorithm
from .spec import CallSpec
from .tuning import Rule, Tuning, builtin, forget_user_tables, load_tuning, setting

#: the table's types and reader, where users of this module found them before
__all__ = ["Choice", "NetworkTerm", "Rule", "Tuning", "call_settings", "clear_cache",
           "explain", "load_tuning", "offered", "rank_independent",
           "rules_for", "select"]


@lru_cache(maxsize=8)
def _cached_tuning(path: str) -> Tuning:
    return load_tuning(path)


def clear_cache() -> None:
    """Forget cached tuning files (after the environment changed)."""
    _cached_tuning.cache_clear()
    forget_user_tables()


def rules_for(collective: str, tuning_file: str | None = None) -> tuple[Rule, ...]:
    """The rules tried for ``collective``: the user's file's first, then the built-in ones."""
    user = _cached_tuning(tuning_file).rules.get(collective, ()) if tuning_file else ()
    return tuple(user) + builtin().rules.get(collective, ())


class NetworkTerm(Protocol):
    """The time of a call on a known network, contention included (`collops.sim.network_cost`
    implements it; selection only asks)."""

    def time(self, algorithm: Algorithm, spec: CallSpec) -> float | None:
        """Seconds ``algorithm`` takes for ``spec`` on the network (None: it cannot run there)."""

    def describe(self) -> str:
        """The network and model in a few words, for `explain`."""


@dataclass(frozen=True)
class Choice:
    """The algorithm chosen for a call, its parameters, and why."""

    algorithm: Algorithm
    params: Mapping[str, Any]
    reason: str
    #: the table rule that decided, if one did
    rule: Rule | None = None
    #: the rules that kept algorithms from the cost model's argmin, when it decided
    excluded: tuple[Rule, ...] = ()


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
    network: NetworkTerm | None = None,
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
    excluded: list[Rule] = []
    for rule in rules_for(spec.collective, tuning_file):
        if not rule.covers(agreed, resources):
            continue
        if rule.algorithm is None:
            excluded.append(rule)
            continue
        alg = get_algorithm(spec.collective, rule.algorithm, rank)
        if alg.eligible(spec) and alg.needs <= resources:
            return Choice(alg, alg.resolve({**dict(rule.params), **params}),
                          f"rule {rule.describe()}", rule)
    best = _cheapest(spec, agreed, resources, model or CostModel(),
                     {name for rule in excluded for name in rule.exclude}, network)
    reason = ("lowest α-β cost estimate" if network is None
              else f"lowest time on the network, {network.describe()}")
    return Choice(best, best.resolve(_known(best, params)), reason, excluded=tuple(excluded))


def _known(alg: Algorithm, params: Mapping[str, Any]) -> dict[str, Any]:
    names = {p.name for p in alg.params}
    return {k: v for k, v in params.items() if k in names}


def rank_independent(spec: CallSpec) -> CallSpec:
    """The part of ``spec`` every rank agrees on, which automatic choices must depend on alone.

    An alltoallv spec holds the calling rank's own counts; were the choice made from them,
    ranks could choose different algorithms. Its counts are replaced by their size alone. So
    are those of a gatherv spec that holds only what its rank knows (no ``counts``: its own
    block, and at the root what it was given; see `collops.shm.direct_gatherv`).
    """
    if spec.collective == "gatherv" and not spec.counts:
        zeros = (0,) * spec.size
        return spec.with_(count=0, counts=zeros, displs=zeros, sendcounts=(), recvcounts=(),
                          sdispls=(), rdispls=())
    if spec.collective != "alltoallv":
        return spec
    zeros = (0,) * spec.size
    return spec.with_(sendcounts=zeros, recvcounts=zeros, sdispls=zeros, rdispls=zeros)


def _cheapest(spec: CallSpec, agreed: CallSpec, resources: frozenset[str],
              model: CostModel, excluded: set[str] | frozenset[str] = frozenset(),
              network: NetworkTerm | None = None) -> Algorithm:
    eligible = [a for a in offered(spec.collective, resources) if a.eligible(spec)]
    if not eligible:
        raise ArgumentError(spec.collective, "spec", spec, "no registered algorithm can take it")
    candidates = [a for a in eligible if a.name not in excluded] or eligible
    if network is not None:  # times on the network and α-β guesses are not comparable
        timed = {a.name: t for a in candidates if (t := network.time(a, agreed)) is not None}
        if timed:
            return min((a for a in candidates if a.name in timed), key=lambda a: timed[a.name])
    return min(candidates, key=lambda a: a.estimate(agreed, model))


def explain(
    spec: CallSpec,
    resources: frozenset[str] = frozenset(),
    model: CostModel | None = None,
    protocols: Mapping[str, tuple[Any, str]] | None = None,
    network: NetworkTerm | None = None,
    **overrides: Any,
) -> str:
    """The table behind a choice: each algorithm, its eligibility, cost estimate and the pick,
    then the rule or costs that decided and the protocol settings in force (``protocols``:
    the transport's, name to value and where it comes from). With a ``network``, a column
    gives each eligible algorithm's time on it, contention included."""
    model = model or CostModel()
    choice = select(spec, resources=resources, model=model, network=network, **overrides)
    excluded = {name for rule in choice.excluded for name in rule.exclude}
    lines = [f"{spec.collective}: p={spec.size}, {spec.message_bytes()} bytes, dtype {spec.dtype}"
             + (f", op {spec.op.name}" if spec.op else ""),
             f"{'algorithm':<22} {'eligible':<40} {'est. time':>12}"
             + (f" {'on network':>12}" if network else "") + "  chosen"]
    if network is not None:
        lines.insert(1, f"network: {network.describe()}")
    for alg in algorithms(spec.collective):
        why = alg.reasons_ineligible(spec)
        if not alg.needs <= resources:
            why = [f"needs {', '.join(sorted(alg.needs))}"] + why
        elif alg.name in excluded and not why:
            why = ["excluded by a rule"]
        cost = alg.estimate(spec, model)
        mark = "  <-- chosen" if alg is choice.algorithm else ""
        elig = "yes" if not why else "no: " + "; ".join(why)
        column = ""
        if network is not None:
            on_network = network.time(alg, rank_independent(spec)) if not why else None
            column = " " + (f"{on_network * 1e6:>10.2f}µs" if on_network is not None
                            else f"{'-':>12}")
        lines.append(f"{alg.name:<22} {elig[:40]:<40} {cost * 1e6:>10.2f}µs{column}{mark}")
    lines.append(f"decided by: {choice.reason}")
    if overrides.get("tuning_file"):
        lines.append(provenance(overrides["tuning_file"], spec.size))
    lines += [f"  excluded from the cost model by: {rule.describe()}" for rule in choice.excluded]
    settings = {f"{choice.algorithm.name}.{name}": (value, where) for name, (value, where)
                in call_settings(choice.algorithm.name, rank_independent(spec),
                                 overrides.get("tuning_file")).items()}
    settings.update(protocols or {})
    if settings:
        lines.append("protocol settings in force:")
        lines += [f"  {name} = {value!r}  ({where})" for name, (value, where) in settings.items()]
    return "\n".join(lines)


def provenance(tuning_file: str, ranks: int) -> str:
    """Which tuning file is in force and where it was measured — "measured elsewhere" when
    its host, CPU or rank counts are not this call's."""
    measured = _cached_tuning(tuning_file).measured
    if not measured:
        return f"tuning file in force: {tuning_file} (no [measured] table: written by hand)"
    import socket
    said = (f"tuning file in force: {tuning_file}, measured on {measured.get('host', '?')} "
            f"({measured.get('cpu', '?')}), ranks {measured.get('ranks', '?')}, "
            f"{measured.get('transport', '?')}, {measured.get('date', '?')}")
    elsewhere = []
    if measured.get("host") not in (None, socket.gethostname()):
        elsewhere.append(f"this host is {socket.gethostname()}")
    counts = measured.get("ranks")
    if isinstance(counts, list) and ranks not in counts:
        elsewhere.append(f"this call has {ranks} ranks")
    if elsewhere:
        said += " — measured elsewhere: " + ", ".join(elsewhere)
    return said


def call_settings(component: str, spec: CallSpec, tuning_file: str | None = None
                  ) -> dict[str, tuple[Any, str]]:
    """The protocol settings of ``component`` (an algorithm's name) for ``spec``: name to
    value and the rule that set it."""
    found = {}
    for name in builtin().protocols.get(component, {}):
        s = setting(component, name, spec, tuning_file)
        found[name] = (s.value, f"{s.where}, source {s.source or '-'}")
    return found
