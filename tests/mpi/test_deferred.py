"""Mismatches where some rank does not wait for every rank's entry on the node's board
(`collops.mpi.board`): a small bcast's root 0 enters MPI at once and checks its readers'
entries at its next call, a barrier is its agreement. Under real ``mpiexec`` on 2 and 3 ranks
(`scripts/deferred_mismatch.py`), at 8 B and 8 MiB: every rank raises within the job's
timeout, a mismatch found late is raised by the root at its next call naming both calls, and
every later call on the communicator is refused (`CommunicatorBroken`) on every rank, so MPI's
broadcast left unmatched is never met."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("mpi4py")

from tests.mpi.harness import MPIEXEC, by_rank, mpirun  # noqa: E402

pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich)")

SMALL, LARGE = 1, 1 << 20  # float64 items: 8 B and 8 MiB
#: what each case's mismatched call is, in the words of the messages
CALLS = {"kind": ("bcast", "allreduce"), "third": ("root=0", "root=1"),
         "reduce": ("reduce", "allreduce"),
         "barrier": ("barrier", "allreduce"), "op": ("op=sum", "op=max")}


def run(case: str, n: int, ranks: int, options: tuple[str, ...] = ()) -> dict[int, dict]:
    return run_script("deferred_mismatch.py", ranks, case, str(n), options=options)


def run_script(script: str, ranks: int, *args: str, options: tuple[str, ...] = ()
               ) -> dict[int, dict]:
    proc = mpirun(ranks, script, *args, timeout=120, options=options)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return by_rank(proc, ranks)


def steps(report: dict) -> dict[str, tuple[str | None, str]]:
    return {step: (error, message) for step, error, message in report["results"]}


def names_both(message: str, case: str) -> bool:
    if case == "root":  # two roots (on 3 ranks a rank may see the other non-root's first)
        roots = re.findall(r"root=(\d)", message.split(" at the same point")[0])
        return len(roots) == 2 and roots[0] != roots[1]
    mine, theirs = CALLS[case]
    return mine in message and theirs in message


@pytest.mark.timeout(150)
@pytest.mark.parametrize("case,ranks", [("kind", 2), ("kind", 3), ("root", 2), ("root", 3),
                                        ("third", 2), ("third", 3), ("reduce", 2)])
def test_a_call_that_did_not_wait_finds_the_mismatch_at_its_next_call_and_all_refuse(case,
                                                                                    ranks):
    # a small bcast's root 0 (a 2-rank reduce's rank 1) defers; the others wait
    got = run(case, SMALL, ranks)
    if not got[0]["compiled"]:
        pytest.skip("the compiled runner (where a call may defer) is not built")
    deferring = 1 if case == "reduce" else 0
    root = steps(got[deferring])
    # the root entered MPI without waiting: its call returned, as MPI's own does
    assert root["bad"] == (None, ""), root
    error, message = root["next"]
    assert error == "CollectiveMismatch" and names_both(message, case), root
    assert "found at call #" in message, message
    assert root["after"][0] == "CommunicatorBroken", root
    for rank in (r for r in range(ranks) if r != deferring):
        seen = steps(got[rank])
        if case == "third" and ranks == 3 and rank == 1:
            # rank 1 makes root 0's call: it sees rank 2's, and refuses with everyone else
            assert seen["bad"][0] == "CollectiveMismatch", seen
        else:
            assert seen["bad"][0] == "CollectiveMismatch" and names_both(
                seen["bad"][1], case), seen
        assert seen["next"][0] == "CommunicatorBroken", seen
        assert seen["after"][0] == "CommunicatorBroken", seen
        assert "refused" in seen["after"][1], seen


@pytest.mark.timeout(150)
@pytest.mark.parametrize("ranks", [2, 3])
@pytest.mark.parametrize("case,n", [("kind", LARGE), ("root", LARGE), ("third", LARGE),
                                    ("reduce", LARGE),
                                    ("barrier", SMALL), ("barrier", LARGE), ("op", SMALL),
                                    ("op", LARGE)])
def test_a_mismatch_nobody_deferred_raises_at_the_call_and_the_communicator_lives(case, n,
                                                                                 ranks):
    # an 8 MiB bcast's root waits for its readers; a barrier waits for every entry
    for rank, report in run(case, n, ranks).items():
        seen = steps(report)
        error, message = seen["bad"]
        assert error == "CollectiveMismatch", (rank, seen)
        assert f"rank {rank}: called" in message, message
        if not (case == "third" and rank == 1 and ranks == 3):
            assert names_both(message, case), (rank, message)
        assert seen["next"] == (None, "") and seen["after"] == (None, ""), (rank, seen)


@pytest.mark.timeout(150)
def test_a_small_reduce_on_three_ranks_does_not_defer():
    # rank 1 of 3 may sit inside MPI's reduction tree: it waits, everyone raises at the call
    for rank, report in run("reduce", SMALL, 3).items():
        seen = steps(report)
        assert seen["bad"][0] == "CollectiveMismatch" and names_both(seen["bad"][1], "reduce")
        assert seen["next"] == (None, "") and seen["after"] == (None, ""), (rank, seen)


@pytest.mark.timeout(150)
def test_without_the_compiled_runner_nobody_defers():
    got = run("kind", SMALL, 2, ("-genv", "COLLOPS_COMPILED", "0"))
    for rank, report in got.items():
        seen = steps(report)
        assert seen["bad"][0] == "CollectiveMismatch" and names_both(seen["bad"][1], "kind")
        assert seen["next"] == (None, "") and seen["after"] == (None, ""), (rank, seen)


@pytest.mark.timeout(150)
@pytest.mark.parametrize("n", [SMALL, LARGE])
def test_a_reader_whose_out_has_another_dtype_raises_and_the_communicator_lives(n):
    got = run("dtype", n, 2)
    assert steps(got[0]) == {"bad": (None, ""), "next": (None, ""), "after": (None, "")}
    error, message = steps(got[1])["bad"]
    assert error == "ArgumentError" and "out=dtype('float32') on rank 1" in message, message
    assert steps(got[1])["next"] == (None, "")


@pytest.mark.timeout(150)
def test_a_board_barrier_synchronises_flushes_after_sends_and_free_raises_late():
    # `scripts/board_barrier.py`: had one rank run MPI's barrier and the other not, the job
    # would hang (the harness's timeout)
    got = run_script("board_barrier.py", 2)
    for report in got.values():
        assert report["waited"] >= 0.25, report  # rank 1 came 0.3 s late
        assert report["after"] == 2.0 and report["freed"], report
    # no sends, no MPI barrier: the marks stay; rank 0's send is flushed by the next barrier
    assert got[0]["sends"] == [0, 0, 1, 1] and got[0]["marks"] == [[0], [0], [1], [1]], got[0]
    assert got[1]["sends"] == [0, 0, 0, 0] and got[1]["marks"] == [[0]] * 4, got[1]
    error, message = got[0]["free"]
    assert error == "CollectiveMismatch" and "found at freeing the communicator" in message
    assert "bcast" in message and "allreduce" in message, message
    assert got[1]["free"] == [None, ""], got[1]  # it raised at the call, and refuses since
