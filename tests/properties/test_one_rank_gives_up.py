"""An argument only one rank sees is wrong (issue 15 item 7): that rank raises its
`ArgumentError`, every peer that needs it raises `CollectiveMismatch` or `PeerFailed` naming
it — long before its timeout — and the communicator goes on working, call after call."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

import collops

#: the peers' timeout: an error that comes this late is a wait, not a notice
CALL_TIMEOUT = 20.0
SPAWN_TIMEOUT = 90.0
BAD = 1
#: cases whose call is a gather-like one the bad rank gives up after its first phase: a
#: non-root other than it needs only root 0's word for the data phase, so it may complete
#: its part, as an MPI non-root would (root 0 still raises)
OFF_ROOT_NEEDS_NOBODY = ("gatherv misspelt keyword", "gather misspelt keyword, late writer")
#: seconds the third rank waits before it writes: root 0 has raised and left the call by then
LATE = 0.3
#: cases whose bad rank is a gatherv's root given no counts: on shm its blocks' lengths come
#: in the writers' headers (`collops.shm.direct_gatherv`), so it checks its ``out`` once
#: they have arrived; its non-roots needed only its word, and may complete, as MPI's would
ROOT_CHECKS_AFTER = {"shm": ("gatherv out small", "gatherv out large")}


def _bad_call(comm: collops.Comm, case: str) -> Any:
    """The call of ``case``, with its invalid argument on rank `BAD` only."""
    x = np.arange(8.0) * (comm.rank + 1)
    bad = comm.rank == BAD
    if case == "allreduce out":
        return comm.allreduce(x, "sum", out=np.empty(3) if bad else None,
                              timeout=CALL_TIMEOUT)
    if case == "allgather dtype":
        return comm.allgather(np.array([object()] * 8) if bad else x, timeout=CALL_TIMEOUT)
    if case == "alltoall shape":
        return comm.alltoall(np.arange(7.0) if bad else np.arange(6.0), timeout=CALL_TIMEOUT)
    if case == "bound allreduce timeout":  # the call's signature is bound after two calls
        for _ in range(2):
            comm.allreduce(x, "sum", timeout=CALL_TIMEOUT)
        return comm.allreduce(x, "sum", timeout=-1.0 if bad else CALL_TIMEOUT)
    if case.startswith("gatherv out"):  # the root's out is checked once the counts are in
        rows = 100_000 if case.endswith("large") else 2
        return comm.gatherv(np.ones(rows + comm.rank), root=BAD,
                            out=np.empty(1) if bad else None, timeout=CALL_TIMEOUT)
    if case == "gatherv misspelt keyword":  # an algorithm parameter no algorithm takes
        extra = {"recvcounts": (2, 3, 4)} if bad else {}
        return comm.gatherv(np.ones(2 + comm.rank), root=0, timeout=CALL_TIMEOUT, **extra)
    if case == "gather misspelt keyword, late writer":  # the root leaves before rank 2 writes
        if comm.rank == 2:
            time.sleep(LATE)
        extra = {"outt": None} if bad else {}
        return comm.gather(x, root=0, timeout=CALL_TIMEOUT, **extra)
    if case == "allgather_object timeout":
        return comm.allgather_object(comm.rank, timeout=-1.0 if bad else CALL_TIMEOUT)
    if case == "split color":  # the communicator's own checks, before its call takes a number
        return comm.split("red" if bad else 0)
    if case == "split_type":
        return comm.split_type("nodes" if bad else "shared")
    if case == "create group":
        return comm.create([0, 1] if bad else comm.group.incl([0, 1]))
    raise AssertionError(case)


def _one_rank(comm: collops.Comm, case: str) -> dict[str, Any]:
    start = time.monotonic()
    try:
        _bad_call(comm, case)
        got: dict[str, Any] = {"error": None}
    except collops.CollopsError as exc:
        got = {"error": type(exc).__name__, "message": str(exc),
               "failed_rank": getattr(exc, "failed_rank", None)}
    got["seconds"] = time.monotonic() - start
    mine = np.arange(5, dtype=np.int64) * (comm.rank + 1)
    got["after"] = [comm.allreduce(mine, "sum", timeout=CALL_TIMEOUT).tolist()
                    for _ in range(5)]
    return got


@pytest.mark.timeout(180)
@pytest.mark.parametrize("case", ["allreduce out", "allgather dtype", "alltoall shape",
                                  "bound allreduce timeout", "gatherv out small",
                                  "gatherv out large", "gatherv misspelt keyword",
                                  "gather misspelt keyword, late writer",
                                  "split color", "split_type", "create group",
                                  "allgather_object timeout"])
@pytest.mark.parametrize("transport", ["inproc", "shm"])
def test_the_peers_of_a_rank_that_gave_up_are_told(transport, case):
    got = collops.spawn(_one_rank, 3, case, transport=transport, timeout=SPAWN_TIMEOUT)
    assert got[BAD]["error"] == "ArgumentError", got
    for rank, g in enumerate(got):
        completes = (rank != 0 and case in OFF_ROOT_NEEDS_NOBODY) or (
            case in ROOT_CHECKS_AFTER.get(transport, ()))
        if rank != BAD and not (completes and g["error"] is None):
            assert g["error"] in ("CollectiveMismatch", "PeerFailed"), got
            assert f"rank {BAD}" in g["message"], got
            assert g["seconds"] < CALL_TIMEOUT / 2, got
    want = (np.arange(5, dtype=np.int64) * 6).tolist()
    assert all(g["after"] == [want] * 5 for g in got), got
