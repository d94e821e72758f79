"""The vectorised generators produce exactly the messages of the registry's builders."""

from __future__ import annotations

import numpy as np
import pytest

from collops.algorithms import get_algorithm
from collops.sim.api import call_specs
from collops.sim.fastpath import fast_generator
from collops.sim.program import Program, program_from_schedules


def _canonical(program: Program) -> np.ndarray:
    """Rows (src, position in the rank's issue order, dst, bytes, phase), sorted."""
    order = np.lexsort((program.msg_order, program.msg_src))
    src = program.msg_src[order]
    starts = np.r_[0, np.flatnonzero(np.diff(src)) + 1]
    position = np.arange(len(src)) - np.repeat(starts, np.diff(np.r_[starts, len(src)]))
    return np.stack([src, position, program.msg_dst[order], program.msg_bytes[order],
                     program.msg_phase[order]], axis=1)


@pytest.mark.parametrize("collective", ["alltoall", "alltoallv"])
@pytest.mark.parametrize("algorithm", ["linear", "pairwise"])
@pytest.mark.parametrize("p", [2, 5, 8, 12])
def test_generator_matches_registry(collective: str, algorithm: str, p: int) -> None:
    specs = call_specs(collective, p, 24)
    gen = fast_generator(collective, algorithm, specs[0])
    assert gen is not None
    alg = get_algorithm(collective, algorithm)
    fast = gen(specs[0], alg.resolve({}))
    built = program_from_schedules(alg.build_all(specs), specs[0].itemsize)
    np.testing.assert_array_equal(_canonical(fast), _canonical(built))


@pytest.mark.parametrize("params", [{"order": "plain"}, {"order": "random", "seed": 3},
                                    {"rank_order": 1}])
@pytest.mark.parametrize("p", [2, 5, 8])
def test_linear_generator_follows_the_order(params: dict, p: int) -> None:
    specs = call_specs("alltoall", p, 24)
    alg = get_algorithm("alltoall", "linear")
    fast = fast_generator("alltoall", "linear", specs[0])(specs[0], alg.resolve(params))
    built = program_from_schedules(alg.build_all(specs, params), specs[0].itemsize)
    np.testing.assert_array_equal(_canonical(fast), _canonical(built))


def test_no_generator_for_empty_blocks() -> None:
    assert fast_generator("alltoall", "linear", call_specs("alltoall", 4, 0)[0]) is None
    assert fast_generator("alltoall", "bruck", call_specs("alltoall", 4, 8)[0]) is None


@pytest.mark.parametrize(("collective", "algorithm"), [
    ("alltoall", "random_chunked"), ("alltoallv", "random_chunked"), ("allgather", "alltoallv")])
@pytest.mark.parametrize("params", [{}, {"chunk": 8, "seed": 5}, {"chunk": 7}, {"chunk": 100}])
@pytest.mark.parametrize("p", [2, 5, 8])
def test_random_chunked_generator_matches_registry(collective: str, algorithm: str,
                                                   params: dict, p: int) -> None:
    specs = call_specs(collective, p, 24)
    gen = fast_generator(collective, algorithm, specs[0])
    assert gen is not None
    alg = get_algorithm(collective, algorithm)
    fast = gen(specs[0], alg.resolve(params))
    built = program_from_schedules(alg.build_all(specs, params), specs[0].itemsize)
    np.testing.assert_array_equal(_canonical(fast), _canonical(built))
    for column in ("local_rank", "local_level", "local_bytes", "local_is_reduce"):
        np.testing.assert_array_equal(getattr(fast, column), getattr(built, column))
