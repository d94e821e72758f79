"""Topologies from spec strings, dicts and files.

A spec is ``kind:arguments``::

    ring:N                 N nodes on a bidirectional ring
    mesh:AxB[xC…]          grid without wrap-around
    torus:AxB[xC…]         grid with wrap-around in every dimension
    hypercube:D            2^D nodes
    tree:K:N               k-ary tree of switches over N compute leaves
    combining-tree:K:N     the same tree, whose switches reduce in the network
    fattree:K              k-ary fat-tree (k pods, k³/4 hosts; K even)
    fattree:L;D,..;U,..;C,..  SimGrid's fat tree: L levels, children, parents, cables per level
    switch:N               N hosts on one switch (a star)

A file (JSON, or TOML when its name ends in ``.toml``) holds ``spec`` and any `NetworkParams`
field, flat or under a ``params`` table.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ArgumentError
from .base import NetworkParams, Topology
from .grid import Hypercube, Mesh, Ring, Torus
from .pgft import GeneralFatTree
from .tree import CombiningTree, FatTree, KaryTree, Switch

_CALL = "parse_topology"

#: the largest network a spec may describe (nodes), to catch typos before allocating
MAX_NODES = 1 << 22


def _integer(spec: str, text: str, what: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ArgumentError(_CALL, "spec", spec, f"{what} must be an integer, not {text!r}") \
            from None
    if value < minimum:
        raise ArgumentError(_CALL, "spec", spec, f"{what} must be >= {minimum}")
    return value


def _dims(spec: str, text: str) -> tuple[int, ...]:
    parts = text.lower().split("x")
    dims = tuple(_integer(spec, p, "every dimension", 1) for p in parts)
    return dims


def _args(spec: str, text: str, count: int, usage: str) -> list[str]:
    parts = text.split(":") if text else []
    if len(parts) != count:
        raise ArgumentError(_CALL, "spec", spec, f"expected {usage}")
    return parts


def _grid(cls: type[Torus] | type[Mesh]) -> Callable[[str, str, NetworkParams], Topology]:
    def make(spec: str, text: str, params: NetworkParams) -> Topology:
        (dims_text,) = _args(spec, text, 1, f"{cls.kind}:AxB[xC…]")
        return cls(_dims(spec, dims_text), params)
    return make


def _ring(spec: str, text: str, params: NetworkParams) -> Topology:
    (n,) = _args(spec, text, 1, "ring:N")
    return Ring(_integer(spec, n, "N", 1), params)


def _hypercube(spec: str, text: str, params: NetworkParams) -> Topology:
    (d,) = _args(spec, text, 1, "hypercube:D")
    return Hypercube(_integer(spec, d, "D", 0), params)


def _tree(cls: type[KaryTree]) -> Callable[[str, str, NetworkParams], Topology]:
    def make(spec: str, text: str, params: NetworkParams) -> Topology:
        k, n = _args(spec, text, 2, f"{cls.kind}:K:N")
        return cls(_integer(spec, k, "K", 2), _integer(spec, n, "N", 1), params)
    return make


def _numbers(spec: str, text: str, what: str) -> tuple[int, ...]:
    return tuple(_integer(spec, part, what, 1) for part in text.split(","))


def _fattree(spec: str, text: str, params: NetworkParams) -> Topology:
    if ";" in text:
        parts = text.split(";")
        if len(parts) != 4:
            raise ArgumentError(_CALL, "spec", spec, "expected fattree:LEVELS;DOWN;UP;LINKS")
        levels = _integer(spec, parts[0], "LEVELS", 1)
        down, up, links = (_numbers(spec, part, name)
                           for part, name in zip(parts[1:], ("DOWN", "UP", "LINKS"),
                                                 strict=True))
        if not len(down) == len(up) == len(links) == levels:
            raise ArgumentError(_CALL, "spec", spec,
                                f"DOWN, UP and LINKS need {levels} numbers each (LEVELS)")
        return GeneralFatTree(down, up, links, params)
    (k,) = _args(spec, text, 1, "fattree:K")
    value = _integer(spec, k, "K", 2)
    if value % 2:
        raise ArgumentError(_CALL, "spec", spec, "a fat-tree's K must be even")
    return FatTree(value, params)


def _switch(spec: str, text: str, params: NetworkParams) -> Topology:
    (n,) = _args(spec, text, 1, "switch:N")
    return Switch(_integer(spec, n, "N", 1), params)


KINDS: dict[str, Callable[[str, str, NetworkParams], Topology]] = {
    "ring": _ring,
    "mesh": _grid(Mesh),
    "torus": _grid(Torus),
    "hypercube": _hypercube,
    "tree": _tree(KaryTree),
    "combining-tree": _tree(CombiningTree),
    "fattree": _fattree,
    "switch": _switch,
}


def _estimated_nodes(kind: str, text: str) -> int:
    """A cheap size estimate used to refuse absurd specs before building them."""
    try:
        if kind in ("mesh", "torus"):
            total = 1
            for p in text.lower().split("x"):
                total *= max(1, int(p))
            return total
        if kind == "hypercube":
            return 1 << min(64, int(text))
        if kind == "fattree" and ";" in text:
            down = [int(x) for x in text.split(";")[1].split(",")]
            return math.prod(down) * (len(down) + 1)
        if kind == "fattree":
            k = int(text)
            return k ** 3 // 4 + 5 * k * k // 4
        if kind in ("tree", "combining-tree"):
            return 2 * int(text.split(":")[-1])
        return int(text)
    except ValueError:
        return 0


def parse_topology(spec: str, params: NetworkParams | None = None,
                   **overrides: Any) -> Topology:
    """Build a topology from a spec string such as ``torus:8x8x8``; overrides set parameters."""
    if isinstance(spec, Topology):
        spec = spec.spec
    text = str(spec).strip()
    kind, _, rest = text.partition(":")
    kind = kind.lower()
    if kind not in KINDS:
        raise ArgumentError(_CALL, "spec", spec,
                            f"unknown network kind {kind!r} (one of {', '.join(KINDS)})")
    unknown = set(overrides) - set(NetworkParams.names())
    if unknown:
        raise ArgumentError(_CALL, sorted(unknown)[0], overrides[sorted(unknown)[0]],
                            f"not a network parameter ({', '.join(NetworkParams.names())})")
    base = params if params is not None else NetworkParams()
    if overrides:
        base = replace(base, **overrides)
    if _estimated_nodes(kind, rest) > MAX_NODES:
        raise ArgumentError(_CALL, "spec", spec, f"more than {MAX_NODES} nodes")
    return KINDS[kind](text, rest, base)


def topology_from_dict(d: Mapping[str, Any]) -> Topology:
    """Build a topology from ``{"spec": ..., <param>: ...}`` (params flat or under "params")."""
    if "spec" not in d:
        raise ArgumentError("topology_from_dict", "spec", None, "missing")
    values: dict[str, Any] = {k: v for k, v in d.items() if k not in ("spec", "params")}
    nested = d.get("params")
    if isinstance(nested, Mapping):
        values.update(nested)
    return parse_topology(str(d["spec"]), **values)


def load_topology(path: str | Path) -> Topology:
    """Read a topology from a JSON or TOML file (``spec`` plus parameters)."""
    path = Path(path)
    text = path.read_text()
    if path.suffix.lower() == ".toml":
        data: Any = tomllib.loads(text)
    else:
        data = json.loads(text)
    if not isinstance(data, Mapping):
        raise ArgumentError("load_topology", "path", str(path), "must hold a table/object")
    return topology_from_dict(data)


def topology_from_text(text: str, net: Mapping[str, Any] | None = None) -> Topology:
    """A topology from a spec string (``torus:8x8x8``) or a JSON/TOML file naming one, with
    the network parameters ``net`` applied over the file's or the defaults."""
    path = Path(text)
    if text.lower().endswith((".json", ".toml")) or path.is_file():
        if not path.is_file():
            raise ArgumentError("topology", "path", text, "no such file")
        base = load_topology(path)
        return parse_topology(base.spec, base.params, **dict(net or {}))
    return parse_topology(text, None, **dict(net or {}))


def save_topology(topology: Topology, path: str | Path) -> None:
    """Write a topology to a JSON file that `load_topology` reads back."""
    Path(path).write_text(json.dumps(topology.to_dict(), indent=2) + "\n")
