"""Seed 004's exchanges: right against numpy for every shape, and, on their own networks
without contention, exactly the lecture's formulas."""

from __future__ import annotations

import numpy as np
import pytest

import collops
from collops.algorithms.registry import get_algorithm
from collops.check.cases import assert_matches, make_case
from collops.model.seed004 import (
    hypercube_alltoall,
    ring_alltoall,
    torus_allgather,
    torus_alltoall,
)
from collops.schedule import run_reference, validate
from collops.sim.api import simulate
from collops.topology import parse_topology

TORUS = [("alltoall", "torus_dimensions"), ("alltoallv", "torus_dimensions"),
         ("allgather", "torus_dimensions")]


@pytest.mark.parametrize("collective, algorithm", TORUS)
@pytest.mark.parametrize("shape", ["2x2x2", "3x2", "2x3x2", "12", "1x4x1"])
def test_torus_schedules_of_every_shape_against_numpy(collective: str, algorithm: str,
                                                      shape: str) -> None:
    p = int(np.prod([int(x) for x in shape.split("x")]))
    alg = get_algorithm(collective, algorithm)
    for count in (0, 1, 5):
        case = make_case(collective, p, count, dtype=np.int32, seed=count)
        schedules = [alg.build(r, case.specs[r], {"shape": shape}) for r in range(p)]
        validate(schedules)
        assert_matches(case, run_reference(schedules, case.inputs, case.dtype))


def test_a_shape_that_does_not_fit_the_ranks_is_an_error_naming_it() -> None:
    spec = collops.make_spec("alltoall", 8, np.float64, count=1)
    with pytest.raises(collops.ArgumentError, match="shape='2x3'.*multiply to the 8 ranks"):
        get_algorithm("alltoall", "torus_dimensions").build(0, spec, {"shape": "2x3"})


@pytest.mark.timeout(120)
def test_a_three_dimensional_exchange_on_threads() -> None:
    def body(comm):
        x = np.arange(8 * 3, dtype=np.float64) + 100 * comm.rank
        got = comm.alltoall(x, algorithm="torus_dimensions", shape="2x2x2")
        gathered = comm.allgather(x[:3], algorithm="torus_dimensions", shape="2x2x2")
        return got, gathered

    results = collops.spawn(body, 8)
    for r, (got, gathered) in enumerate(results):
        want = np.concatenate([np.arange(3 * r, 3 * r + 3) + 100 * s for s in range(8)])
        assert np.array_equal(np.asarray(got).reshape(-1), want)
        assert np.array_equal(np.asarray(gathered).reshape(-1),
                              np.concatenate([np.arange(3) + 100 * s for s in range(8)]))


def _formula(kind: str, dims: tuple[int, ...], m: int, t_s: float, t_c: float,
             t_h: float) -> float:
    """The lecture's times, generalised to any torus shape: each dimension of length L is a
    ring of L−1 steps; an alltoall relay step carries ½·p·m bytes on average, an allgather
    step the blocks gathered so far (derived here, not taken from the code)."""
    p = int(np.prod(dims))
    if kind == "alltoall":
        return sum((n - 1) * (t_s + t_h) + (n - 1) * p * m / 2 * t_c for n in dims if n > 1)
    total, gathered = 0.0, 1
    for n in reversed(dims):
        total += (n - 1) * (t_s + t_h + gathered * m * t_c)
        gathered *= n
    return total


@pytest.mark.parametrize("collective, algorithm, topology, p, formula, params", [
    ("alltoall", "ring_relay", "ring:8", 8, ring_alltoall, {}),
    ("alltoall", "torus_dimensions", "torus:4x4", 16, torus_alltoall, {"shape": "4x4"}),
    ("alltoall", "hypercube_exchange", "hypercube:4", 16, hypercube_alltoall, {}),
    ("allgather", "torus_dimensions", "torus:4x4", 16, torus_allgather,
     {"shape": "4x4"}),
])
@pytest.mark.parametrize("m", [1024, 65536])
def test_contention_free_simulation_is_the_lecture_s_formula(collective, algorithm, topology,
                                                             p, formula, params, m) -> None:
    net = parse_topology(topology).params
    want = formula(p, m, net.overhead, 1 / net.bandwidth, net.hop_latency)
    got = simulate(collective, algorithm, topology, p, m, gamma=0.0, params=params).time_s
    assert got == pytest.approx(want, rel=0.01)


@pytest.mark.parametrize("collective", ["alltoall", "allgather"])
def test_on_a_three_dimensional_torus_too(collective: str) -> None:
    net = parse_topology("torus:4x2x3").params
    got = simulate(collective, "torus_dimensions", "torus:4x2x3", 24, 4096, gamma=0.0,
                   params={"shape": "4x2x3"}).time_s
    want = _formula(collective, (4, 2, 3), 4096, net.overhead, 1 / net.bandwidth,
                    net.hop_latency)
    assert got == pytest.approx(want, rel=0.01)
