"""A machine that changes state for minutes: a default slow during the whole grid and its
verification, fast before and after, drops a rule that only beat the slow default; a rule
faster in every state is kept. Fake clocks and fake job launchers."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import collops
from collops.algorithms.tuning import load_tuning
from collops.tune import state
from collops.tune.across import verify_in_jobs
from collops.tune.grid import measure_job
from collops.tune.jobs import JobRule, rule_lines
from collops.tune.measure import Effort
from collops.tune.table import machine, write_table
from collops.tune.verify import Row, verify_job

EFFORT = Effort(passes=2, repetitions=2, batch_seconds=0.01, refinements=0, warmup=1,
                verify_rounds=3)
DEFAULT, CHALLENGER = "ring", "rabenseifner"
#: the default's µs per call in the VM's slow-copy state and out of it (issue 21's reduce)
SLOW, FAST = 36.0, 10.7


def row(tuned: list[float], default: list[float]) -> Row:
    return Row("allreduce", 65536, DEFAULT, CHALLENGER, tuple(x * 1e-6 for x in default),
               tuple(x * 1e-6 for x in tuned))


def test_a_default_faster_at_either_end_than_in_the_verification_refuses_a_rule() -> None:
    verified = row([27, 27.5, 26.8, 27.2], [36, 35, 37, 36.5])
    assert state.refusal(verified, None, None) == ""
    assert state.refusal(verified, 36.2e-6, (35.8e-6, 27.1e-6)) == ""  # one state throughout
    at_end = state.refusal(verified, None, (10.7e-6, 27.7e-6))
    assert "after the verification" in at_end and "10.7 µs" in at_end
    at_start = state.refusal(verified, 10.7e-6, (36e-6, 27e-6))
    assert "before the grid" in at_start and "26.8 µs at best" in at_start
    # faster than the default in the other state too: kept
    assert state.refusal(row([8, 8.2, 7.9, 8.1], [36, 35, 37, 36.5]), 10.7e-6,
                         (10.7e-6, 8e-6)) == ""
    # the default slower at the end than in the verification, the rules still faster: kept
    assert state.refusal(verified, None, (90e-6, 60e-6)) == ""


class Machine:
    """The fake clock of the jobs: the machine is in its slow-copy state while ``slow``."""

    def __init__(self, challenger_us: float) -> None:
        self.slow = False
        self.challenger_us = challenger_us
        self.jobs: list[tuple[str, bool]] = []

    def us(self, algorithm: str) -> float:
        if algorithm == CHALLENGER:
            return self.challenger_us
        return SLOW if self.slow else FAST

    def launch(self, path, rows):
        """A job running each row with the algorithm the file gives it (the default without
        a file) in the machine's state now."""
        algorithm = DEFAULT
        if path:
            with open(path, "rb") as f:
                algorithm = tomllib.load(f)["allreduce"]["rule"][0]["algorithm"]
        self.jobs.append((path, self.slow))
        return [(algorithm, self.us(algorithm) * 1e-6) for _ in rows]

    def tuning_job(self):
        """The passes and the in-job verification, in the machine's state now."""
        def timer(label, size, call, iterations):
            return self.us(label.split(":", 1)[-1]) * 1e-6 * iterations

        def body(comm):
            decisions = measure_job(comm, ["allreduce"], [65536], EFFORT, timer, knobs=())
            return decisions, verify_job(comm, decisions, "inproc", EFFORT, timer)
        return collops.spawn(body, 3)[0]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("challenger_us, kept", [(27.0, False), (8.0, True)])
def test_a_state_lasting_the_grid_and_the_verification_cannot_keep_a_losing_rule(
        tmp_path: Path, challenger_us: float, kept: bool) -> None:
    m = Machine(challenger_us)
    first = state.before(m.launch, [("allreduce", 65536)])
    assert first == {("allreduce", 65536): pytest.approx(FAST * 1e-6)}
    m.slow = True  # for minutes: the grid, its verification and the jobs of their own
    decisions, checks = m.tuning_job()
    checks = verify_in_jobs(3, decisions, checks, "inproc", m.launch, True)
    (check,) = checks.values()
    assert check.kept and check.jobs  # every verification saw the slow default only
    m.slow = False
    scratch = tmp_path / "rules.toml"

    def write(c, rules):
        assert rules == []
        scratch.write_text(write_table({3: decisions}, {}, "inproc", {3: c}))
        return str(scratch)
    judged, wide = state.bracketed(checks, [], first, m.launch, write)
    (check,) = judged.values()
    assert wide == []
    assert check.kept is kept and bool(check.refused) is not kept
    assert m.jobs[-2:] == [("", False), (str(scratch), False)]  # the last round, one state
    path = tmp_path / "t.toml"
    path.write_text(write_table({3: decisions}, machine("inproc", [3], "test"), "inproc",
                                {3: judged}))
    rules = load_tuning(str(path)).rules.get("allreduce", [])
    assert [r.algorithm for r in rules] == ([CHALLENGER] if kept else [])
    if not kept:
        assert "verified, then refused: allreduce 65536 B: the default took 10.7 µs after" \
            in path.read_text()


def test_nothing_kept_means_no_last_round() -> None:
    m = Machine(8.0)
    dropped = JobRule("p2p_cell_bytes", 4096, 1024, 2, (("pingpong", 1024),), (5.0,),
                      (9.0,), 2)
    assert state.bracketed({}, [dropped], {}, m.launch, lambda c, r: "") == ({}, [dropped])
    assert m.jobs == []


@pytest.mark.parametrize("at_end, kept", [((1.0e-6, 5.0e-6), False), ((9.0e-6, 5.0e-6), True)])
def test_a_job_wide_setting_is_refused_where_the_end_shows_another_state(
        at_end: tuple[float, float], kept: bool) -> None:
    # verified while the 1 KiB ping-pong's default took 9 µs; the setting 5 µs
    verified = Row("pingpong", 1024, "p2p", "p2p (job-wide settings)", (9e-6, 9.2e-6, 8.9e-6),
                   (5e-6, 5.1e-6, 4.9e-6))
    rule = JobRule("p2p_cell_bytes", 4096, 1024, 2, (("pingpong", 1024),), (5.0,), (9.0,), 2,
                   (verified,), kept=True)
    launched: list[str] = []

    def launch(path, rows):
        launched.append(path)
        assert rows == [("pingpong", 1024)]
        return [("p2p", at_end[1] if path else at_end[0])]
    checks, (judged,) = state.bracketed({}, [rule], {}, launch, lambda c, r: "file.toml")
    assert launched == ["", "file.toml"] and checks == {}
    assert judged.kept is kept
    lines = rule_lines(judged, "test")
    if kept:
        assert lines[0].startswith("[[protocols.shm.p2p_cell_bytes]]")
    else:
        assert lines == ["# dropped after verification: protocols.shm.p2p_cell_bytes = 4096, "
                         "2 ranks: verified, then refused: pingpong 1024 B: the default took "
                         "1.0 µs after the verification (9.0 µs in the verification), the "
                         "rules 5.0 µs: the machine changed state"]
