"""The verification in the tuning job with a fake clock: the default and the rules go first
alternating; one interrupted round of a true winner asks for more rounds and does not drop
it; a candidate no better than the default, or better by less than the gain bound, is
dropped."""

from __future__ import annotations

import pytest

import collops
from collops.tune.grid import measure_job
from collops.tune.measure import Effort
from collops.tune.verify import Row, verify_job

EFFORT = Effort(passes=2, repetitions=2, batch_seconds=0.01, refinements=0, warmup=1,
                verify_rounds=5, verify_most=15)
DEFAULT, CHALLENGER = "ring", "rabenseifner"


def row(tuned: list[float], default: list[float], block: int = 0) -> Row:
    return Row("allreduce", 65536, DEFAULT, CHALLENGER, tuple(x * 1e-6 for x in default),
               tuple(x * 1e-6 for x in tuned), block)


def test_a_rule_holds_by_the_sign_test_at_the_first_rounds_level_and_the_gain_bound() -> None:
    # five rounds: every one won, as before, and by more than the gain bound
    assert row([86] * 5, [100] * 5).holds
    assert not row([86, 86, 101, 86, 86], [100] * 5).holds
    # every round won, but by 3 %: below the gain bound
    assert not row([97] * 5, [100] * 5).holds
    # 15 rounds judged at the level of five: 12 wins hold (p 0.018), 11 do not (p 0.059)
    assert row([86] * 12 + [120] * 3, [100] * 15, block=5).holds
    assert not row([86] * 11 + [120] * 4, [100] * 15, block=5).holds
    assert row([86] * 12 + [120] * 3, [100] * 15).rounds_won == 12


def clock(verify_us):
    """A rank's clock: in the passes the challenger 86 µs a call and every other candidate
    100; in the verification the defaults 100 µs and the rules ``verify_us(k)`` in their
    k-th timed batch. Records which side each timed batch of the verification was."""
    def make(seen: list[str]):
        def timer(label, size, call, iterations):
            if iterations == 1:  # the pilot of a batch's length
                return 100e-6
            side, _, name = label.rpartition(":")
            if side:
                seen.append(side)
            if side == "tuned":
                us = verify_us(seen.count("tuned"))
            else:
                us = 86.0 if name == CHALLENGER else 100.0
            return us * 1e-6 * iterations
        return timer
    return make


def verified(verify_us):
    def body(comm):
        seen: list[str] = []
        timer = clock(verify_us)(seen)
        decisions = measure_job(comm, ["allreduce"], [65536], EFFORT, timer, knobs=())
        return verify_job(comm, decisions, "inproc", EFFORT, timer), seen
    checks, seen = collops.spawn(body, 3, timeout=100)[0]
    (check,) = checks.values()
    return check, seen


@pytest.mark.timeout(120)
def test_the_sides_go_first_alternating_and_a_steady_winner_takes_the_first_rounds() -> None:
    check, seen = verified(lambda k: 86.0)
    assert check.kept and check.rows[0].tuned_algorithm == CHALLENGER
    assert seen == ["defaults", "tuned", "tuned", "defaults", "defaults", "tuned", "tuned",
                    "defaults", "defaults", "tuned"]
    assert check.rows[0].ratio == pytest.approx(0.86)


@pytest.mark.timeout(120)
def test_one_interrupted_round_asks_for_more_and_keeps_a_true_winner() -> None:
    check, seen = verified(lambda k: 300.0 if k == 2 else 86.0)
    (r,) = check.rows
    assert len(r.tuned) == len(r.default) == 15 and r.rounds_won == 14
    assert check.kept


@pytest.mark.timeout(120)
@pytest.mark.parametrize("verify_us", [
    lambda k: 80.0 if k % 2 else 120.0,  # a coin: wins every other round
    lambda k: 97.0 if k != 2 else 300.0,  # wins 14 of 15 rounds, by 3 %
])
def test_a_candidate_no_better_beyond_the_noise_is_dropped(verify_us) -> None:
    check, _ = verified(verify_us)
    assert len(check.rows[0].tuned) == 15 and not check.kept
