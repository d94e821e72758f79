"""Network-aware selection: `collops sim --algorithm auto` and a declared ``COLLOPS_TOPOLOGY``.

The reference is each eligible algorithm simulated on its own through `simulate`, not the
cost term under test: the pick must be within 5 % of the best of them in the same model.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import collops
from collops.algorithms import algorithms, get_algorithm
from collops.cli import main
from collops.errors import RankFailed
from collops.sim import simulate
from collops.sim.api import call_specs
from collops.sim.auto import choose, network_for
from collops.sim.network_cost import NetworkCost, size_class
from collops.topology import parse_topology

SCENARIOS = [("alltoall", "torus:3x3x2", 4096, "congestion"),
             ("alltoall", "torus:4x4", 16384, "flow"),
             ("allgather", "torus:4x4", 8192, "flow"),
             ("allgather", "hypercube:4", 2048, "congestion"),
             ("alltoall", "fattree:4", 8192, "flow")]


def _simulatable(collective: str, topology, nranks: int, size: int) -> list[str]:
    spec = call_specs(collective, nranks, size)[0]
    return [a.name for a in algorithms(collective)
            if a.native is None and not a.needs and a.eligible(spec)]


@pytest.mark.parametrize("collective,topology,size,model", SCENARIOS)
def test_auto_picks_within_five_percent_of_the_best_eligible_algorithm(collective, topology,
                                                                       size, model):
    topo = parse_topology(topology)
    nranks = topo.num_compute_nodes
    times = {name: simulate(collective, name, topo, nranks, size, model=model).time_s
             for name in _simulatable(collective, topo, nranks, size)}
    assert len(times) >= 3, times
    picked = choose(collective, size, network_for(topo, nranks, model))
    assert picked.algorithm in times
    assert picked.result.time_s == pytest.approx(times[picked.algorithm], rel=1e-9)
    assert picked.result.time_s <= 1.05 * min(times.values()), (picked.algorithm, times)


def test_the_cli_prints_the_table_behind_the_choice_and_labels_the_run(tmp_path: Path, capsys):
    out = tmp_path / "out.json"
    assert main(["sim", "--collective", "allgather", "--topology", "torus:4x4", "--size", "4K",
                 "--model", "flow", "--algorithm", "auto", "--compare", "ring",
                 "--json", str(out), "--progress", "off"]) == 0
    text = capsys.readouterr().out
    assert "on network" in text and "decided by: lowest time on the network, torus:4x4" in text
    records = json.loads(out.read_text())
    label = records[0]["algorithm"]
    assert label.startswith("auto=") and records[1]["algorithm"] == "ring"
    chosen = label.removeprefix("auto=")
    alone = simulate("allgather", chosen, "torus:4x4", 16, 4096, model="flow")
    assert records[0]["time_s"] == pytest.approx(alone.time_s, rel=1e-9)


def test_native_algorithms_and_counts_known_to_one_rank_have_no_network_time():
    topo = parse_topology("torus:2x2")
    cost = NetworkCost(topo, [0, 1, 2, 3])
    spec = call_specs("allreduce", 4, 64)[0]
    assert cost.time(get_algorithm("allreduce", "shm_direct"), spec) is None
    assert cost.time(get_algorithm("allreduce", "ring"), spec) is not None
    vspec = call_specs("alltoallv", 4, 64)[0]
    assert cost.time(get_algorithm("alltoallv", "linear"), vspec) is None


def test_size_classes_round_a_regular_count_up_to_a_power_of_two():
    spec = call_specs("bcast", 4, 1000)[0]
    assert size_class(spec).count == 1024
    assert size_class(call_specs("bcast", 4, 1024)[0]).count == 1024
    vspec = call_specs("gatherv", 4, 1000)[0]
    assert size_class(vspec) == vspec


def test_the_closed_form_stands_in_where_it_is_exact_and_only_there():
    topo = parse_topology("ring:8")
    spec = call_specs("allgather", 8, 4096)[0]
    ring = get_algorithm("allgather", "ring")
    with_forms = NetworkCost(topo, range(8), closed_forms=True)
    simulated = NetworkCost(topo, range(8), closed_forms=False)
    from collops.model.closed_form import exact_time
    assert with_forms.time(ring, spec) == exact_time("allgather", "ring", topo, 8, 4096)
    assert not with_forms.results and simulated.time(ring, spec) is not None
    assert simulated.results  # it simulated
    assert simulated.time(ring, spec) == pytest.approx(with_forms.time(ring, spec), rel=0.05)


# -- real runs on a declared network ----------------------------------------------------------
def _allgather_on_declared_network(comm):
    x = (np.arange(1024, dtype=np.float64) + 1000 * comm.rank)
    out = comm.allgather(x)
    return comm.last_algorithm, out, comm.explain("allgather", x)


def _declared(monkeypatch, topology: str | None, placement: str | None = None) -> None:
    for name, value in (("COLLOPS_TOPOLOGY", topology), ("COLLOPS_PLACEMENT", placement)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    collops.reload_settings()


@pytest.mark.timeout(120)
def test_a_declared_torus_makes_threads_choose_by_time_on_it(monkeypatch):
    _declared(monkeypatch, "torus:4x4")
    try:
        per_rank = collops.spawn(_allgather_on_declared_network, 16, transport="inproc",
                                 timeout=100)
    finally:
        _declared(monkeypatch, None)
    expected = np.concatenate([np.arange(1024.0) + 1000 * r for r in range(16)])
    names = {name for name, _, _ in per_rank}
    assert len(names) == 1  # every rank chose alike
    for _, out, _ in per_rank:
        assert np.array_equal(out, expected)
    explanation = per_rank[0][2]
    assert "network: torus:4x4 (flow model)" in explanation and "on network" in explanation
    # the independent reference: every eligible schedule simulated on the torus
    spec = call_specs("allgather", 16, 8 * 1024)[0]
    times = {a: simulate("allgather", a, "torus:4x4", 16, 8192, model="flow",
                         specs=[spec.with_(dtype=np.dtype(np.float64), count=1024)] * 16).time_s
             for a in _simulatable("allgather", None, 16, 8192)}
    assert times[names.pop()] <= 1.10 * min(times.values()), times


def _chosen(comm):
    comm.allgather(np.ones(64))
    return comm.last_algorithm, comm.explain("allgather", np.ones(64))


@pytest.mark.timeout(60)
def test_without_a_declared_network_nothing_changes(monkeypatch):
    _declared(monkeypatch, None)
    per_rank = collops.spawn(_chosen, 4, transport="inproc", timeout=50)
    assert all("on network" not in text and "α-β" in text for _, text in per_rank)


@pytest.mark.parametrize("topology,placement,word", [
    ("torus:4xq", None, "COLLOPS_TOPOLOGY"), ("torus:2x2", None, "COLLOPS_PLACEMENT"),
    ("torus:4x4", "/nonexistent/nodes.txt", "COLLOPS_PLACEMENT")])
def test_a_bad_declared_network_is_a_setting_error_naming_the_variable(monkeypatch, topology,
                                                                      placement, word):
    _declared(monkeypatch, topology, placement)
    try:
        with pytest.raises(RankFailed) as failed:
            collops.spawn(_chosen, 8, transport="inproc", timeout=50)
    finally:
        _declared(monkeypatch, None)
    assert failed.value.exc_type == "SettingError" and word in str(failed.value)


def test_in_network_beside_auto_alone_is_a_one_line_error(capsys):
    assert main(["sim", "--collective", "allreduce", "--topology", "combining-tree:2:8",
                 "--algorithm", "auto", "--in-network", "--progress", "off"]) == 2
    err = capsys.readouterr().err
    assert "--in-network needs a named algorithm" in err and err.count("\n") == 1


def test_a_torus_the_ranks_fill_supplies_its_shape_to_the_dimension_wise_schemes():
    torus = parse_topology("torus:4x4x4")
    cost = NetworkCost(torus, range(64))
    assert cost.facts() == {"network.shape": "4x4x4"}
    assert cost.params_for(get_algorithm("allgather", "torus_dimensions")) == {"shape": "4x4x4"}
    assert cost.params_for(get_algorithm("allgather", "ring")) == {}
    assert NetworkCost(torus, range(32)).facts() == {}  # half the torus: not its shape
    assert NetworkCost(parse_topology("fattree:4"), range(16)).facts() == {}


def _facts_and_choice(comm):
    x = np.arange(8.0)
    return comm.supplied_facts(), comm.explain("allgather", x, algorithm="torus_dimensions")


@pytest.mark.timeout(60)
def test_a_declared_torus_reaches_the_algorithms_parameters_on_real_ranks(monkeypatch):
    _declared(monkeypatch, "torus:2x2x2")
    try:
        per_rank = collops.spawn(_facts_and_choice, 8, transport="inproc", timeout=50)
    finally:
        _declared(monkeypatch, None)
    for facts, text in per_rank:
        assert facts["network.shape"] == "2x2x2"
        assert "shape='2x2x2'" in text


def _shape_before_and_after(comm):
    before = comm.supplied_facts().get("network.shape")
    comm.barrier()
    if comm.rank == 0:
        import os
        os.environ["COLLOPS_TOPOLOGY"] = "torus:4x1"
        collops.reload_settings()
    comm.barrier()
    return before, comm.supplied_facts().get("network.shape")


@pytest.mark.timeout(60)
def test_a_network_declared_anew_reaches_a_communicator_made_before(monkeypatch):
    _declared(monkeypatch, "torus:2x2")
    try:
        per_rank = collops.spawn(_shape_before_and_after, 4, transport="inproc", timeout=50)
    finally:
        _declared(monkeypatch, None)
    assert per_rank == [("2x2", "4x1")] * 4


def test_a_topology_comes_from_a_spec_or_a_file_naming_one(tmp_path):
    from collops.errors import ArgumentError
    from collops.topology import save_topology, topology_from_text
    path = tmp_path / "net.json"
    save_topology(parse_topology("torus:3x3"), path)
    assert topology_from_text(str(path)).spec == topology_from_text("torus:3x3").spec
    assert topology_from_text("ring:8", {"bandwidth": 1e9}).params.bandwidth == 1e9
    with pytest.raises(ArgumentError, match="no such file"):
        topology_from_text(str(tmp_path / "missing.json"))
