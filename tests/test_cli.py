"""The command line: the registry listing and the generated algorithms page."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from collops.algorithms import all_algorithms
from collops.cli import algorithms_markdown, main

ROOT = Path(__file__).resolve().parents[1]


def test_algorithms_lists_every_registered_algorithm(capsys):
    assert main(["algorithms"]) == 0
    out = capsys.readouterr().out
    for alg in all_algorithms():
        assert alg.name in out and alg.collective in out


def test_docs_algorithms_page_is_generated_from_the_registry():
    page = (ROOT / "docs" / "algorithms.md").read_text()
    assert page == algorithms_markdown(), (
        "docs/algorithms.md is stale: regenerate with `collops algorithms --markdown > "
        "docs/algorithms.md`")


def test_python_dash_m_runs_the_cli():
    out = subprocess.run([sys.executable, "-m", "collops", "algorithms", "bcast"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert "binomial" in out and "allreduce" not in out
