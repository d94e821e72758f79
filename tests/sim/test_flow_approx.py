"""The flow model's approximate max-min repair (``maxmin_eps`` > 0) against the exact one.

With a relative ε a flow keeps its rate while a link within ε of saturation, on which no flow
has a rate more than ε above it, is its bottleneck. The end times it gives stay within 2·ε of
the exact repair's on small programs (the worst of 300 random programs was 0.6·ε), and never
below what the busiest link needs: held rates are never over capacity.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collops.errors import ArgumentError
from collops.sim import flow_compiled, simulate
from collops.sim.flow import DEFAULT_EPS, parse_maxmin
from collops.topology import NetworkParams, parse_topology
from tests.sim.test_flow_compiled import ALGORITHMS, TOPOLOGIES, _program

pytestmark = pytest.mark.skipif(not flow_compiled.available(),
                                reason="collops.sim._flowsim was not built (no C compiler)")

#: the approximate end time is within BOUND · ε of the exact one (relative)
BOUND = 2.0
B = 2e9
ALPHA = 1e-6
QUIET = NetworkParams(bandwidth=B, hop_latency=0.0, overhead=0.0)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(topology=st.sampled_from(TOPOLOGIES), which=st.integers(0, len(ALGORITHMS) - 1),
       size=st.sampled_from([512, 4096, 65536]), window=st.integers(0, 3),
       overhead=st.sampled_from([0.0, 1e-6]), eps=st.sampled_from([1e-3, 1e-2, 0.1]),
       seed=st.integers(0, 5))
def test_approximate_end_time_is_within_its_bound(topology: str, which: int, size: int,
                                                   window: int, overhead: float, eps: float,
                                                   seed: int) -> None:
    collective, algorithm, params = ALGORITHMS[which]
    net = NetworkParams(bandwidth=2e9, hop_latency=1e-7, overhead=overhead)
    program, topo, nodes = _program(topology, collective, algorithm, params, size, net, seed)
    exact = flow_compiled.run(program, topo, nodes, window=window)
    approx = flow_compiled.run(program, topo, nodes, window=window, maxmin_eps=eps)
    assert approx.time_s == pytest.approx(exact.time_s, rel=BOUND * eps)
    # feasible: no link carried more than its capacity allows in the time taken
    capacity = np.asarray(topo.link_bandwidth, dtype=np.float64)
    assert approx.time_s >= float(np.max(approx.link_loads / capacity)) * (1 - 1e-9)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(topology=st.sampled_from(TOPOLOGIES), which=st.integers(0, len(ALGORITHMS) - 1),
       size=st.sampled_from([512, 65536]), window=st.integers(0, 3), seed=st.integers(0, 5))
def test_the_approximation_s_shortcuts_keep_the_max_min_rates(topology: str, which: int,
                                                              size: int, window: int,
                                                              seed: int) -> None:
    """At ε = 1e-9 (the exact check's slack) only the approximation's shortcuts differ from the
    exact repair — links that cannot freeze a flow left out of the filling, the flows a new one
    outranks re-filled at once — and every arrival stays where the exact repair puts it."""
    collective, algorithm, params = ALGORITHMS[which]
    net = NetworkParams(bandwidth=2e9, hop_latency=1e-7, overhead=1e-6)
    program, topo, nodes = _program(topology, collective, algorithm, params, size, net, seed)
    exact = flow_compiled.run(program, topo, nodes, window=window)
    approx = flow_compiled.run(program, topo, nodes, window=window, maxmin_eps=1e-9)
    np.testing.assert_allclose(approx.message_done_s, exact.message_done_s, rtol=0,
                               atol=1e-6 * exact.time_s)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(topology=st.sampled_from(TOPOLOGIES), which=st.integers(0, len(ALGORITHMS) - 1),
       size=st.sampled_from([512, 65536]), window=st.integers(0, 3),
       eps=st.sampled_from([0.0, 1e-9, 1e-2, 0.1]), seed=st.integers(0, 5))
def test_running_rate_sums_match_a_recomputation(topology: str, which: int, size: int,
                                                  window: int, eps: float, seed: int) -> None:
    """The approximation takes a link's held capacity and its saturation from a running sum of
    its flows' rates; after every rate update of a random run every link's sum equals the sum
    of its flows' rates recomputed from scratch, to rounding (relative to its capacity)."""
    collective, algorithm, params = ALGORITHMS[which]
    net = NetworkParams(bandwidth=2e9, hop_latency=1e-7, overhead=1e-6)
    program, topo, nodes = _program(topology, collective, algorithm, params, size, net, seed)
    drift: list[float] = []
    audited = flow_compiled.run(program, topo, nodes, window=window, maxmin_eps=eps,
                                sum_drift=drift)
    assert len(drift) == 1 and 0.0 <= drift[0] <= 1e-12
    # the audit only watches: the run is the one made without it
    plain = flow_compiled.run(program, topo, nodes, window=window, maxmin_eps=eps)
    np.testing.assert_array_equal(audited.message_done_s, plain.message_done_s)


@pytest.mark.parametrize("order", ["shift", "random"])
@pytest.mark.parametrize("window", [1, 4])
def test_eps_zero_is_the_exact_repair(order: str, window: int) -> None:
    """ε = 0 is the exact repair, arrival for arrival."""
    net = NetworkParams(bandwidth=2e9, hop_latency=1e-7, overhead=1e-6)
    program, topo, nodes = _program("torus:4x4x4", "alltoall", "linear", {"order": order},
                                    16384, net, 3)
    exact = flow_compiled.run(program, topo, nodes, window=window)
    zero = flow_compiled.run(program, topo, nodes, window=window, maxmin_eps=0.0)
    assert zero.time_s == exact.time_s
    np.testing.assert_array_equal(zero.message_done_s, exact.message_done_s)


def test_approximation_re_fills_fewer_flows_with_eight_in_flight() -> None:
    """What the approximation is for: a change re-fills fewer flows (4x4x4, window 8)."""
    net = NetworkParams(bandwidth=2e9)
    program, topo, nodes = _program("torus:4x4x4", "alltoall", "linear", {"order": "random"},
                                    65536, net, 0)
    exact = flow_compiled.run(program, topo, nodes, window=8)
    approx = flow_compiled.run(program, topo, nodes, window=8, maxmin_eps=0.01)
    assert approx.refilled_flows < exact.refilled_flows
    assert approx.time_s == pytest.approx(exact.time_s, rel=BOUND * 0.01)


@pytest.mark.parametrize("eps", [1e-3, 0.1])
@pytest.mark.parametrize("order", ["shift", "random"])
def test_all_posted_alltoall_equals_its_closed_form(eps: float, order: str) -> None:
    """Everything posted: the busiest link's bytes at link speed, L_max·M/B, within 0.1 %."""
    m, p = 16384, 64
    topo = parse_topology("torus:4x4x4", QUIET)
    src = np.repeat(np.arange(p), p - 1)
    dst = np.concatenate([[d for d in range(p) if d != r] for r in range(p)])
    _, links = topo.routes(src, dst)
    l_max = np.bincount(links, minlength=topo.num_links).max() * m
    result = simulate("alltoall", "linear", topo, size_bytes=m, model="flow", gamma=0.0,
                      params={"order": order}, window=0, maxmin_eps=eps)
    assert result.time_s == pytest.approx(l_max / B, rel=1e-3)


@pytest.mark.parametrize(("collective", "algorithm", "topology", "window", "steps"), [
    ("allgather", "ring", "ring:8", None, 7), ("allgather", "recursive_doubling",
                                               "hypercube:3", None, 3),
    ("bcast", "binomial", "ring:16", 1, 4), ("bcast", "binomial", "switch:16", 1, 4)])
def test_contention_free_closed_forms(collective: str, algorithm: str, topology: str,
                                      window: int | None, steps: int) -> None:
    """Nothing contends: every step is α + m'/B (m' the step's bytes), within 1 %."""
    m = 8192
    topo = parse_topology(topology, NetworkParams(bandwidth=B, hop_latency=0.0, overhead=ALPHA))
    r = simulate(collective, algorithm, topo, size_bytes=m, model="flow", gamma=0.0,
                 window=window, maxmin_eps=0.1)
    p = topo.num_compute_nodes
    transfer = (p - 1) * m / B if algorithm != "binomial" else steps * m / B
    assert r.time_s == pytest.approx(steps * ALPHA + transfer, rel=0.01)


def test_parse_maxmin() -> None:
    assert parse_maxmin("exact") == 0.0
    assert parse_maxmin("approx") == DEFAULT_EPS
    assert parse_maxmin("approx:eps=0.05") == 0.05
    for bad in ("exact:eps=1", "approx:eps=1", "approx:eps=-1", "approx:e=0.1", "fast"):
        with pytest.raises(ValueError, match="max-min repair"):
            parse_maxmin(bad)


def test_approximation_only_in_the_flow_model() -> None:
    topo = parse_topology("ring:4")
    with pytest.raises(ArgumentError, match="maxmin_eps"):
        simulate("bcast", "binomial", topo, size_bytes=64, model="congestion", maxmin_eps=0.1)


def test_command_line_maxmin(capsys) -> None:
    """``--maxmin approx`` runs the flow model (3T on switch:3, window 1: nothing to
    approximate), and is a usage error in another model or with a bad ε."""
    from collops.cli import main
    argv = ["sim", "--collective", "alltoall", "--topology", "switch:3", "--size", "64K",
            "--algorithm", "linear:order=plain", "--gamma", "0", "--window", "1",
            "--net", "overhead=0,hop_latency=0"]
    assert main([*argv, "--model", "flow", "--maxmin", "approx:eps=0.1"]) == 0
    assert "98.304 us" in capsys.readouterr().out
    assert main([*argv, "--maxmin", "approx"]) == 2
    assert "--model flow only" in capsys.readouterr().err
    assert main([*argv, "--model", "flow", "--maxmin", "approx:eps=2"]) == 2
    assert "--maxmin" in capsys.readouterr().err
