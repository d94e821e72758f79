"""The compiled flow model against the Python reference run, on small random programs.

`collops.sim.flow.FlowSimulation` (Python, the readable reference) and
`collops.sim.flow_compiled` (C: lazy draining, local max-min repair) must give every message
the same arrival time. Two runs agree to rounding, with one caveat that sets the tolerance:
flows whose drain times are within a relative 1e-9 end together (`flow.DRAINED`), so a
rounding difference can move a flow into or out of such a wave and shift later events by
about 1e-9 of a drain time. Arrival times are therefore compared within 1e-6 of the run's
time, far below any effect the model is used to show (the orders differ by tens of %).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collops.algorithms import get_algorithm
from collops.sim import flow_compiled, simulate
from collops.sim.api import call_specs
from collops.sim.flow import FlowSimulation, flow_model
from collops.sim.program import program_from_schedules
from collops.topology import NetworkParams, parse_topology, place

pytestmark = pytest.mark.skipif(not flow_compiled.available(),
                                reason="collops.sim._flowsim was not built (no C compiler)")

TOPOLOGIES = ["switch:5", "ring:6", "torus:3x3", "torus:2x2x2", "hypercube:3", "mesh:2x4",
              "fattree:2;4,2;1,2;1,1"]
ALGORITHMS = [("alltoall", "linear", {"order": "random"}), ("alltoall", "linear",
              {"order": "plain"}), ("alltoall", "linear", {"order": "shift"}),
              ("alltoall", "random_chunked", {"chunk": 256}), ("bcast", "binomial", {}),
              ("allreduce", "ring", {}), ("allreduce", "recursive_doubling", {}),
              ("allgather", "bruck", {}), ("reduce_scatter", "recursive_halving", {}),
              ("scatter", "linear", {})]
TOLERANCE = 1e-6


def _program(topology: str, collective: str, algorithm: str, params: dict, size: int,
             net: NetworkParams, seed: int):
    topo = parse_topology(topology, net)
    p = topo.num_compute_nodes
    specs = call_specs(collective, p, size)
    schedules = get_algorithm(collective, algorithm).build_all(specs, {**params, "seed": seed}
                                                               if "order" in params else params)
    return program_from_schedules(schedules, 1), topo, place(topo, p, "row-major", seed)


def _assert_same(reference, other) -> None:
    assert other.time_s == pytest.approx(reference.time_s, rel=TOLERANCE)
    np.testing.assert_allclose(other.message_done_s, reference.message_done_s, rtol=0,
                               atol=TOLERANCE * reference.time_s)
    np.testing.assert_array_equal(other.link_loads, reference.link_loads)
    assert other.hotspots.time_s.sum() == pytest.approx(reference.hotspots.time_s.sum())
    np.testing.assert_allclose(other.hotspots.hot_load_bytes.sum(),
                               reference.hotspots.hot_load_bytes.sum(), rtol=1e-6)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(topology=st.sampled_from(TOPOLOGIES), which=st.integers(0, len(ALGORITHMS) - 1),
       size=st.sampled_from([0, 512, 4096, 65536]), window=st.integers(0, 3),
       overhead=st.sampled_from([0.0, 1e-6]), hop_latency=st.sampled_from([0.0, 1e-7]),
       gamma=st.sampled_from([0.0, 1e-10]), seed=st.integers(0, 5))
def test_compiled_run_matches_the_python_run(topology: str, which: int, size: int,
                                             window: int, overhead: float, hop_latency: float,
                                             gamma: float, seed: int) -> None:
    collective, algorithm, params = ALGORITHMS[which]
    net = NetworkParams(bandwidth=2e9, hop_latency=hop_latency, overhead=overhead)
    program, topo, nodes = _program(topology, collective, algorithm, params, size, net, seed)
    options = dict(gamma=gamma, window=window)
    reference = FlowSimulation(program, topo, nodes, **options).run()
    _assert_same(reference, flow_compiled.run(program, topo, nodes, **options))
    _assert_same(reference, flow_compiled.run(program, topo, nodes, local_repair=False,
                                              **options))


@pytest.mark.parametrize("order", ["shift", "random", "plain"])
@pytest.mark.parametrize("window", [0, 1, 4])
def test_local_repair_matches_global_filling_on_a_torus(order: str, window: int) -> None:
    """64 ranks, 4032 messages: the local max-min repair gives the rates a re-filling of
    every flow gives, at every change."""
    net = NetworkParams(bandwidth=2e9, hop_latency=1e-7, overhead=1e-6)
    program, topo, nodes = _program("torus:4x4x4", "alltoall", "linear", {"order": order},
                                    16384, net, 3)
    local = flow_compiled.run(program, topo, nodes, window=window)
    _assert_same(flow_compiled.run(program, topo, nodes, window=window, local_repair=False),
                 local)


def test_flow_model_falls_back_to_the_python_run(monkeypatch) -> None:
    topo = parse_topology("torus:3x3", NetworkParams(bandwidth=2e9, overhead=1e-6))
    args = dict(size_bytes=4096, model="flow", params={"order": "random"}, window=2)
    compiled = simulate("alltoall", "linear", topo, **args)
    monkeypatch.setattr(flow_compiled, "_compiled", None)
    assert not flow_compiled.available()
    with pytest.raises(RuntimeError, match="_flowsim"):
        flow_compiled.run(*_program("ring:4", "bcast", "binomial", {}, 64, topo.params, 0))
    assert simulate("alltoall", "linear", topo, **args).time_s == pytest.approx(
        compiled.time_s, rel=TOLERANCE)


def test_compiled_run_rejects_a_message_only_program() -> None:
    from collops.sim.fastpath import alltoall_linear_messages
    topo = parse_topology("ring:4")
    program = alltoall_linear_messages(call_specs("alltoall", 4, 64)[0], {})
    with pytest.raises(ValueError, match="built from schedules"):
        flow_model(program, topo, place(topo, 4, "row-major"))


def test_repair_log_reports_the_repair_s_counters() -> None:
    """The repair log's last report is the whole run's: its steps, rate updates and re-filled
    flows, as the outcome counts them; the reports before it never run backwards."""
    net = NetworkParams(bandwidth=2e9, hop_latency=1e-7, overhead=1e-6)
    program, topo, nodes = _program("torus:4x4x4", "alltoall", "linear", {"order": "random"},
                                    16384, net, 3)
    reports: list[tuple[int, int, int]] = []
    outcome = flow_compiled.run(program, topo, nodes, window=1,
                                repair_log=lambda *counts: reports.append(counts))
    assert reports[-1] == (len(program.step_kind), outcome.rate_updates, outcome.refilled_flows)
    assert reports == sorted(reports)
