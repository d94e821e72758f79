"""A receive whose peer died or ended raises instead of hanging; timeouts apply; bad
arguments are `ArgumentError`s naming the argument, the rank and the call."""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

import collops
from collops import ANY_TAG, TAG_UB, ArgumentError, CollectiveTimeout, PeerFailed, RankFailed

pytestmark = pytest.mark.timeout(120)


def _record(path, call):
    """Run ``call``; write what it raised (type, failed rank, seconds) to ``path``."""
    start = time.monotonic()
    try:
        call()
        seen = {"raised": None}
    except (PeerFailed, CollectiveTimeout) as exc:
        seen = {"raised": type(exc).__name__, "failed": getattr(exc, "failed_rank", None),
                "text": str(exc)}
    seen["seconds"] = time.monotonic() - start
    path.write_text(json.dumps(seen))


def _seen(path):
    return json.loads(path.read_text())


def test_a_peer_that_dies_while_a_receive_waits_is_named_within_two_seconds(run, tmp_path):
    where = tmp_path / "rank0.json"

    def body(comm):
        if comm.rank == 0:
            _record(where, lambda: comm.recv(source=1))
            return None
        time.sleep(0.3)
        if run.transport == "shm":
            os._exit(3)  # the process dies
        raise RuntimeError("rank 1 fails")

    with pytest.raises(RankFailed):
        run(body, 2)
    seen = _seen(where)
    assert seen["raised"] == "PeerFailed" and seen["failed"] == 1, seen
    assert seen["seconds"] < 2.3, seen  # 0.3 s before the death, then at most 2 s


def test_a_receive_from_a_rank_that_ended_without_sending_is_an_error(run, tmp_path):
    specific, anyone = tmp_path / "specific.json", tmp_path / "any.json"

    def body(comm):
        if comm.rank == 0:
            _record(specific, lambda: comm.recv(source=1, tag=4))
            _record(anyone, lambda: comm.recv(tag=4))
        elif comm.rank == 2:
            comm.send(np.array([1]), 0, tag=5)  # a message the receives do not take
        return comm.rank

    assert run(body, 3) == [0, 1, 2]
    for path in (specific, anyone):
        seen = _seen(path)
        assert seen["raised"] == "PeerFailed" and seen["failed"] in (1, 2), seen
        assert "exited" in seen["text"], seen


def test_a_synchronous_send_to_a_rank_that_ended_is_an_error(run, tmp_path):
    where = tmp_path / "ssend.json"

    def body(comm):
        if comm.rank == 0:
            time.sleep(0.2)
            _record(where, lambda: comm.ssend(np.ones(2), 1))
        return comm.rank

    run(body, 2)
    seen = _seen(where)
    assert seen["raised"] == "PeerFailed" and seen["failed"] == 1, seen


def test_timeouts_apply_to_receives_and_probes(run):
    def body(comm):
        if comm.rank == 0:
            comm.barrier()
            return None
        out = []
        for call in (lambda: comm.recv(source=0, tag=1, timeout=0.3),
                     lambda: comm.probe(0, 1, timeout=0.3)):
            start = time.monotonic()
            with pytest.raises(CollectiveTimeout) as info:
                call()
            out.append((time.monotonic() - start, str(info.value)))
        comm.barrier()
        return out

    for seconds, text in run(body, 2)[1]:
        assert 0.25 < seconds < 5 and "rank 1" in text and "rank 0" in text, text


def test_collops_timeout_applies(monkeypatch):
    monkeypatch.setenv("COLLOPS_TIMEOUT", "0.3")
    collops.reload_settings()
    try:
        def body(comm):
            if comm.rank == 1:
                with pytest.raises(CollectiveTimeout):
                    comm.recv(source=0)
            else:
                time.sleep(1.5)  # still there when rank 1's receive times out
            return comm.rank
        assert collops.spawn(body, 2, timeout=30) == [0, 1]
    finally:
        monkeypatch.delenv("COLLOPS_TIMEOUT")
        collops.reload_settings()


BAD_CALLS = [
    ("send", "dest", lambda c: c.send(np.ones(2), c.size)),
    ("send", "dest", lambda c: c.send(np.ones(2), -5)),
    ("send", "dest", lambda c: c.send(np.ones(2), collops.ANY_SOURCE)),
    ("isend", "tag", lambda c: c.isend(np.ones(2), 0, -3)),
    ("send", "tag", lambda c: c.send(np.ones(2), 0, TAG_UB + 1)),
    ("ssend", "tag", lambda c: c.ssend(np.ones(2), 0, ANY_TAG)),
    ("send", "x", lambda c: c.send(np.ones((4, 4))[:, 1], 0)),
    ("send", "dest", lambda c: c.send(np.ones(2), 1.5)),
    ("recv", "source", lambda c: c.recv(source=c.size)),
    ("irecv", "tag", lambda c: c.irecv(tag=-7)),
    ("recv", "out", lambda c: c.recv(np.ones((4, 4))[:, 1], source=0)),
    ("probe", "source", lambda c: c.probe(-9)),
    ("send_object", "tag", lambda c: c.send_object(1, 0, tag=TAG_UB + 1)),
]


@pytest.mark.parametrize("call,argument,bad", BAD_CALLS,
                         ids=[f"{c}-{a}-{i}" for i, (c, a, _) in enumerate(BAD_CALLS)])
def test_bad_arguments_name_the_argument_the_rank_and_the_call(call, argument, bad):
    def body(comm):
        with pytest.raises(ArgumentError) as info:
            bad(comm)
        error = info.value
        return error.call, error.argument, error.rank, f"on rank {comm.rank}" in str(error)

    for rank, got in enumerate(collops.spawn(body, 2, timeout=30)):
        assert got == (call, argument, rank, True)
