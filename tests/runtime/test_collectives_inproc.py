"""The collective correctness suite through the public API, on threads in one process.

Every registered algorithm is forced with ``algorithm=`` and checked against numpy; the
algorithm axis comes from the registry; the sizes are issue 2's, 1 to 16 (odd, prime, powers
of two), each with every case of `cases_for` (zero and uneven counts, dtypes, operators, roots).
"""

from __future__ import annotations

import pytest

from collops.algorithms import all_algorithms
from tests.runtime.harness import run_case
from tests.support.cases import assert_matches, cases_for

ALGORITHMS = [a for a in all_algorithms() if not a.needs]


SIZES = [1, 2, 3, 4, 5, 7, 8, 11, 16]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("algorithm", ALGORITHMS, ids=lambda a: f"{a.collective}.{a.name}")
@pytest.mark.parametrize("p", SIZES)
def test_algorithm_through_api(algorithm, p):
    ran = 0
    for case in cases_for(algorithm.collective, p, seed=1):
        if not algorithm.eligible(case.specs[0]):
            continue
        results = run_case(case, algorithm.name)
        assert_matches(case, results)
        ran += 1
    restricted = any(r.name == "power_of_two" for r in algorithm.restrictions)
    if not (restricted and p & (p - 1)):
        assert ran, f"no case of {algorithm.collective} ran {algorithm.name} at p={p}"


@pytest.mark.parametrize("collective", sorted({a.collective for a in ALGORITHMS}))
@pytest.mark.parametrize("p", [2, 7])
def test_automatic_selection(collective, p):
    for case in cases_for(collective, p, seed=2):
        assert_matches(case, run_case(case, None))
