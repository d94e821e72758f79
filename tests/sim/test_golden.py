"""The documented examples still print what docs/simulation.md says they print.

Every command of ``examples/sim/make_figures.py`` (``GOLDEN``) is re-run in-process through
``collops.cli.main`` and its JSON records are compared with the saved ``examples/sim/*.json``:
strings and integers exactly, floats to a relative 1e-9. The page must show each command.
A few claims the page makes are checked here too, on the saved records.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from collops.cli import main
from collops.sim import simulate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "sim"
DOC = ROOT / "docs" / "simulation.md"
REL = 1e-9


def _examples() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_figures", EXAMPLES / "make_figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FIGURES = _examples()


def _same(saved: Any, fresh: Any, where: str) -> None:
    if isinstance(saved, float) or isinstance(fresh, float):
        assert isinstance(fresh, int | float) and isinstance(saved, int | float), where
        assert math.isclose(saved, fresh, rel_tol=REL, abs_tol=1e-300), \
            f"{where}: saved {saved!r}, now {fresh!r}"
    elif isinstance(saved, dict):
        assert isinstance(fresh, dict) and list(saved) == list(fresh), where
        for key in saved:
            _same(saved[key], fresh[key], f"{where}.{key}")
    elif isinstance(saved, list):
        assert isinstance(fresh, list) and len(saved) == len(fresh), where
        for i, (a, b) in enumerate(zip(saved, fresh, strict=True)):
            _same(a, b, f"{where}[{i}]")
    else:
        assert saved == fresh, f"{where}: saved {saved!r}, now {fresh!r}"


def _saved(name: str) -> list[dict[str, Any]]:
    return json.loads((EXAMPLES / f"{name}.json").read_text())


@pytest.mark.parametrize("name", sorted(FIGURES.GOLDEN))
def test_documented_command_reproduces_its_golden_output(name: str, tmp_path: Path,
                                                         capsys) -> None:
    out = tmp_path / f"{name}.json"
    assert main(FIGURES.GOLDEN[name] + ["--json", str(out)]) == 0
    capsys.readouterr()
    _same(_saved(name), json.loads(out.read_text()), name)


@pytest.mark.parametrize("name", sorted(FIGURES.GOLDEN))
def test_the_page_shows_every_golden_command(name: str) -> None:
    assert FIGURES.command_line(FIGURES.GOLDEN[name]) in DOC.read_text()


def test_the_page_shows_every_figure() -> None:
    page = DOC.read_text()
    for file in FIGURES.FIGURES:
        assert f"img/{file}" in page and (ROOT / "docs" / "img" / file).exists()


# -- claims the page makes, checked on the saved records ---------------------------------------
def _by_label(name: str) -> dict[str, dict[str, Any]]:
    return {r["algorithm"]: r for r in _saved(name)}


@pytest.mark.parametrize("name", ["alltoallv_torus", "alltoallv_tree", "alltoallv_tree_packet"])
def test_rank_order_is_slower_than_random_order_with_the_same_link_loads(name: str) -> None:
    runs = _by_label(name)
    rank_order = runs["linear:rank_order=1"]
    for label, r in runs.items():
        assert r["max_link_load_bytes"] == rank_order["max_link_load_bytes"]
        if label.startswith("random_chunked"):
            assert r["time_s"] < rank_order["time_s"]


def test_random_order_does_not_beat_rank_order_in_the_packet_model_on_the_torus() -> None:
    runs = _by_label("alltoallv_torus_packet")
    random_times = [r["time_s"] for k, r in runs.items() if k.startswith("random_chunked")]
    assert min(random_times) > runs["linear:rank_order=1"]["time_s"]


def test_allgather_through_alltoallv_moves_the_alltoallv_messages() -> None:
    """Same seed, same chunk: allgather.alltoallv is alltoallv.random_chunked on the network."""
    a = simulate("allgather", "alltoallv", "torus:2x2x3", size_bytes=3000,
                 params={"chunk": 1024, "seed": 4})
    b = simulate("alltoallv", "random_chunked", "torus:2x2x3", size_bytes=3000,
                 params={"chunk": 1024, "seed": 4})
    assert a.time_s == b.time_s
    np.testing.assert_array_equal(a.link_loads, b.link_loads)
    torus = _by_label("allgather_torus")["alltoallv:chunk=16384"]
    same = _by_label("alltoallv_torus")["random_chunked:chunk=16384"]
    assert torus["time_s"] == same["time_s"]


@pytest.mark.parametrize("name", ["seed004_ring", "seed004_hypercube",
                                  "seed004_pairwise_packet"])
def test_contention_free_cases_agree_with_the_closed_form(name: str) -> None:
    for r in _saved(name):
        assert r["time_s"] == pytest.approx(r["closed_form_s"], rel=1e-9)


def test_excluded_node_carries_nothing() -> None:
    from collops.topology import parse_topology
    topo = parse_topology("torus:4x4x4")
    r = simulate("alltoall", "pairwise", topo, size_bytes=4096, excluded={21})
    touching = (topo.link_src == 21) | (topo.link_dst == 21)
    assert r.link_loads[touching].sum() == 0
    assert _saved("exclude_21")[0]["nprocs"] == 63
