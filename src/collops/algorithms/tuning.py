"""Selection tables: which algorithm a call takes and which protocol settings are in force,
read from TOML (the built-in ``defaults.toml`` and a user's ``COLLOPS_TUNING_FILE``).

A table names collectives and protocol components::

    [allreduce]
    algorithm = "ring"                 # default for this collective (rule of every size)
    [[allreduce.rule]]                 # first matching rule whose algorithm can run wins
    max_bytes = 4096                   # inclusive bounds; min_bytes too
    min_ranks = 2                      # rank-count bounds, inclusive; max_ranks too
    transport = "shm"                  # only on this transport
    per = "block"                      # bytes of one block (count × itemsize), not the message
    algorithm = "recursive_doubling"   # or: exclude = ["shm_stream"] (never by cost here)
    source = "docs/bench/n2-large.json"
    [alltoall.params]                  # parameters given to the chosen algorithm
    chunk = 2048

    [[protocols.shm.single_copy_min]]  # a protocol setting: rules with a ``value``, first
    value = 2097152                    # match wins (same bounds, and ``collective``); a
    min_ranks = 4                      # job-wide one (read as a job starts) takes rank
                                       # bounds alone
    source = "docs/performance.md#huge-pages-and-the-kernels-single-copy"

A transport matches ``transport = "t"`` when one of the communicator's resources is named
``t`` or starts with ``t_`` (``shm_direct``, ``mpi``). Malformed tables are an
`ArgumentError` naming the file and the table and key (or the TOML line).
"""

from __future__ import annotations

import tomllib
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources as package_files
from typing import Any

from ..errors import ArgumentError, TuningWarning
from .registry import algorithms, get_algorithm
from .spec import CallSpec

#: the built-in table, shipped with the package
BUILTIN = "defaults.toml"
BUILTIN_PATH = f"collops/algorithms/{BUILTIN}"
_BOUNDS = ("min_bytes", "max_bytes", "min_ranks", "max_ranks", "transport", "per", "source")
_RULE_KEYS = frozenset(_BOUNDS + ("algorithm", "exclude", "params", "evidence"))
#: the table `collops tune` writes about where and how a file was measured
MEASURED = "measured"
_PROTOCOL_KEYS = frozenset(_BOUNDS + ("value", "collective", "evidence"))
_PER = ("message", "block")


@dataclass(frozen=True)
class Bounds:
    """Where a rule applies: message or block bytes, rank count, transport."""

    min_bytes: int = 0
    max_bytes: int | None = None
    min_ranks: int = 1
    max_ranks: int | None = None
    transport: str | None = None
    per: str = "message"

    def covers(self, nbytes: int, ranks: int | None = None,
               offered: Iterable[str] | None = None) -> bool:
        """Whether a call of ``nbytes`` (as `per` counts) on ``ranks`` ranks with the
        resources ``offered`` falls within the bounds (``None``: not checked)."""
        if nbytes < self.min_bytes or (self.max_bytes is not None and nbytes > self.max_bytes):
            return False
        if ranks is not None and (ranks < self.min_ranks
                                  or (self.max_ranks is not None and ranks > self.max_ranks)):
            return False
        return offered is None or self.transport is None or any(
            r == self.transport or r.startswith(self.transport + "_") for r in offered)

    def nbytes_of(self, spec: CallSpec) -> int:
        """The bytes of ``spec`` these bounds count."""
        return spec.count * spec.itemsize if self.per == "block" else spec.message_bytes()

    def describe(self) -> str:
        """The bounds in words, e.g. ``512 KiB-4 MiB per block, 2 ranks, on shm``."""
        top = "" if self.max_bytes is None else _size(self.max_bytes)
        words = [f"{_size(self.min_bytes)}-{top or '∞'} per {self.per}"]
        if self.min_ranks > 1 or self.max_ranks is not None:
            words.append(f"{self.min_ranks}-{self.max_ranks or '∞'} ranks")
        if self.transport:
            words.append(f"on {self.transport}")
        return ", ".join(words)


@dataclass(frozen=True)
class Rule:
    """One rule: an algorithm (or algorithms the cost model must not take) within bounds."""

    algorithm: str | None
    bounds: Bounds = Bounds()
    exclude: tuple[str, ...] = ()
    params: tuple[tuple[str, Any], ...] = ()
    source: str = ""
    where: str = ""

    def applies(self, nbytes: int, ranks: int | None = None,
                offered: Iterable[str] | None = None) -> bool:
        """Whether the rule covers a message of ``nbytes`` (see `Bounds.covers`)."""
        return self.bounds.covers(nbytes, ranks, offered)

    def covers(self, spec: CallSpec, offered: Iterable[str]) -> bool:
        """Whether the rule covers the call ``spec`` on a transport offering ``offered``."""
        return self.bounds.covers(self.bounds.nbytes_of(spec), spec.size, offered)

    def describe(self) -> str:
        """The rule in one line: where it is, what it says, its range and its source."""
        what = self.algorithm or "not by cost: " + ", ".join(self.exclude)
        return f"{self.where}: {what} for {self.bounds.describe()} (source: {self.source or '-'})"


@dataclass(frozen=True)
class Setting:
    """One protocol-setting rule: a value within bounds, for one collective or all."""

    value: Any
    bounds: Bounds = Bounds()
    collective: str | None = None
    source: str = ""
    where: str = ""


@dataclass(frozen=True)
class Tuning:
    """Rules per collective and protocol settings per component, read from one file."""

    rules: Mapping[str, tuple[Rule, ...]] = field(default_factory=dict)
    protocols: Mapping[str, Mapping[str, tuple[Setting, ...]]] = field(default_factory=dict)
    source: str = ""
    #: where and how the table was measured (``[measured]``, written by `collops tune`)
    measured: Mapping[str, Any] = field(default_factory=dict)

    def pick(self, collective: str, nbytes: int) -> Rule | None:
        """The first algorithm rule for ``collective`` covering ``nbytes`` (any ranks)."""
        for rule in self.rules.get(collective, ()):
            if rule.algorithm and rule.applies(nbytes):
                return rule
        return None

    def setting(self, component: str, name: str, spec: CallSpec | None = None,
                ranks: int | None = None) -> Setting:
        """The first rule of protocol setting ``component.name`` that covers the call
        ``spec`` (``None``: the first rule for every call of a job, bounded at most by the
        job's ``ranks``)."""
        for s in self.protocols.get(component, {}).get(name, ()):
            if spec is None:
                if s.collective is None and _job_wide(s.bounds, ranks):
                    return s
            elif s.collective in (None, spec.collective) and s.bounds.covers(
                    s.bounds.nbytes_of(spec), spec.size):
                return s
        raise KeyError(f"{self.source}: no rule of [protocols.{component}.{name}] covers "
                       f"{spec or 'every call'}")


def _job_wide(bounds: Bounds, ranks: int | None) -> bool:
    """Whether a setting rule bounded by ``bounds`` holds for every call of a job of
    ``ranks`` ranks (``None``: of any size): it bounds the rank count at most."""
    unbounded = Bounds(min_ranks=bounds.min_ranks, max_ranks=bounds.max_ranks)
    return bounds == unbounded and (bounds.covers(0, ranks) if ranks is not None
                                    else bounds == Bounds())


def load_tuning(path: str) -> Tuning:
    """Read a TOML selection table (see the module docstring for its shape)."""
    return parse_tuning(_read(path), path)


def _read(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise _error(path, f"cannot read it: {exc}") from exc


@lru_cache(maxsize=1)
def _builtin_data() -> dict[str, Any]:
    text = package_files.files(__package__).joinpath(BUILTIN).read_text("utf-8")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _error(BUILTIN_PATH, f"cannot read it: {exc}") from exc


@lru_cache(maxsize=1)
def builtin() -> Tuning:
    """The built-in selection table (``collops/algorithms/defaults.toml``)."""
    return parse_tuning(_builtin_data(), BUILTIN_PATH)


@lru_cache(maxsize=1)
def builtin_protocols() -> Tuning:
    """The built-in table's protocol settings alone (readable before every algorithm is
    registered: the transports read them as they load)."""
    return parse_tuning(_builtin_data(), BUILTIN_PATH, rules=False)


def setting(component: str, name: str, spec: CallSpec | None = None,
            tuning_file: str | None = None, ranks: int | None = None) -> Setting:
    """The rule of protocol setting ``component.name`` in force for ``spec`` (``None``: for a
    whole job of ``ranks`` ranks): the user's table's (``tuning_file``) if it has one
    covering the call, else the built-in one's."""
    if tuning_file:
        user = _user_protocols(tuning_file)
        try:
            return user.setting(component, name, spec, ranks)
        except KeyError:
            pass
    return builtin_protocols().setting(component, name, spec, ranks)


def forget_user_tables() -> None:
    """Forget the users' tables read so far (after the environment changed)."""
    _user_protocols.cache_clear()


@lru_cache(maxsize=4)
def _user_protocols(path: str) -> Tuning:
    return parse_tuning(_read(path), path, rules=False)


def parse_tuning(data: Mapping[str, Any], path: str, rules: bool = True) -> Tuning:
    """Check and convert a parsed TOML table (its protocol settings alone unless ``rules``);
    errors name ``path``, the table and the key."""
    found: dict[str, tuple[Rule, ...]] = {}
    protocols: dict[str, dict[str, tuple[Setting, ...]]] = {}
    measured: Mapping[str, Any] = {}
    for name, table in data.items():
        if name == MEASURED:
            measured = _table(path, MEASURED, table)
            continue
        if name == "protocols":
            for component, params in _table(path, "protocols", table).items():
                where = f"protocols.{component}"
                protocols[component] = {
                    key: tuple(_setting(path, f"{where}.{key}", i, entry)
                               for i, entry in enumerate(_array(path, f"{where}.{key}", value)))
                    for key, value in _table(path, where, params).items()}
            continue
        if not rules:
            continue
        try:
            algorithms(name)
        except ArgumentError:
            raise _error(path, f"[{name}]: not a collective (nor 'protocols')") from None
        found[name] = _rules(path, name, _table(path, name, table), path != BUILTIN_PATH)
    return Tuning(found, protocols, path, measured)


def _rules(path: str, collective: str, table: Mapping[str, Any],
           users: bool = False) -> tuple[Rule, ...]:
    unknown = set(table) - {"algorithm", "rule", "params", "source"}
    if unknown:
        raise _error(path, f"[{collective}]: unknown key {sorted(unknown)[0]!r}")
    params = _table(path, f"{collective}.params", table.get("params", {}))
    entries = [_rule(path, collective, i, r, params, users)
               for i, r in enumerate(_array(path, f"{collective}.rule", table.get("rule", [])))]
    if "algorithm" in table:
        entries.append(_rule(path, collective, None, {k: table[k] for k in ("algorithm", "source")
                                                      if k in table}, params, users))
    return tuple(e for e in entries if e is not None)


def _rule(path: str, collective: str, index: int | None, raw: Any,
          params: Mapping[str, Any], users: bool = False) -> Rule | None:
    """One rule; in a user's table, a rule naming an algorithm that no longer exists is
    dropped with a `TuningWarning` (the defaults decide there), elsewhere it is an error."""
    where = f"[{collective}]" if index is None else f"[[{collective}.rule]] #{index + 1}"
    raw = _table(path, where, raw)
    _known_keys(path, where, raw, _RULE_KEYS)
    algorithm, exclude = raw.get("algorithm"), raw.get("exclude", [])
    if (algorithm is None) == (not exclude):
        raise _error(path, f"{where}: give 'algorithm' or 'exclude' (one of them)")
    for name in [algorithm] if algorithm else exclude:
        if not isinstance(name, str):
            raise _error(path, f"{where}: algorithm names are strings, not {name!r}")
        try:
            get_algorithm(collective, name)
        except ArgumentError:
            if users and algorithm:
                warnings.warn(f"selection table {path}{_line(path, where)}: {where}: "
                              f"{collective} has no algorithm {name!r} (any more); the rule "
                              "is ignored and the defaults decide there", TuningWarning,
                              stacklevel=2)
                return None
            raise _error(path, f"{where}: {collective} has no algorithm {name!r}") from None
    merged = {**params, **_table(path, f"{where}.params", raw.get("params", {}))}
    return Rule(algorithm, _bounds(path, where, raw), tuple(exclude),
                tuple(sorted(merged.items())), str(raw.get("source", "")), f"{path} {where}")


def _setting(path: str, where: str, index: int, raw: Any) -> Setting:
    where = f"[[{where}]] #{index + 1}"
    raw = _table(path, where, raw)
    _known_keys(path, where, raw, _PROTOCOL_KEYS)
    if "value" not in raw:
        raise _error(path, f"{where}: missing key 'value'")
    collective = raw.get("collective")
    if collective is not None:
        try:
            algorithms(collective)
        except ArgumentError:
            raise _error(path, f"{where}: collective {collective!r} is not one") from None
    return Setting(raw["value"], _bounds(path, where, raw), collective,
                   str(raw.get("source", "")), f"{path} {where}")


def _bounds(path: str, where: str, raw: Mapping[str, Any]) -> Bounds:
    def number(key: str, default: int | None) -> int | None:
        v = raw.get(key, default)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise _error(path, f"{where}: {key} must be a non-negative integer, not {v!r}")
        return v

    per = raw.get("per", "message")
    if per not in _PER:
        raise _error(path, f"{where}: per must be one of {', '.join(_PER)}, not {per!r}")
    transport = raw.get("transport")
    if transport is not None and not isinstance(transport, str):
        raise _error(path, f"{where}: transport must be a string, not {transport!r}")
    return Bounds(number("min_bytes", 0) or 0, number("max_bytes", None),
                  number("min_ranks", 1) or 1, number("max_ranks", None), transport, per)


def _known_keys(path: str, where: str, raw: Mapping[str, Any], known: frozenset[str]) -> None:
    unknown = set(raw) - known
    if unknown:
        raise _error(path, f"{where}: unknown key {sorted(unknown)[0]!r}")


def _table(path: str, where: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _error(path, f"[{where}] must be a table, not {value!r}")
    return value


def _array(path: str, where: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise _error(path, f"{where} must be an array of tables ([[{where}]]), not {value!r}")
    return value


def _error(path: str, reason: str) -> ArgumentError:
    where = reason.split(":", 1)[0] if reason.startswith("[") else ""
    return ArgumentError("load_tuning", "path", path,
                         f"selection table {path}{_line(path, where)}: {reason}")


def _line(path: str, where: str) -> str:
    """``, line N`` of the table header ``where`` names (``[[allreduce.rule]] #2``,
    ``[allreduce]``) in the file ``path``, or nothing when it cannot be found."""
    if not where or path == BUILTIN_PATH:
        return ""
    head, _, number = where.partition(" #")
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    wanted = int(number) if number.isdigit() else 1
    seen = 0
    for i, line in enumerate(lines, 1):
        if line.split("#", 1)[0].strip() == head:
            seen += 1
            if seen == wanted:
                return f", line {i}"
    return ""


def _size(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"
