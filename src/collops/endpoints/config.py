"""Geometries read from a TOML configuration file (seed 001: "reading the geometry from a
configuration"), with algorithm preferences per collective::

    [geometry]
    name = "solver"
    tasks = "0-3"            # a range "a-b", a list [0, 2, 3], or omitted for every task
    contexts = 2             # contexts per task: a count or a list of offsets
    # endpoints = [[0, 0], [0, 1], [1, 0]]   # or explicit (task, context) pairs

    [algorithms.allreduce]
    prefer = ["recursive_doubling", "ring"]  # first one valid for the call wins
    [[algorithms.allreduce.rule]]            # first matching rule wins, before `prefer`
    max_bytes = 4096
    algorithm = "recursive_doubling"

Rules also give their algorithm a message-size range in the geometry's algorithm lists.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..algorithms.registry import algorithms, get_algorithm
from ..errors import ArgumentError

_CALL = "load_geometry_config"


@dataclass(frozen=True)
class GeometryConfig:
    """A geometry's endpoints (``(task, context)`` pairs), name and preferences."""

    name: str
    endpoints: tuple[tuple[int, int], ...]
    preferences: dict[str, Any] = field(default_factory=dict)


def _tasks(value: Any, ntasks: int) -> list[int]:
    if value is None:
        return list(range(ntasks))
    if isinstance(value, str):
        lo, _, hi = value.partition("-")
        try:
            return list(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            raise ArgumentError(_CALL, "tasks", value, "expected 'a-b' or a list") from None
    return [int(t) for t in value]


def parse_geometry_config(data: dict[str, Any], ntasks: int) -> GeometryConfig:
    """A `GeometryConfig` from parsed TOML for a job of ``ntasks`` tasks."""
    geo = dict(data.get("geometry", {}))
    if "endpoints" in geo:
        pairs = [(int(t), int(c)) for t, c in geo["endpoints"]]
    else:
        contexts = geo.get("contexts", 1)
        offsets = range(int(contexts)) if isinstance(contexts, int) else [int(c) for c in
                                                                            contexts]
        pairs = [(t, c) for t in _tasks(geo.get("tasks"), ntasks) for c in offsets]
    bad = [t for t, _ in pairs if not 0 <= t < ntasks]
    if bad:
        raise ArgumentError(_CALL, "tasks", bad[0], f"must lie in [0, {ntasks})")
    preferences: dict[str, Any] = {}
    for collective, table in dict(data.get("algorithms", {})).items():
        algorithms(collective)  # validates the collective's name
        prefer = [str(n) for n in table.get("prefer", ())]
        rules = [dict(r) for r in table.get("rule", ())]
        for name in prefer + [str(r.get("algorithm")) for r in rules]:
            get_algorithm(collective, name)
        preferences[collective] = {"prefer": prefer, "rules": rules}
    return GeometryConfig(str(geo.get("name", "")), tuple(pairs), preferences)


def load_geometry_config(path: str | Path, ntasks: int) -> GeometryConfig:
    """Read a geometry configuration file (see the module docstring)."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ArgumentError(_CALL, "path", str(path), f"cannot read: {exc}") from None
    return parse_geometry_config(data, ntasks)
