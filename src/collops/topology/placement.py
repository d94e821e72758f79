"""Placing ranks on compute nodes: row-major (default), column-major, seeded random, or a file."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ..errors import ArgumentError
from .base import Topology

_CALL = "place"


def place(topology: Topology, nranks: int, mode: str | Path | Sequence[int] = "row-major",
          seed: int = 0, excluded: Iterable[int] = frozenset()) -> np.ndarray:
    """Node id of every rank (int64 array of length ``nranks``), never on an excluded node.

    ``row-major`` fills the compute nodes in canonical order (on a grid the last dimension
    varies fastest); ``column-major`` fills a grid with dimension 0 fastest, as SimGrid numbers
    a torus's hosts; ``random`` takes a seeded random sample of them; any other string is a
    file of node ids (JSON list or whitespace/commas); a sequence of ints gives the node of
    every rank outright.
    """
    nranks = int(nranks)
    banned = {int(x) for x in excluded}
    available = np.array([n for n in topology.compute_nodes.tolist() if n not in banned],
                         dtype=np.int64)
    if nranks < 0 or nranks > len(available):
        raise ArgumentError(_CALL, "nranks", nranks,
                            f"{topology} has {len(available)} usable compute nodes")
    if mode == "row-major":
        return available[:nranks].copy()
    if mode == "column-major":
        return column_major(topology, available)[:nranks]
    if mode == "random":
        rng = np.random.default_rng(seed)
        return rng.permutation(available)[:nranks]
    nodes = _read_nodes(Path(mode)) if isinstance(mode, (str, Path)) else \
        np.asarray([int(n) for n in mode], dtype=np.int64)
    if len(nodes) != nranks:
        raise ArgumentError(_CALL, "mode", str(mode),
                            f"lists {len(nodes)} nodes for {nranks} ranks")
    if len(set(nodes.tolist())) != len(nodes):
        raise ArgumentError(_CALL, "mode", str(mode), "lists a node twice")
    usable = set(available.tolist())
    bad = [n for n in nodes.tolist() if n not in usable]
    if bad:
        raise ArgumentError(_CALL, "mode", str(mode),
                            f"node {bad[0]} is not a usable compute node of {topology}")
    return nodes


def column_major(topology: Topology, nodes: np.ndarray) -> np.ndarray:
    """``nodes`` of a grid ordered with dimension 0 varying fastest (SimGrid's numbering)."""
    dims = getattr(topology, "dims", None)
    if dims is None:
        raise ArgumentError(_CALL, "mode", "column-major",
                            f"{topology} is not a grid (torus, mesh, ring, hypercube)")
    coords = topology.coordinates(nodes)  # type: ignore[attr-defined]
    order = np.lexsort(coords.T) if len(nodes) else np.zeros(0, dtype=np.int64)  # dim 0 minor
    return nodes[order]


def _read_nodes(path: Path) -> np.ndarray:
    if not path.exists():
        raise ArgumentError(_CALL, "mode", str(path),
                            "not 'row-major', 'random' or an existing placement file")
    text = path.read_text().strip()
    try:
        values = json.loads(text) if text.startswith("[") else \
            [int(tok) for tok in text.replace(",", " ").split()]
        return np.array([int(v) for v in values], dtype=np.int64)
    except (ValueError, TypeError) as exc:
        raise ArgumentError(_CALL, "mode", str(path), f"unreadable: {exc}") from None
