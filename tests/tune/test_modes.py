"""A default whose time is bimodal with the mode fixed per job (more ranks than cores): a rule
chosen in a job where the default was in its slow mode is dropped once jobs of their own see
the fast one; a rule faster in both modes is kept. Fake clocks and fake job launchers."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import collops
from collops.algorithms.tuning import load_tuning
from collops.tune import across
from collops.tune.across import verify_in_jobs
from collops.tune.grid import measure_job
from collops.tune.measure import Effort
from collops.tune.table import machine, write_table
from collops.tune.verify import Row, verify_job

EFFORT = Effort(passes=2, repetitions=2, batch_seconds=0.01, refinements=0, warmup=1,
                verify_rounds=3)
DEFAULT, CHALLENGER = "ring", "rabenseifner"
#: the jobs (numbered from 1 as they start) in which the machine is in its fast mode
FAST_JOBS = {1, 4, 7, 10, 13}


def row(tuned: list[float], default: list[float]) -> Row:
    return Row("allreduce", 65536, DEFAULT, CHALLENGER, tuple(x * 1e-6 for x in default),
               tuple(x * 1e-6 for x in tuned))


def test_a_rule_between_the_defaults_modes_is_dropped_one_faster_in_both_is_kept() -> None:
    # the 4-rank reduce: the default 185 or ~690 µs by job, the rule 420-443 µs
    between = row([420, 441, 443, 430], [185, 682, 699, 690])
    assert not across.holds([between]) and across.disagree(between)
    assert across.modes(between.default) == [[185e-6], [682e-6, 690e-6, 699e-6]]
    assert across.worst_ratio(between) == pytest.approx(435.5 / 185)
    # both modes faster: kept, though the rule's slow mode is slower than the default's fast
    both = row([150, 600, 610, 150], [185, 690, 700, 185])
    assert across.holds([both])
    # a rule bimodal itself whose slow mode is the default's time: within the noise, kept
    assert across.holds([row([56, 93.5, 57.5, 55], [100.9, 90.8, 101.3, 99])])
    # slower in no mode but no faster: kept only for a row it did not win
    same = row([100, 101, 99, 100], [100, 100, 100, 100])
    assert not across.holds([same]) and across.holds([same], won=lambda r: False)
    assert across.settled([same]) and not across.settled([between])


def world(mode_of_default: bool, challenger: tuple[float, float]):
    """Each job's µs per call of (algorithm, fast mode?): the default 185 / 690 µs, the
    challenger as given; the defaults' time is bimodal only if ``mode_of_default``."""
    def us(algorithm: str, fast: bool) -> float:
        if algorithm == CHALLENGER:
            return challenger[0] if fast else challenger[1]
        return 185.0 if fast and mode_of_default else 690.0
    return us


def fake_launch(us):
    """A launcher whose job runs each row with the algorithm the file gives it (the default
    without a file), in the fast mode if the job's number is in `FAST_JOBS`."""
    jobs: list[str] = []

    def launch(path, rows):
        algorithm = DEFAULT
        if path:
            with open(path, "rb") as f:
                algorithm = tomllib.load(f)["allreduce"]["rule"][0]["algorithm"]
        jobs.append(path)
        fast = len(jobs) in FAST_JOBS
        return [(algorithm, us(algorithm, fast) * 1e-6) for _ in rows]
    return launch, jobs


def tuned_in_one_job(challenger_us: float):
    """The tuning job in the default's slow mode: the default 690 µs, the challenger as
    given; the passes and the verification in that job."""
    def timer(label, size, call, iterations):
        name = label.split(":", 1)[-1]
        return (challenger_us if name == CHALLENGER else 690.0) * 1e-6 * iterations

    def body(comm):
        decisions = measure_job(comm, ["allreduce"], [65536], EFFORT, timer, knobs=())
        return decisions, verify_job(comm, decisions, "inproc", EFFORT, timer)
    return collops.spawn(body, 3)[0]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("challenger, kept", [((440.0, 440.0), False), ((150.0, 600.0), True)])
def test_the_jobs_see_the_defaults_fast_mode_that_the_tuning_job_did_not(
        tmp_path: Path, challenger: tuple[float, float], kept: bool) -> None:
    decisions, checks = tuned_in_one_job(challenger[1])
    # in the tuning job the challenger beat the default in every pass and every round
    (check,) = checks.values()
    assert check.kept and not check.jobs
    launch, jobs = fake_launch(world(True, challenger))
    found = verify_in_jobs(3, decisions, checks, "inproc", launch, True)
    (check,) = found.values()
    assert check.jobs and check.kept is kept
    # a rule about to be kept, or one whose jobs disagree, gets every round
    first, most = across.ROUNDS[True]
    assert len(jobs) == 2 * most and len(check.rows[0].tuned) == most
    assert sorted(check.rows[0].default)[0] == pytest.approx(185e-6)
    path = tmp_path / "t.toml"
    path.write_text(write_table({3: decisions}, machine("inproc", [3], "test"), "inproc",
                                {3: found}))
    rules = load_tuning(str(path)).rules.get("allreduce", [])
    assert [r.algorithm for r in rules] == ([CHALLENGER] if kept else [])
    if kept:
        assert "verified_in_jobs = true" in path.read_text()
    else:
        assert "in jobs of their own; slowest mode 2.38" in path.read_text()


@pytest.mark.timeout(120)
def test_a_steady_default_and_a_steady_loser_stop_after_the_first_rounds() -> None:
    decisions, checks = tuned_in_one_job(440.0)
    # the default is never fast: the challenger lost by a third in every job
    launch, jobs = fake_launch(world(False, (920.0, 920.0)))
    (check,) = verify_in_jobs(3, decisions, checks, "inproc", launch, True).values()
    assert not check.kept and len(jobs) == 2 * across.ROUNDS[True][0]


def hiccup_launch(slow_jobs: set[int]):
    """Jobs of the default at 100 µs and of the rule at 76, except the jobs numbered in
    ``slow_jobs`` (from 1 as they start), which a state of the machine slows 1.9 times."""
    jobs: list[str] = []

    def launch(path, rows):
        jobs.append(path)
        us = 76.0 if path else 100.0
        return [(CHALLENGER if path else DEFAULT,
                 us * (1.9 if len(jobs) in slow_jobs else 1.0) * 1e-6) for _ in rows]
    return launch, jobs


@pytest.mark.timeout(120)
@pytest.mark.parametrize("slow_jobs, rounds, kept", [
    # one slow job with the rules (round 3), one without (round 9): seen on both sides
    ({6, 17}, 9, True),
    # one slow job with the rules, never without: every round up to LONELY_ROUNDS, dropped
    ({6}, across.LONELY_ROUNDS[True], False),
    # a slow mode of its own (five jobs with the rules): no more than `most` rounds
    ({2, 3, 6, 10, 11, 14}, across.ROUNDS[True][1], False),
])
def test_a_mode_of_one_job_on_one_side_asks_for_more_rounds(
        slow_jobs: set[int], rounds: int, kept: bool) -> None:
    decisions, checks = tuned_in_one_job(76.0)
    launch, jobs = hiccup_launch(slow_jobs)
    (check,) = verify_in_jobs(3, decisions, checks, "inproc", launch, True).values()
    assert len(jobs) == 2 * rounds and check.kept is kept
    assert all(not across.lonely(r) for r in check.rows) is (rounds < 16)
