"""The collective correctness suite through the public API, on threads in one process.

Every registered algorithm is forced with ``algorithm=`` and checked against numpy; the
algorithm axis comes from the registry.
"""

from __future__ import annotations

import pytest

from collops.algorithms import all_algorithms
from tests.runtime.harness import run_case
from tests.support.cases import assert_matches, cases_for

ALGORITHMS = [a for a in all_algorithms() if not a.needs]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("algorithm", ALGORITHMS, ids=lambda a: f"{a.collective}.{a.name}")
@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 8])
def test_algorithm_through_api(algorithm, p):
    for case in cases_for(algorithm.collective, p, seed=1):
        if not algorithm.eligible(case.specs[0]):
            continue
        results = run_case(case, algorithm.name)
        assert_matches(case, results)


@pytest.mark.parametrize("collective", sorted({a.collective for a in ALGORITHMS}))
@pytest.mark.parametrize("p", [2, 7])
def test_automatic_selection(collective, p):
    for case in cases_for(collective, p, seed=2):
        assert_matches(case, run_case(case, None))
