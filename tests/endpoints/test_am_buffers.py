"""Active-message collectives as PAMI has them: a two-phase dispatch callback names the buffer
its data lands in, the root's own callback runs, completions come in PAMI's order."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

import collops
from collops.endpoints import Client, DispatchError, Xfer
from collops.errors import ArgumentError
from tests.support.endpoints import drive

TRANSPORTS = ["inproc", "shm"]
SLACK = 3  # extra elements in every named buffer: they must stay untouched
SENTINEL = -7


def run(program: Any, tasks: int, transport: str, *args: Any) -> list[Any]:
    """``program(client, *args)`` on every task, one context each."""
    def task(comm: collops.Comm) -> Any:
        client = Client("am-buffers", comm)
        client.create_contexts(1)
        try:
            return program(client, *args)
        finally:
            client.close()

    return collops.spawn(task, tasks, transport=transport, timeout=90)


def _named_buffers(client: Client, collective: str, name_buffer: Any) -> Any:
    """Every endpoint registers a two-phase callback for ``collective`` that names a buffer
    when ``name_buffer(rank)``; endpoint 0 posts. Returns each endpoint's events (with
    monotonic times), its buffer, the data calls it got, and the root's result."""
    geometry = client.geometry()
    ctx = client.contexts[0]
    me = geometry.rank_of(ctx.endpoint)
    n = geometry.size
    events: list[tuple[str, float]] = []
    data_calls: list[Any] = []
    buffers: list[np.ndarray] = []

    def on_am(data: Any, info: Any) -> Any:
        if data is not None:                       # phase two, only when no buffer was named
            data_calls.append(np.array(data))
            events.append(("data", time.monotonic()))
            return None
        recv = info.recv
        if recv is None:                           # a contributing peer of amgather/amreduce
            events.append(("contribute", time.monotonic()))
            return np.arange(4, dtype=np.int64) * (me + 1)
        events.append(("header", time.monotonic()))
        assert recv.dtype == np.int64 and recv.origin == geometry.endpoints[0]
        assert recv.nbytes == int(np.prod(recv.shape)) * 8
        if name_buffer(me):
            buffer = np.full(recv.nbytes // 8 + SLACK, SENTINEL, np.int64)
            buffers.append(buffer)
            recv.buffer = buffer
            recv.done = lambda r: events.append(("done", time.monotonic()))
        return None

    ctx.endpoint.register_dispatch(collective, 4, on_am, two_phase=True)
    client.comm.barrier()
    result = None
    if me == 0:
        data = {"ambroadcast": np.arange(10, dtype=np.int64) * 3,
                "amscatter": np.arange(n * 6, dtype=np.int64).reshape(n * 2, 3),
                "amgather": np.arange(4, dtype=np.int64),
                "amreduce": np.arange(4, dtype=np.int64)}[collective]
        xfer = geometry.post(Xfer(collective, None, data, 4, op="sum",
                                  done=lambda x: events.append(("xfer.done", time.monotonic()))),
                             via=ctx.endpoint)
        result = xfer.wait(30)
        shares = bool(buffers) and np.shares_memory(result, buffers[0])
        result = (np.array(result), shares)
    else:
        drive(client, lambda: any(e[0] in ("done", "data", "contribute") for e in events))
    drive(client, lambda: not client.pending())
    client.comm.barrier()
    return events, buffers, data_calls, result


def _expected(collective: str, n: int, rank: int) -> np.ndarray | None:
    """What lands on endpoint ``rank`` (None: nothing lands there)."""
    if collective == "ambroadcast":
        return np.arange(10) * 3
    if collective == "amscatter":
        return np.arange(n * 6).reshape(n * 2, 3)[2 * rank:2 * rank + 2]
    if rank:
        return None
    contributions = [np.arange(4)] + [np.arange(4) * (r + 1) for r in range(1, n)]
    if collective == "amgather":
        return np.stack(contributions)
    return np.sum(contributions, axis=0)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("collective", ["ambroadcast", "amscatter", "amgather", "amreduce"])
def test_data_lands_in_the_buffer_the_callback_names_root_included(transport, collective):
    n = 3
    results = run(_named_buffers, n, transport, collective, lambda rank: True)
    for rank, (events, buffers, data_calls, result) in enumerate(results):
        expected = _expected(collective, n, rank)
        kinds = [k for k, _ in events if k != "xfer.done"]
        if expected is None:                        # a contributing peer
            assert kinds == ["contribute"] and not buffers
            continue
        assert kinds == ["header", "done"], kinds   # PAMI's two phases, once each
        assert data_calls == []                     # the data went to the named buffer only
        (buffer,) = buffers
        np.testing.assert_array_equal(buffer[:expected.size], expected.reshape(-1))
        assert (buffer[expected.size:] == SENTINEL).all()
        if rank == 0:
            np.testing.assert_array_equal(result[0], expected)
            assert result[1], "the root's result is its named buffer, not a copy"


@pytest.mark.timeout(180)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_completions_come_in_pamis_order(transport):
    """Each endpoint: header handler, then ``recv.done`` once its data landed; the root's
    ``done`` last, after every endpoint's ``recv.done``."""
    n = 4
    results = run(_named_buffers, n, transport, "ambroadcast", lambda rank: True)
    dones = []
    for events, _, _, _ in results:
        times = dict(events)
        assert times["header"] <= times["done"]
        dones.append(times["done"])
    root_events = dict(results[0][0])
    assert root_events["xfer.done"] >= max(dones)
    assert [k for k, _ in results[0][0]] == ["header", "done", "xfer.done"]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_callback_naming_no_buffer_gets_the_data_in_a_library_buffer(transport):
    n = 3
    results = run(_named_buffers, n, transport, "amscatter", lambda rank: rank != 1)
    events, buffers, data_calls, _ = results[1]
    assert [k for k, _ in events] == ["header", "data"] and not buffers
    (data,) = data_calls
    np.testing.assert_array_equal(data, _expected("amscatter", n, 1))
    for rank in (0, 2):
        assert results[rank][2] == []


@pytest.mark.timeout(180)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_named_buffer_too_small_fails_the_transfer_by_name(transport):
    def program(client: Client) -> Any:
        geometry = client.geometry()
        ctx = client.contexts[0]
        me = geometry.rank_of(ctx.endpoint)

        def on_am(data: Any, info: Any) -> None:
            if data is None and info.recv is not None:
                info.recv.buffer = np.empty(2 if me == 1 else 8, np.int64)

        ctx.endpoint.register_dispatch("ambroadcast", 4, on_am, two_phase=True)
        client.comm.barrier()
        outcome = []
        if me == 0:
            try:
                geometry.post(Xfer("ambroadcast", None, np.arange(8), 4),
                              via=ctx.endpoint).wait(30)
            except DispatchError as exc:
                outcome.append(str(exc))
            small = geometry.post  # the root's own buffer too small: post refuses
            on_root = np.empty(1, np.int64)
            ctx.endpoint.register_dispatch(
                "ambroadcast", 5, lambda d, i: setattr(i.recv, "buffer", on_root),
                two_phase=True)
            try:
                small(Xfer("ambroadcast", None, np.arange(8), 5), via=ctx.endpoint)
            except ArgumentError as exc:
                outcome.append(str(exc))
        else:
            drive(client, lambda: len(ctx.dispatch_errors) == 1 or me != 1)
            outcome = [str(e) for e in ctx.dispatch_errors]
        drive(client, lambda: not client.pending())
        client.comm.barrier()
        return outcome

    results = run(program, 3, transport)
    root_error, root_own = results[0]
    assert "endpoint 1" in root_error and "recv.buffer" in root_error
    assert "holds 16 bytes" in root_error and "has 64" in root_error
    assert "recv.buffer" in root_own and "holds 8 bytes" in root_own
    assert len(results[1]) == 1 and "recv.buffer" in results[1][0]
    assert results[2] == []


@pytest.mark.timeout(120)
def test_a_root_without_a_callback_or_whose_header_handler_raises_is_refused_at_post():
    def program(client: Client) -> Any:
        geometry = client.geometry()
        ctx = client.contexts[0]
        peer_calls = []
        if client.task:
            ctx.endpoint.register_dispatch("ambroadcast", 4, lambda d, i: peer_calls.append(4))
            ctx.endpoint.register_dispatch("ambroadcast", 5, lambda d, i: peer_calls.append(5))
        else:
            def refuse(data: Any, info: Any) -> None:
                raise ValueError("not now")
            ctx.endpoint.register_dispatch("ambroadcast", 5, refuse, two_phase=True)
        client.comm.barrier()
        messages = []
        if client.task == 0:
            for dispatch_id in (4, 5):
                try:
                    geometry.post(Xfer("ambroadcast", None, np.arange(3), dispatch_id),
                                  via=ctx.endpoint)
                except DispatchError as exc:
                    messages.append(str(exc))
            assert not client.pending()
        client.comm.barrier()
        for _ in range(20):                          # nothing was announced to the peers
            client.advance()
        return messages, peer_calls, client.pending()

    (messages, _, pending), (_, peer_calls, peer_pending) = run(program, 2, "inproc")
    assert len(messages) == 2 and pending == 0
    assert "no dispatch callback 4" in messages[0] and "ambroadcast" in messages[0]
    assert "root's dispatch callback" in messages[1] and "ValueError: not now" in messages[1]
    assert peer_calls == [] and peer_pending == 0
