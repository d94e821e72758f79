"""Every registered algorithm × sizes × counts × dtypes × operators × roots, against numpy.

Each case's schedules go through the validator and the reference executor; the algorithm
axis comes from the registry, so a newly registered algorithm is tested without edits here.
"""

from __future__ import annotations

import pytest

from collops.algorithms import all_algorithms
from collops.check.cases import SIZES, assert_matches, cases_for
from collops.schedule import run_reference, validate

ALGORITHMS = [a for a in all_algorithms() if not a.needs]


@pytest.mark.parametrize("algorithm", ALGORITHMS, ids=lambda a: f"{a.collective}.{a.name}")
@pytest.mark.parametrize("p", SIZES)
def test_algorithm_against_numpy(algorithm, p):
    ran = 0
    for case in cases_for(algorithm.collective, p):
        if not algorithm.eligible(case.specs[0]):
            continue
        schedules = [algorithm.build(r, case.specs[r]) for r in range(p)]
        validate(schedules)
        results = run_reference(schedules, case.inputs, case.dtype, case.op)
        assert_matches(case, results)
        ran += 1
    if p == 2 or p == 4 or p == 8 or p == 16:
        assert ran, "a power-of-two size must exercise every algorithm"
