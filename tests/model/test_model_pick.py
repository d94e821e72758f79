"""``collops model --collective C --topology T`` shows the network-aware pick: the algorithm
whose simulated time on T is the least among the eligible ones (checked against simulating
each of them here), the same one ``collops sim --algorithm auto`` picks, and the table behind
it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from collops.algorithms import algorithms
from collops.algorithms.selection import select
from collops.cli import main
from collops.sim import simulate
from collops.sim.api import call_specs

CASES = [("alltoall", "torus:4x4", "4K"), ("allgather", "ring:8", "64K"),
         ("allgather", "hypercube:3", "1K")]
SIZES = {"1K": 1024, "4K": 4096, "64K": 65536}


def _picks(tmp_path: Path, collective: str, topology: str, size: str, *more: str) -> list[dict]:
    out = tmp_path / "model.json"
    assert main(["model", "--topology", topology, "--size", size, "--collective", collective,
                 "--json", str(out), *more]) == 0
    return [r for r in json.loads(out.read_text()) if r["table"] == "choice"]


@pytest.mark.parametrize(("collective", "topology", "size"), CASES)
def test_the_pick_is_the_fastest_eligible_algorithm_on_the_network(tmp_path, capsys,
                                                                  collective, topology, size):
    (pick,) = _picks(tmp_path, collective, topology, size)
    out = capsys.readouterr().out
    assert "the network-aware pick" in out and "<-- chosen" in out
    p, nbytes = pick["nprocs"], SIZES[size]
    spec = call_specs(collective, p, nbytes)[0]
    times = {}
    for alg in algorithms(collective):
        if alg.native is None and not alg.needs and alg.eligible(spec):
            times[alg.name] = simulate(collective, alg.name, topology, p, nbytes,
                                       progress=False).time_s
    assert pick["name"] == min(times, key=lambda name: times[name]), times
    assert pick["time_s"] == pytest.approx(times[pick["name"]])


@pytest.mark.parametrize(("collective", "topology", "size"), CASES[:2])
def test_the_network_changes_the_pick_of_the_closed_forms(tmp_path, collective, topology,
                                                         size):
    (pick,) = _picks(tmp_path, collective, topology, size)
    spec = call_specs(collective, pick["nprocs"], SIZES[size])[0]
    assert pick["name"] != select(spec).algorithm.name


@pytest.mark.parametrize(("collective", "topology", "size"), CASES[:2])
def test_model_and_sim_auto_pick_the_same(tmp_path, capsys, collective, topology, size):
    (pick,) = _picks(tmp_path, collective, topology, size)
    capsys.readouterr()
    assert main(["sim", "--collective", collective, "--topology", topology, "--size", size,
                 "--algorithm", "auto", "--progress", "off"]) == 0
    chosen = re.search(r"auto=(\w+)", capsys.readouterr().out)
    assert chosen is not None and chosen.group(1) == pick["name"]


def test_no_pick_and_another_model(tmp_path):
    assert _picks(tmp_path, "alltoall", "torus:4x4", "4K", "--no-pick") == []
    (pick,) = _picks(tmp_path, "alltoall", "torus:4x4", "4K", "--model", "flow")
    assert pick["note"] == "simulated, flow model"
