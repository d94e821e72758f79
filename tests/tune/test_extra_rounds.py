"""The grid's extra rounds on threads with a fake clock: a winner slowed in one round of its
passes (a loaded machine's interruption) becomes a rule once the extra rounds, alternating it
with the default, confirm it; a candidate that wins half its rounds by chance does not."""

from __future__ import annotations

import pytest

import collops
from collops.tune.grid import measure_job
from collops.tune.measure import Effort

#: passes of two repetitions, no refinement, 12 extra rounds: a small fake run
EFFORT = Effort(passes=3, repetitions=2, batch_seconds=0.01, refinements=0, warmup=1,
                extra_rounds=12)
CHALLENGER = "rabenseifner"


def timer_for(challenger_us):
    """A rank's clock: the challenger's k-th timed batch (per size) takes
    ``challenger_us(k)`` µs a call, every other candidate 50 µs."""
    def make(comm):
        seen: dict[tuple[str, int], int] = {}

        def timer(label, size, call, iterations):
            if iterations == 1:  # the pilot of a batch's length
                return 50e-6
            seen[label, size] = k = seen.get((label, size), 0) + 1
            us = challenger_us(k) if label == CHALLENGER else 50.0
            return us * 1e-6 * iterations
        return timer
    return make


def run(effort: Effort, challenger_us):
    def body(comm):
        return measure_job(comm, ["allreduce"], [65536], effort,
                           timer_for(challenger_us)(comm))["allreduce"]
    (d,) = collops.spawn(body, 3, timeout=100)[0]
    return d


@pytest.mark.timeout(120)
def test_a_winner_slowed_in_one_round_is_confirmed_by_the_extra_rounds() -> None:
    def interrupted(k: int) -> float:
        return 200.0 if k == 3 else 30.0
    d = run(EFFORT, interrupted)
    assert d.best.algorithm == CHALLENGER and d.extra is not None
    assert len(d.extra[0].samples) == len(d.extra[1].samples) == 12
    assert d.rounds_won == 17 and d.changed
    # without extra rounds the one slow round keeps the default
    none = run(Effort(passes=3, repetitions=2, batch_seconds=0.01, refinements=0, warmup=1,
                      extra_rounds=0), interrupted)
    assert none.best.algorithm == CHALLENGER and none.rounds_won == 5 and not none.changed


@pytest.mark.timeout(120)
def test_a_candidate_winning_every_other_round_stays_a_candidate() -> None:
    d = run(EFFORT, lambda k: 40.0 if k % 2 else 56.0)
    assert d.best.algorithm == CHALLENGER and d.extra is not None
    assert d.rounds_won == 9 and not d.changed
