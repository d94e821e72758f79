"""The fault campaign's short version: a few trials of each kind fixed so far must meet issue
15's must-holds — no hang, no silent wrong result, no process or shared memory left, every
rank that should raise names the failed rank or the mismatch within 2 s — and the kinds not
fixed yet are expected to fail, each naming its defect (the full campaign and its results:
docs/reliability.md)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import collops
from collops.cli import main
from collops.faults import calls as fault_calls
from collops.faults.campaign import (
    KINDS,
    Outcome,
    Trial,
    abort_of,
    mpiexec,
    run_campaign,
    run_trial,
)
from collops.faults.rank_program import Plan
from collops.faults.report import describe, problems, summarise


def _trials(transport: str, kind: str, trials: int = 2, **kw) -> list[Outcome]:
    outcomes = run_campaign([transport], [kind], trials, seed=KINDS.index(kind), **kw)
    assert len(outcomes) == trials
    return outcomes


def _assert_hold(outcomes: list[Outcome]) -> None:
    found = {f"{o.transport} {o.kind} seed={o.seed} victim={o.victim} at={o.at}": problems(o)
             for o in outcomes}
    assert not any(found.values()), found


@pytest.mark.timeout(90)
@pytest.mark.parametrize("transport,kind,trials", [
    ("shm", "kill", 2), ("shm", "raise", 1), ("shm", "mismatch-root", 1), ("shm", "sigint", 1),
    ("threads", "raise", 2), ("threads", "mismatch-root", 2),
])
def test_fixed_fault_kinds_meet_the_must_holds(transport, kind, trials):
    _assert_hold(_trials(transport, kind, trials, calls=24))


@pytest.mark.timeout(60)
def test_threads_a_rank_returning_early_is_named_by_its_peers():
    _assert_hold(_trials("threads", "return", 1, calls=24, call_timeout=2.0))


def _calls_checked(comm: collops.Comm) -> list[tuple[str, bool]]:
    f = fault_calls
    calls = f.make_calls(15, 40, comm.size, large=False, p2p=True)
    return [(c.collective, f.same_result(f.invoke(comm, c, timeout=20.0),
                                         f.expected(c, comm.rank, comm.size))) for c in calls]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", ["inproc", "shm"])
def test_the_campaigns_point_to_point_calls_give_numpys_answers(transport):
    got = collops.spawn(_calls_checked, 3, transport=transport, timeout=100)
    assert all(ok for rank in got for _, ok in rank), got
    assert {c for c, _ in got[0]} >= set(fault_calls.P2P)  # each kind of message among them


def _p2p_fault_trials(transport: str, kind: str, call: str, trials: int, tmp: Path,
                      **kw) -> list[Outcome]:
    """Trials whose fault comes at a point-to-point ``call`` (made by the faulty rank: a
    ``send``'s sender)."""
    outcomes = []
    rng = np.random.default_rng(15)
    for seed in range(200):
        plan = Plan(folder=str(tmp / f"t{seed}"), seed=seed, calls=24, kind=kind,
                    call_timeout=5.0, delay=0.001)
        calls = plan.call_list(3)
        at = next((i for i in range(1, 19) if calls[i].collective == call), None)
        if at is None:
            continue
        plan.at, plan.victim = at, calls[at].root if call == "send" else seed % 3
        Path(plan.folder).mkdir()
        outcomes.append(run_trial(Trial(transport, kind, 3, plan, kw.get("limit", 30.0)), rng))
        if len(outcomes) == trials:
            return outcomes
    raise AssertionError(f"no {call} in the calls of 200 seeds")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport,kind,call", [
    ("threads", "return", "send"), ("threads", "raise", "isend_irecv"),
    ("shm", "kill", "sendrecv"), ("shm", "return", "isend_irecv"), ("shm", "raise", "send"),
])
def test_faults_at_point_to_point_calls_meet_the_must_holds(transport, kind, call, tmp_path):
    outcomes = _p2p_fault_trials(transport, kind, call, 1, tmp_path)
    assert all(o.fault_call == call for o in outcomes), outcomes
    _assert_hold(outcomes)


@pytest.mark.timeout(150)
@pytest.mark.skipif(mpiexec() is None, reason="no mpiexec (pip install 'collops[mpi]')")
@pytest.mark.parametrize("call", ["send", "isend_irecv"])
def test_mpi_a_rank_returning_early_at_a_point_to_point_call_is_named(call, tmp_path):
    # the rank that returned waits alive in MPI_Finalize: its peers used to time out
    pytest.importorskip("mpi4py")
    _assert_hold(_p2p_fault_trials("mpi", "return", call, 1, tmp_path, limit=40.0))


@pytest.mark.timeout(150)
@pytest.mark.skipif(mpiexec() is None, reason="no mpiexec (pip install 'collops[mpi]')")
def test_mpi_a_killed_rank_is_named_by_the_survivors_or_ends_the_job():
    pytest.importorskip("mpi4py")
    outcomes = _trials("mpi", "kill", 2, calls=24, call_timeout=3.0, limit=20.0)
    # (MPICH's own ``mpich_shm_*`` file, which MPICH leaves when one of its ranks is
    # SIGKILLed, must not be left either: `liveness.unlink_mpich_segments`)
    found = {f"seed={o.seed} victim={o.victim} exit={o.exit_code} stderr={o.stderr_tail!r}":
             problems(o) for o in outcomes}
    assert not any(found.values()), found


def _outcome(**changes) -> Outcome:
    """A passing kill trial on 3 ranks (rank 1 killed), changed as given."""
    peer_failed = {"status": "error", "error": "PeerFailed", "failed_rank": 1, "wrong": [],
                   "t": 10.2}
    base = dict(transport="shm", kind="kill", ranks=3, seed=0, victim=1, at=5, exit_code=137,
                hung=False, seconds=1.0, fault_time=10.0, end_time=11.0,
                records={0: dict(peer_failed), 1: None, 2: dict(peer_failed)})
    return Outcome(**{**base, **changes})


def test_an_mpi_job_aborted_over_a_dead_peer_counts_for_its_silent_ranks():
    """A survivor that aborts the MPI job because a peer of its node died (at exit, or
    blocked in MPI's own call) names the dead rank on stderr: the ranks ended with the job
    are judged by that name, whatever the launcher's exit code."""
    for line in ("collops: MPI rank 1 (pid 8413) is gone; rank 2 aborts the job instead of "
                 "finalizing MPI\n",
                 "collops: MPI rank 1 (pid 8413) died while rank 0 was blocked in "
                 "MPI_Allreduce; aborting the job\n"):
        aborted, named = abort_of("other output\n" + line)
        silent = _outcome(transport="mpi", exit_code=1, records={0: None, 1: None, 2: None},
                          aborted_by=aborted, abort_named=named)
        assert problems(silent) == [], line
        assert problems(replace(silent, abort_named=0)), line  # named the wrong rank
    assert abort_of("collops: uncaught ValueError on MPI rank 2 of 3\n") == (2, None)


HYDRA_BROKEN_PIPE = (
    "[proxy:0@vm] HYDU_sock_write (sock.c:250): write error (Broken pipe)\n"
    "[mpiexec@vm] main (mpiexec.c:270): process manager error waiting for completion\n")


def test_an_mpi_job_the_launcher_ended_after_a_kill_is_accepted_and_said_so():
    """Issue 15 asks collops to notice a dead rank "where the launcher does not end the job
    itself": MPICH's mpiexec ends it itself with the victim's signal (exit 9) or, when the
    killed rank's pipe broke mid-message, with its own process-manager failure (exit 255)."""
    silent = dict(transport="mpi", records={0: None, 1: None, 2: None})
    for exit_code, tail in ((9, ""), (255, HYDRA_BROKEN_PIPE)):
        ended = _outcome(exit_code=exit_code, stderr_tail=tail, **silent)
        assert problems(ended) == [], exit_code
        assert describe(ended, 0) == "ended by mpiexec"
    # no launcher's word: the silent survivors are collops' failure
    assert len(problems(_outcome(exit_code=255, **silent))) == 2
    assert len(problems(_outcome(exit_code=1, stderr_tail=HYDRA_BROKEN_PIPE, **silent))) == 2
    # only a killed rank; and not on the transports collops launches itself
    assert problems(_outcome(exit_code=9, kind="raise", **silent))
    assert problems(_outcome(exit_code=9, records={0: None, 1: None, 2: None}))


def test_the_judge_passes_a_clean_trial_and_names_every_kind_of_failure():
    assert problems(_outcome()) == []
    completed = {"status": "completed", "wrong": []}
    late = {"status": "error", "error": "PeerFailed", "failed_rank": 1, "wrong": [], "t": 13.0}
    wrong = {"status": "error", "error": "PeerFailed", "failed_rank": 1, "wrong": [3],
             "t": 10.1}
    cases = {
        "hung": _outcome(hung=True, exit_code=None),
        "does not name the cause": _outcome(records={0: completed, 1: None, 2: None}),
        "wrong results at calls [3]": _outcome(records={0: wrong, 1: None, 2: wrong}),
        "error after 3.00 s": _outcome(records={0: late, 1: None, 2: late}),
        "2 processes left": _outcome(processes_left=2),
        "4096 bytes left": _outcome(shm_left={"collops-x": 4096}),
        "exit code 0": _outcome(exit_code=0),
        "not 130": _outcome(kind="sigint", exit_code=1),
    }
    for expected, outcome in cases.items():
        assert any(expected in p for p in problems(outcome)), (expected, problems(outcome))
    row = summarise([_outcome(), cases["hung"]])[0]
    assert (row["trials"], row["failed"], row["hangs"]) == (2, 1, 1)


@pytest.mark.timeout(60)
def test_the_command_prints_the_table_and_says_whether_the_must_holds_hold(capsys, tmp_path):
    saved = tmp_path / "trials.json"
    assert main(["faults", "--transports", "threads", "--kinds", "raise", "--trials", "1",
                 "--calls", "12", "--json", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "threads" in out and "raise" in out and "yes" in out
    assert main(["faults", "--report", str(saved)]) == 0
    assert capsys.readouterr().out == out
    with pytest.raises(SystemExit):
        main(["faults", "--kinds", "meteor"])


def _early_return_in_a_ring(comm: collops.Comm, folder: str) -> None:
    """Rank 0 returns at once; ranks 1 and 2 run a ring allreduce, where rank 2 waits only for
    rank 1, which fails waiting for rank 0: each writes the rank its error names."""
    if comm.rank == 0:
        return
    try:
        comm.allreduce(np.ones(3000), "sum", algorithm="ring", timeout=20.0)
    except collops.PeerFailed as exc:
        Path(folder, f"rank{comm.rank}").write_text(json.dumps(exc.failed_rank))
        raise


@pytest.mark.timeout(60)
def test_shm_every_survivor_names_the_rank_that_returned_early(tmp_path):
    # rank 2 hears first of rank 1's failure, which followed from rank 0's early return
    # (issue 15: every survivor names the failed rank; the launcher names the first cause)
    with pytest.raises(collops.RankFailed):
        collops.spawn(_early_return_in_a_ring, 3, str(tmp_path), transport="shm", timeout=40)
    named = {r: json.loads(Path(tmp_path, f"rank{r}").read_text()) for r in (1, 2)}
    assert named == {1: 0, 2: 0}


def _early_return_before_a_receive_chain(comm: collops.Comm, folder: str) -> None:
    """Rank 0 returns at once; rank 1 waits in a receive from rank 0, rank 2 in a receive
    from rank 1 (blocking or not): each writes the rank its error names."""
    if comm.rank == 0:
        return
    try:
        if comm.rank == 1:
            comm.recv(source=0, timeout=20.0)
        else:
            comm.irecv(source=1).wait()
    except collops.PeerFailed as exc:
        Path(folder, f"rank{comm.rank}").write_text(json.dumps(exc.failed_rank))
        raise


@pytest.mark.timeout(60)
@pytest.mark.parametrize("transport", ["shm", "inproc"])
def test_a_receive_chain_names_the_rank_that_returned_early(tmp_path, transport):
    # rank 2 hears first of rank 1's failure in a receive, which followed from rank 0's
    # early return (the campaign's point-to-point calls: rank 2 named rank 1 on shm)
    with pytest.raises(collops.RankFailed):
        collops.spawn(_early_return_before_a_receive_chain, 3, str(tmp_path),
                      transport=transport, timeout=40)
    named = {r: json.loads(Path(tmp_path, f"rank{r}").read_text()) for r in (1, 2)}
    assert named == {1: 0, 2: 0}


def _rank_1_never_calls(comm: collops.Comm, folder: str) -> None:
    Path(folder, f"pid{comm.rank}").write_text(str(os.getpid()))
    if comm.rank == 1:
        time.sleep(60)
    comm.allreduce(np.ones(4), "sum")


@pytest.mark.timeout(60)
def test_shm_spawn_timeout_names_the_ranks_not_heard_from_and_stops_every_rank(tmp_path):
    with pytest.raises(collops.CollectiveTimeout, match=r"not heard from: ranks \[1\] "
                       r".*where ranks \[0, 2\] wait"):
        collops.spawn(_rank_1_never_calls, 3, str(tmp_path), transport="shm", timeout=3)
    for r in range(3):
        with pytest.raises(ProcessLookupError):
            os.kill(int(Path(tmp_path, f"pid{r}").read_text()), 0)
