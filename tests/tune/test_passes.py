"""The tuner on a machine whose speed drifts, on threads with a fake clock: a state the machine
is in for one pass makes no rule; the verification drops a rule that loses once re-timed;
protocol settings are timed with their own tuning file in force and become protocol rules."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import collops
from collops import config
from collops.algorithms import tuning
from collops.algorithms.tuning import load_tuning
from collops.tune.grid import measure_job
from collops.tune.measure import Effort
from collops.tune.protocols import Knob
from collops.tune.table import machine, write_table
from collops.tune.verify import verify_job

#: passes of two repetitions, no refinement, short verification: a small fake run
EFFORT = Effort(passes=3, repetitions=2, batch_seconds=0.01, refinements=0, warmup=1,
                verify_rounds=3)
#: the candidate that wins only while the machine is slow (the defaults are copy-heavy)
CHALLENGER = "rabenseifner"


def drifting_timer(slow_batches: int):
    """A rank's clock: for its first ``slow_batches`` timed batches of each candidate and
    size (the first pass), every algorithm but the challenger runs ten times slower."""
    seen: dict[tuple[str, int], int] = {}

    def timer(label, size, call, iterations):
        if iterations > 1:
            seen[label, size] = seen.get((label, size), 0) + 1
        slow = 0 < seen.get((label, size), 0) <= slow_batches
        us = (55 if slow else 50) if label == CHALLENGER else (400 if slow else 40)
        return us * 1e-6 * iterations
    return timer


def run(effort: Effort, timer_for, sizes=(8, 64 * 1024), knobs=()):
    def body(comm):
        return measure_job(comm, ["allreduce"], list(sizes), effort, timer_for(comm),
                           knobs=knobs)["allreduce"]
    return collops.spawn(body, 3)[0]


@pytest.mark.timeout(120)
def test_a_pass_where_the_defaults_are_slow_makes_no_rule():
    decisions = run(EFFORT, lambda comm: drifting_timer(EFFORT.repetitions))
    assert all(d.default.algorithm != CHALLENGER for d in decisions)
    # in the first pass the challenger won every round; in the others it lost
    assert all(min(d.default.samples) < 50e-6 < max(d.default.samples) for d in decisions)
    assert not any(d.changed for d in decisions)
    # the same world measured in one pass (as before) would have made a rule
    one = Effort(passes=1, repetitions=5, batch_seconds=0.01, refinements=0, warmup=1)
    assert all(d.changed and d.best.algorithm == CHALLENGER
               for d in run(one, lambda comm: drifting_timer(one.repetitions)))


def steady_timer(verify_loses: bool):
    """The challenger wins by a third in the passes; once the rules are in force (labels
    ``tuned:…`` of the verification) it either still wins or loses by half."""
    def timer(label, size, call, iterations):
        if label.startswith("tuned:"):
            us = 60 if verify_loses else 30
        elif label.startswith("defaults:"):
            us = 40
        else:
            us = 30 if label == CHALLENGER else 40
        return us * 1e-6 * iterations
    return timer


@pytest.mark.timeout(120)
@pytest.mark.parametrize("loses", [False, True])
def test_the_verification_keeps_a_rule_that_holds_and_drops_one_that_loses(
        tmp_path: Path, loses: bool) -> None:
    def body(comm):
        decisions = measure_job(comm, ["allreduce"], [8, 64 * 1024], EFFORT,
                                steady_timer(loses), knobs=())
        return decisions, verify_job(comm, decisions, "inproc", EFFORT, steady_timer(loses))

    decisions, checks = collops.spawn(body, 3)[0]
    assert all(d.changed and d.best.algorithm == CHALLENGER for d in decisions["allreduce"])
    (check,) = checks.values()
    # the file was in force for the tuned rounds: the rule's algorithm ran at both sizes
    assert [r.tuned_algorithm for r in check.rows] == [CHALLENGER, CHALLENGER]
    assert [r.size for r in check.rows] == [8, 64 * 1024]
    assert check.kept is not loses
    path = tmp_path / "t.toml"
    path.write_text(write_table({3: decisions}, machine("inproc", [3], "test"), "inproc",
                                {3: checks}))
    table = load_tuning(str(path))
    if loses:
        assert "allreduce" not in table.rules
        assert "# dropped after verification: allreduce rabenseifner" in path.read_text()
    else:
        (rule,) = table.rules["allreduce"]
        assert rule.algorithm == CHALLENGER
        assert "verified_ratio = [0.75, 0.75]" in path.read_text()


@pytest.mark.timeout(120)
def test_a_protocol_setting_is_timed_in_force_and_written_as_a_protocol_rule(
        tmp_path: Path) -> None:
    knob = Knob("shm_stream", "by_reference", (True, False), None)
    spec = collops.make_spec("allreduce", 3, np.float64, count=8192, op=collops.SUM)
    assert tuning.setting("shm_stream", "by_reference", spec).value is False  # built in
    seen: set[tuple[str, bool]] = set()

    def timer_for(comm):
        def timer(label, size, call, iterations):
            # what a call of this size reads as the setting now, with the file in force
            mine = collops.make_spec("allreduce", 3, np.float64, count=size // 8,
                                     op=collops.SUM)
            value = tuning.setting("shm_stream", "by_reference", mine,
                                   config.settings.tuning_file).value
            seen.add((label, bool(value)))
            return (25 if value and size > 8 else 40) * 1e-6 * iterations
        return timer

    decisions = run(EFFORT, timer_for, sizes=(8, 8192), knobs=(knob,))
    big = [d for d in decisions if d.size == 8192]
    assert big[0].best.setting == ("shm_stream.by_reference", True) and big[0].changed
    assert not [d for d in decisions if d.size == 8][0].changed
    # the setting was in force exactly while its candidate was timed
    assert all(value == ("by_reference=True" in label) for label, value in seen)
    path = tmp_path / "t.toml"
    path.write_text(write_table({3: {"allreduce": decisions}}, machine("inproc", [3], "test"),
                                "inproc"))
    table = load_tuning(str(path))
    assert "allreduce" not in table.rules
    assert tuning.setting("shm_stream", "by_reference", spec, str(path)).value is True
    small = collops.make_spec("allreduce", 3, np.float64, count=1, op=collops.SUM)
    assert tuning.setting("shm_stream", "by_reference", small, str(path)).value is False
    other = collops.make_spec("allgather", 3, np.float64, count=8192)
    assert tuning.setting("shm_stream", "by_reference", other, str(path)).value is False


def test_the_ranks_of_a_threads_job_share_scratch_files_until_the_last_closes() -> None:
    from collops.tune.protocols import Scratch

    # one rank done with its files while another, already further, writes the next ones
    first, second = Scratch(), Scratch()
    first.close()
    path = Path(second.write("# the next candidate\n"))
    assert path.read_text() == "# the next candidate\n"
    first.close()  # closing twice changes nothing
    assert path.exists()
    second.close()
    assert not path.parent.exists()


def test_a_knob_for_some_collectives_is_timed_for_those_only() -> None:
    from collops.tune.protocols import KNOBS, alternatives

    def timed(spec: collops.CallSpec) -> set[str]:
        return {knob.name for knob, _ in alternatives(KNOBS, spec, "shm_stream")}

    reduce = collops.make_spec("reduce", 4, np.float64, count=1 << 17, op=collops.SUM)
    allgather = collops.make_spec("allgather", 4, np.float64, count=1 << 17)
    assert {"fold_as_read", "by_reference"} <= timed(reduce)
    assert "fold_as_read" not in timed(allgather) and "by_reference" in timed(allgather)
