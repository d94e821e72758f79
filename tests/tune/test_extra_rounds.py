"""The grid's extra rounds on threads with a fake clock: a winner slowed in one round of its
passes (a loaded machine's interruption) becomes a rule once the extra rounds, alternating it
with the default, confirm it; a candidate that wins half its rounds by chance does not. Rounds
that spread widely get more extra rounds than steady ones."""

from __future__ import annotations

import pytest

import collops
from collops.tune.grid import measure_job
from collops.tune.measure import Effort

#: passes of two repetitions, no refinement, 12 extra rounds (24 where they spread): a small
#: fake run
EFFORT = Effort(passes=3, repetitions=2, batch_seconds=0.01, refinements=0, warmup=1,
                extra_rounds=12, extra_most=24)
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
    assert d.best.algorithm == CHALLENGER and d.extra is not None and d.noisy
    assert len(d.extra[0].samples) == len(d.extra[1].samples) == 24
    assert d.rounds_won == 29 and d.changed
    # without extra rounds the one slow round keeps the default
    none = run(Effort(passes=3, repetitions=2, batch_seconds=0.01, refinements=0, warmup=1,
                      extra_rounds=0), interrupted)
    assert none.best.algorithm == CHALLENGER and none.rounds_won == 5 and not none.changed


@pytest.mark.timeout(120)
@pytest.mark.parametrize("won, lost, extra", [(40.0, 56.0, 24), (46.0, 51.0, 12)])
def test_a_candidate_winning_every_other_round_stays_a_candidate(won: float, lost: float,
                                                                 extra: int) -> None:
    # rounds 40 / 56 µs spread by a third of their median: 24 extra rounds; 46 / 51 µs: 12
    d = run(EFFORT, lambda k: won if k % 2 else lost)
    assert d.best.algorithm == CHALLENGER and d.extra is not None
    assert len(d.extra[0].samples) == extra and d.noisy is (extra == 24)
    assert d.rounds_won == (6 + extra) // 2 and not d.changed
