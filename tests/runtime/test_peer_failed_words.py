"""`PeerFailed` says which rank died in which call: "rank 1 died in allgather (call 1, step 4
of ring): …", on threads and over shared memory, through schedules and natives; a shared-
memory `CollectiveTimeout` names the call and the step it waited at."""

from __future__ import annotations

import json
import os
import pickle
import time

import numpy as np
import pytest

import collops
from collops import CollopsError, PeerFailed

#: (transport, algorithm asked for, float64 items): schedules and each shared-memory native
PATHS = [("inproc", None, 4), ("inproc", "ring", 4), ("shm", None, 4), ("shm", "ring", 4),
         ("shm", "shm_direct", 4), ("shm", "shm_stream", 1 << 16), ("shm", "shm_cma", 1 << 16)]


def _rank_1_dies(comm, folder, transport, algorithm, n):
    comm.allreduce(np.ones(2))  # call 0
    if comm.rank == 1:
        time.sleep(0.5)  # the others have left call 0 (on threads they would fail in it)
        if transport == "inproc":
            raise RuntimeError("rank 1 gives up")
        os._exit(3)
    try:
        comm.allgather(np.ones(n), algorithm=algorithm, timeout=30)  # call 1
        seen = "completed"
    except CollopsError as exc:
        seen = f"{type(exc).__name__}: {exc}"
    (folder / f"{comm.rank}.json").write_text(json.dumps(seen))


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("transport", "algorithm", "n"), PATHS,
                         ids=[f"{t}-{a}" for t, a, _ in PATHS])
def test_a_survivor_says_which_rank_died_in_which_call(tmp_path, transport, algorithm, n):
    with pytest.raises(collops.RankFailed):
        collops.spawn(_rank_1_dies, 3, tmp_path, transport, algorithm, n, transport=transport,
                      timeout=60)
    # spawn may return as soon as rank 1 fails, before the survivor threads have reported
    deadline = time.monotonic() + 30
    while len(list(tmp_path.glob("*.json"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    seen = {int(p.stem): json.loads(p.read_text()) for p in tmp_path.glob("*.json")}
    assert sorted(seen) == [0, 2], seen
    for text in seen.values():
        assert text.startswith("PeerFailed: rank 1 died in allgather (call 1, "), seen
        if algorithm == "ring":
            assert "step " in text and " of ring)" in text, seen
        elif algorithm is not None:
            assert f"through {algorithm})" in text, seen


def test_peer_failed_keeps_its_fields_through_pickling():
    exc = PeerFailed(2, "its process ended")
    exc.locate("bcast", 7, "step 3 of binomial")
    exc.locate("allreduce", 9)  # the first call named stays
    back = pickle.loads(pickle.dumps(exc))
    assert str(back) == str(exc) == ("rank 2 died in bcast (call 7, step 3 of binomial): its "
                                     "process ended")
    assert back.failed_rank == 2


def _rank_1_late(comm, algorithm, n):
    comm.barrier()
    if comm.rank == 1:
        time.sleep(2.5)
        return "late"
    try:
        comm.allreduce(np.ones(n), algorithm=algorithm, timeout=0.5)
    except collops.CollectiveTimeout as exc:
        return str(exc)
    return "completed"


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("algorithm", "n"), [("shm_direct", 4), ("shm_stream", 1 << 16)])
def test_a_shm_timeout_names_the_call_and_the_step(algorithm, n):
    text = collops.spawn(_rank_1_late, 2, algorithm, n, transport="shm", timeout=60)[0]
    assert f"rank 0: allreduce[{algorithm}] did not complete" in text, text
    assert "waiting at call 1, step: " in text and "not heard from ranks [1]" in text, text
