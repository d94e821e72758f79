"""Binding ranks to CPUs (`collops.transport.placement`): the plan, and what the ranks see."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

import collops
from collops.errors import ArgumentError
from collops.runtime.launcher import launch_program
from collops.transport import placement

pytestmark = pytest.mark.timeout(60)

CPUS = placement.usable_cpus()


@pytest.mark.parametrize("cpus", [[0], [0, 1], [3, 5, 8], [0, 1, 2, 3]])
@pytest.mark.parametrize("nprocs", [1, 2, 3, 4, 8])
def test_plan_pins_round_robin_when_told_or_when_ranks_outnumber_cpus(
        nprocs: int, cpus: list[int]) -> None:
    round_robin = [cpus[r % len(cpus)] for r in range(nprocs)]
    assert placement.plan_binding(nprocs, "core", cpus) == round_robin
    assert placement.plan_binding(nprocs, "none", cpus) == [None] * nprocs
    auto = placement.plan_binding(nprocs, "auto", cpus)
    assert auto == (round_robin if nprocs > len(cpus) else [None] * nprocs)


def test_an_unknown_policy_is_an_argument_error_naming_the_call() -> None:
    with pytest.raises(ArgumentError, match=r"spawn: argument bind_to='socket'.*auto, core"):
        placement.plan_binding(2, "socket", [0, 1], "spawn")
    with pytest.raises(ArgumentError, match=r"spawn: argument bind_to='numa'"):
        collops.spawn(lambda comm: None, 2, transport="shm", bind_to="numa")


def test_the_job_cpu_count_comes_from_the_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(placement.JOB_CPUS_ENV, "7")
    assert placement.job_cpu_count() == 7
    monkeypatch.setenv(placement.JOB_CPUS_ENV, "garbage")
    assert placement.job_cpu_count() == len(CPUS)
    monkeypatch.delenv(placement.JOB_CPUS_ENV)
    assert placement.job_cpu_count() == len(CPUS)


def test_the_plan_reaches_the_ranks_through_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    env = placement.rank_environment([0, 1, 0, None], 2)
    assert env == {placement.JOB_CPUS_ENV: "2", placement.BINDING_ENV: "0,1,0,-"}
    monkeypatch.setenv(placement.BINDING_ENV, env[placement.BINDING_ENV])
    assert placement.binding_of_job(4) == [0, 1, 0, None]
    assert placement.binding_of_job(3) == [None] * 3  # another job's plan: not trusted
    monkeypatch.setenv(placement.BINDING_ENV, "0,x")
    assert placement.binding_of_job(2) == [None, None]


def _where(comm: collops.Comm) -> tuple[list[int], int, bool, list[bool]]:
    t = comm.transport
    return (sorted(os.sched_getaffinity(0)), placement.job_cpu_count(), t.oversubscribed,
            [t.shares_core(r) for r in range(comm.size)])


@pytest.mark.parametrize("nprocs", [2, 4])
@pytest.mark.parametrize("policy", ["auto", "core", "none"])
def test_spawned_ranks_are_pinned_as_planned(nprocs: int, policy: str) -> None:
    plan = placement.plan_binding(nprocs, policy, CPUS)
    seen = collops.spawn(_where, nprocs, transport="shm", bind_to=policy)
    for rank, (affinity, job_cpus, oversubscribed, shares) in enumerate(seen):
        assert affinity == (CPUS if plan[rank] is None else [plan[rank]])
        # a pinned rank sees one CPU, yet the job is oversubscribed only if ranks > CPUs
        assert job_cpus == len(CPUS)
        assert oversubscribed == (nprocs > len(CPUS))
        # the peers it yields to at once: pinned to its own CPU
        assert shares == [r != rank and plan[rank] is not None and plan[r] == plan[rank]
                          for r in range(nprocs)]
    assert sorted(os.sched_getaffinity(0)) == CPUS  # the parent is left alone


@pytest.mark.parametrize("policy", ["core", "none"])
def test_collops_run_pins_program_ranks(tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                        policy: str) -> None:
    program = tmp_path / "where.py"
    program.write_text(textwrap.dedent("""
        import os
        print(os.environ["COLLOPS_RANK"], sorted(os.sched_getaffinity(0)),
              os.environ["COLLOPS_JOB_CPUS"])
    """))
    assert launch_program(3, [str(program)], bind_to=policy) == 0
    lines = sorted(capfd.readouterr().out.splitlines())
    plan = placement.plan_binding(3, policy, CPUS)
    assert lines == [f"{r} {CPUS if plan[r] is None else [plan[r]]} {len(CPUS)}"
                     for r in range(3)]


def test_the_run_command_takes_bind_to(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    from collops.cli import main

    program = tmp_path / "where.py"
    program.write_text("import os\nprint(sorted(os.sched_getaffinity(0)))\n")
    assert main(["run", "-n", "2", "--bind-to", "core", str(program)]) == 0
    assert sorted(capfd.readouterr().out.splitlines()) == sorted(
        f"{[CPUS[r % len(CPUS)]]}" for r in range(2))
    with pytest.raises(SystemExit) as stop:
        main(["run", "-n", "2", "--bind-to", "socket", str(program)])
    assert stop.value.code == 2
    assert "--bind-to: invalid choice: 'socket'" in capfd.readouterr().err


def test_a_cpu_that_cannot_be_had_leaves_the_process_where_it_was() -> None:
    before = os.sched_getaffinity(0)
    placement.pin(4096)  # no such CPU: EINVAL, not an exception out of a rank's start
    assert os.sched_getaffinity(0) == before
    placement.pin(None)
    assert os.sched_getaffinity(0) == before
