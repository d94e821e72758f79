"""The simulator reads the same schedules as the engine: v-calls whose blocks lie at
displacements (gaps, overlapping sends) move the same bytes as the same counts back to back,
in at least as many messages and as much time."""

from __future__ import annotations

import pytest

from collops.algorithms import all_algorithms
from collops.algorithms.spec import prefix
from collops.check.cases import DISPLACED, make_case
from collops.sim import simulate_schedules


def _first_eligible(algorithm):
    """The first size whose displaced call the algorithm's restrictions (power of two, …)
    accept, with that call (None: its restrictions, e.g. equal counts, exclude them all)."""
    for p in (5, 4, 8):
        case = make_case(algorithm.collective, p, 6, displaced=True, seed=11)
        if algorithm.eligible(case.specs[0]):
            return p, case
    return None


#: every schedule of a v-collective that can take uneven displaced calls (those restricted to
#: equal counts cannot be given one)
ALGORITHMS = [a for a in all_algorithms() if a.collective in DISPLACED and not a.needs
              and _first_eligible(a) is not None]


def _back_to_back(spec):
    return spec.with_(displs=prefix(spec.counts), sdispls=prefix(spec.sendcounts),
                      rdispls=prefix(spec.recvcounts))


@pytest.mark.parametrize("algorithm", ALGORITHMS, ids=lambda a: f"{a.collective}.{a.name}")
def test_displaced_v_calls_simulate_like_back_to_back_ones(algorithm):
    found = _first_eligible(algorithm)
    assert found is not None
    p, case = found
    assert case.displaced
    displaced = [algorithm.build(r, case.specs[r]) for r in range(p)]
    plain = [algorithm.build(r, _back_to_back(case.specs[r])) for r in range(p)]
    got = simulate_schedules(displaced, f"ring:{p}", itemsize=8)
    want = simulate_schedules(plain, f"ring:{p}", itemsize=8)
    # the same bytes; blocks that lie apart may take more messages (runs no longer
    # contiguous) or local copies (a root packing or unpacking them): never less time
    assert got.total_bytes == want.total_bytes > 0 and got.messages >= want.messages
    assert got.time_s >= want.time_s * (1 - 1e-9)
