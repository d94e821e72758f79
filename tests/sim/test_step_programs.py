"""The vectorised whole programs equal the registry's, column by column, and run alike."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest

from collops.algorithms import get_algorithm
from collops.sim import flow_compiled, simulate
from collops.sim.api import call_specs
from collops.sim.flow import FlowSimulation, flow_network
from collops.sim.program import Program, program_from_schedules
from collops.sim.step_programs import step_generator
from collops.topology import NetworkParams, parse_topology, place


def _both(collective: str, algorithm: str, p: int, size: int,
          params: dict) -> tuple[Program, Program]:
    specs = call_specs(collective, p, size)
    alg = get_algorithm(collective, algorithm)
    gen = step_generator(collective, algorithm, specs[0])
    assert gen is not None
    fast = gen(specs[0], alg.resolve(params))
    built = program_from_schedules(alg.build_all(specs, params), specs[0].itemsize)
    return fast, built


def _assert_same(fast: Program, built: Program) -> None:
    for field in fields(Program):
        if field.name == "source":
            continue
        a, b = getattr(fast, field.name), getattr(built, field.name)
        if isinstance(b, np.ndarray):
            assert a.dtype == b.dtype, field.name
            np.testing.assert_array_equal(a, b, err_msg=field.name)
        else:
            assert a == b, field.name


@pytest.mark.parametrize("collective", ["alltoall", "alltoallv"])
@pytest.mark.parametrize("params", [{}, {"order": "plain"}, {"order": "random", "seed": 3},
                                    {"rank_order": 1}, {"throttle": 1}, {"throttle": 3},
                                    {"throttle": 9, "order": "random"}])
@pytest.mark.parametrize("p", [2, 3, 5, 8, 12])
def test_linear_program_equals_the_registrys(collective: str, params: dict, p: int) -> None:
    _assert_same(*_both(collective, "linear", p, 24, params))


@pytest.mark.parametrize("collective", ["alltoall", "alltoallv"])
@pytest.mark.parametrize(("size", "params"), [(24, {}), (24, {"chunk": 8, "seed": 5}),
                                              (24, {"chunk": 7}), (24, {"chunk": 100}),
                                              (1, {"chunk": 1})])
@pytest.mark.parametrize("p", [2, 3, 5, 8])
def test_random_chunked_program_equals_the_registrys(collective: str, size: int, params: dict,
                                                     p: int) -> None:
    _assert_same(*_both(collective, "random_chunked", p, size, params))


def test_no_step_generator_for_empty_or_unequal_blocks() -> None:
    assert step_generator("alltoall", "linear", call_specs("alltoall", 4, 0)[0]) is None
    assert step_generator("alltoall", "bruck", call_specs("alltoall", 4, 8)[0]) is None
    assert step_generator("alltoall", "linear", call_specs("alltoall", 1, 8)[0]) is None


@pytest.mark.parametrize("window", [1, 2])
@pytest.mark.parametrize(("algorithm", "params"), [("linear", {"order": "random", "seed": 1}),
                                                   ("linear", {"order": "shift"}),
                                                   ("random_chunked", {"chunk": 512})])
def test_flow_model_runs_both_programs_alike(window: int, algorithm: str, params: dict) -> None:
    topology = parse_topology("torus:4x4x4")
    nodes = place(topology, 64, "row-major")
    fast, built = _both("alltoall", algorithm, 64, 1024, params)
    runners = [lambda program: FlowSimulation(program, topology, nodes, window=window).run()]
    if flow_compiled.available():
        runners.append(lambda program: flow_compiled.run(program, topology, nodes,
                                                         window=window))
    for run in runners:
        a, b = run(fast), run(built)
        assert a.time_s == b.time_s
        np.testing.assert_array_equal(a.message_done_s, b.message_done_s)
        np.testing.assert_array_equal(a.link_loads, b.link_loads)


@pytest.mark.parametrize("model", ["flow", "packet"])
def test_simulate_takes_the_vectorised_steps_when_asked(model: str) -> None:
    topology = parse_topology("torus:2x2x4")
    args = dict(size_bytes=512, model=model, params={"order": "random", "seed": 2}, window=1,
                gamma=0.0)
    fast = simulate("alltoall", "linear", topology, fast=True, **args)
    built = simulate("alltoall", "linear", topology, fast=False, **args)
    assert (fast.source, built.source) == ("vectorised steps", "registry")
    assert fast.time_s == built.time_s
    np.testing.assert_array_equal(fast.link_loads, built.link_loads)


def test_flow_network_in_chunks_equals_the_routes_at_once(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """Routes taken a few pairs at a time give the routes, latencies and loads of one call."""
    topology = parse_topology("torus:4x4x4", NetworkParams(hop_latency=3e-7))
    nodes = place(topology, 64, "row-major")
    fast, _ = _both("alltoall", "linear", 64, 100, {"order": "random"})
    offsets, links = topology.routes(nodes[fast.msg_src], nodes[fast.msg_dst])
    monkeypatch.setattr(type(topology), "_pair_chunk", lambda self, max_links=0: 7)
    net = flow_network(fast, topology, nodes)
    assert net.route_links.dtype == np.int32
    np.testing.assert_array_equal(net.route_offsets, offsets)
    np.testing.assert_array_equal(net.route_links, links)
    hops = np.diff(np.asarray(offsets))
    np.testing.assert_allclose(net.route_latency, hops * 3e-7, rtol=1e-12)
    expected = np.bincount(links, weights=np.repeat(net.wire, hops), minlength=len(net.capacity))
    np.testing.assert_array_equal(net.link_loads, expected)
