"""PAMI's point-to-point on endpoints (`collops.endpoints.p2p`) on real ranks: threads in one
process and processes over shm, 2 to 4 tasks. Every program runs on each task and returns
what it saw; the assertions compare with numpy. Each task ends by advancing its contexts
through a non-blocking barrier, so no task leaves while another still needs its answers."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

import collops
from collops.endpoints import AGAIN, Client, DispatchError, Memregion, Recv
from collops.endpoints.p2p import EAGER_LIMIT, IMMEDIATE_LIMIT
from collops.errors import ArgumentError, CollectiveTimeout
from tests.support.endpoints import drive

pytestmark = pytest.mark.timeout(120)

TRANSPORTS = ["inproc", "shm"]
#: element counts of float64 data: eager (with the header) and larger (named buffer)
SIZES = [0, 5, EAGER_LIMIT // 8, EAGER_LIMIT // 8 + 1, 40_000]


def finish(client: Client) -> None:
    """Advance until every task got here and nothing of this task is in flight."""
    barrier = client.comm.ibarrier()
    drive(client, lambda: barrier.test() and not client.pending())


def run(program: Any, tasks: int, transport: str, contexts: int = 1) -> list[Any]:
    """``program(client)`` on every task, then `finish`."""
    def task(comm: collops.Comm) -> Any:
        client = Client("p2p", comm)
        client.create_contexts(contexts)
        try:
            result = program(client)
            finish(client)
            return result
        finally:
            client.close()

    return collops.spawn(task, tasks, transport=transport, timeout=100)


def receiver(got: list[Any]) -> Any:
    """A dispatch function that keeps ``(header, origin task, data)`` of each message, naming
    a buffer of the sender's dtype and shape when the data did not come with the header."""
    def on_message(header: bytes, data: Any, origin: Any, recv: Recv | None) -> None:
        if recv is None:
            got.append((header, origin.task, np.array(data)))
            return
        buffer = np.empty(recv.shape, recv.dtype)
        recv.buffer = buffer
        recv.done = lambda r: got.append((header, origin.task, buffer))
    return on_message


def errors_raised(client: Client, count: int) -> list[str]:
    """The texts of the first ``count`` `ArgumentError`s advancing the task raises."""
    texts: list[str] = []
    while len(texts) < count:
        try:
            drive(client, lambda: False, timeout=30)
        except ArgumentError as exc:
            texts.append(str(exc))
    return texts


def listening(client: Client, dispatch_id: int) -> tuple[Any, list[Any]]:
    """The task's first context, with a `receiver` set for ``dispatch_id``, and its list."""
    got: list[Any] = []
    client.contexts[0].set_dispatch(dispatch_id, receiver(got))
    return client.contexts[0], got


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_active_message_ping_pong(transport):
    def program(client: Client) -> Any:
        ctx, got = listening(client, 1)
        peer = client.endpoint(1 - client.task, 0)
        echoed = []
        for i, n in enumerate(SIZES):
            if client.task == 0:
                ctx.send(peer, 1, f"ping {i}".encode(), np.arange(n, dtype=np.float64) * (i + 1))
                drive(client, lambda i=i: len(got) == i + 1)
                echoed.append(got[-1])
            else:
                drive(client, lambda i=i: len(got) == i + 1)
                header, _, data = got[-1]
                ctx.send(peer, 1, header.replace(b"ping", b"pong"), data + 0.5).wait(30)
        return echoed

    echoed, _ = run(program, 2, transport)
    assert len(echoed) == len(SIZES)
    for i, (n, (header, origin, data)) in enumerate(zip(SIZES, echoed, strict=True)):
        assert header == f"pong {i}".encode() and origin == 1
        assert data.dtype == np.float64 and data.shape == (n,)
        np.testing.assert_array_equal(data, np.arange(n, dtype=np.float64) * (i + 1) + 0.5)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("tasks", [3, 4])
def test_many_to_one_sums_what_every_task_sent(transport, tasks):
    def program(client: Client) -> Any:
        contexts = client.contexts
        got: list[Any] = []
        for ctx in contexts:
            ctx.set_dispatch(9, receiver(got))
        root = client.endpoint(0, 1)                # the root's second context takes it all
        if client.task != 0:
            rng = np.random.default_rng(client.task)
            sends = [contexts[k % 2].send(root, 9, bytes([k]), rng.integers(0, 100, n))
                     for k, n in enumerate((3, 20_000, 700, 0))]
            drive(client, lambda: all(s.completed for s in sends))
            return None
        drive(client, lambda: len(got) == 4 * (client.tasks - 1))
        return got

    got = run(program, tasks, transport, contexts=2)[0]
    total = 0
    for task in range(1, tasks):
        rng = np.random.default_rng(task)
        sent = [rng.integers(0, 100, n) for n in (3, 20_000, 700, 0)]
        mine = sorted((h, d.tolist()) for h, t, d in got if t == task)
        assert mine == sorted((bytes([k]), x.tolist()) for k, x in enumerate(sent))
        total += sum(int(x.sum()) for x in sent)
    assert sum(int(d.sum()) for _, _, d in got) == total


def test_completion_order_local_then_the_target_then_remote():
    """PAMI's order: the origin's local completion, the target's receive completion (the data
    landed), then the origin's remote completion; on threads one list sees all three."""
    events: list[tuple[str, int]] = []
    lock = threading.Lock()

    def note(what: str, i: int) -> None:
        with lock:
            events.append((what, i))

    def program(client: Client) -> Any:
        ctx = client.contexts[0]

        def on_message(header: bytes, data: Any, origin: Any, recv: Recv | None) -> None:
            i = header[0]
            note("dispatch", i)
            if recv is None:
                note("landed", i)
            else:
                recv.buffer = np.empty(recv.nbytes, np.uint8)
                recv.done = lambda r: note("landed", i)

        ctx.set_dispatch(2, on_message)
        if client.task == 0:
            peer = client.endpoint(1, 0)
            sends = [ctx.send(peer, 2, bytes([i]), np.ones(n), done=lambda t, i=i: note(
                "local", i), remote_done=lambda t, i=i: note("remote", i))
                for i, n in enumerate((10, 100_000, 0, 50_000))]
            drive(client, lambda: all(s.remote for s in sends))
            assert all(s.local for s in sends)
        return None

    run(program, 2, "inproc")
    for i in range(4):
        mine = [what for what, j in events if j == i]
        assert sorted(mine) == sorted(["dispatch", "landed", "local", "remote"])
        assert mine.index("dispatch") < mine.index("landed") < mine.index("remote")
        assert mine.index("local") < mine.index("remote")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_send_immediate_and_its_limit(transport):
    def program(client: Client) -> Any:
        ctx, got = listening(client, 3)
        peer = client.endpoint(1 - client.task, 0)
        with pytest.raises(ArgumentError, match=r"send_immediate.*data.*IMMEDIATE_LIMIT"):
            ctx.send_immediate(peer, 3, b"h", np.zeros(IMMEDIATE_LIMIT, np.uint8))
        for i in range(5):
            ctx.send_immediate(peer, 3, bytes([i]), np.full(i, client.task, np.int16))
        drive(client, lambda: len(got) == 5)
        return [(h, t, d.dtype.str, d.tolist()) for h, t, d in got]

    for task, got in enumerate(run(program, 2, transport)):
        other = 1 - task
        assert got == [(bytes([i]), other, "<i2", [other] * i) for i in range(5)]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_rput_and_rget_between_memory_regions(transport):
    def program(client: Client) -> Any:
        ctx = client.contexts[0]
        n = client.tasks
        exposed = np.zeros((n, 3000), np.int64)      # one row per task that puts into it
        regions = client.comm.allgather_object(ctx.memregion(exposed))
        mine = np.arange(3000, dtype=np.int64) * (client.task + 1)
        source = ctx.memregion(mine)
        puts = [ctx.rput(source, regions[t], mine.nbytes,
                         remote_offset=client.task * mine.nbytes) for t in range(n)]
        drive(client, lambda: all(p.remote for p in puts))
        client.comm.barrier()                        # every row has landed everywhere
        fetched = np.zeros(16, np.int64)
        into = ctx.memregion(fetched)
        right = (client.task + 1) % n                # rows of the right neighbour's region
        gets = [ctx.rget(into, regions[right], 8 * 8, local_offset=8 * 8 * k,
                         remote_offset=(k * 3000 + 10) * 8) for k in range(2)]
        drive(client, lambda: all(g.completed for g in gets))
        return exposed, fetched

    results = run(program, 3, transport)
    rows = np.arange(3000, dtype=np.int64) * np.arange(1, 4)[:, None]
    for exposed, fetched in results:
        np.testing.assert_array_equal(exposed, rows)
        np.testing.assert_array_equal(fetched, np.concatenate([rows[0, 10:18], rows[1, 10:18]]))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_fence_completes_after_every_earlier_transfer(transport):
    def program(client: Client) -> Any:
        ctx, got = listening(client, 4)
        order: list[str] = []
        if client.task == 0:
            peer = client.endpoint(1, 0)
            ctx.send(peer, 4, b"a", np.ones(60_000), remote_done=lambda t: order.append("a"))
            ctx.send_immediate(peer, 4, b"b", np.ones(3))
            ctx.send(peer, 4, b"c", np.ones(2), remote_done=lambda t: order.append("c"))
            one = ctx.fence(peer, done=lambda t: order.append("fence to 1"))
            every = ctx.fence(done=lambda t: order.append("fence"))
            drive(client, lambda: every.completed and one.completed)
            return order
        drive(client, lambda: len(got) == 3)
        return sorted(h for h, _, _ in got)

    order, got = run(program, 2, transport)
    assert got == [b"a", b"b", b"c"]
    assert sorted(order[:2]) == ["a", "c"] and sorted(order[2:]) == ["fence", "fence to 1"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_posted_work_runs_on_advance_until_it_is_done(transport):
    def program(client: Client) -> Any:
        ctx = client.contexts[0]
        runs: list[str] = []

        def twice(context: Any) -> Any:
            runs.append(f"twice on {context.offset}")
            return AGAIN if len(runs) < 2 else None

        poster = threading.Thread(target=ctx.post, args=(twice,))
        poster.start()
        poster.join()
        assert runs == []                           # nothing runs until the context advances
        ctx.advance()
        ctx.advance(max_loops=5)
        ctx.advance()
        with pytest.raises(ArgumentError, match="post.*work"):
            ctx.post("not callable")
        return runs

    for runs in run(program, 2, transport):
        assert runs == ["twice on 0", "twice on 0"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_unknown_dispatch_id_fails_at_both_ends(transport):
    def program(client: Client) -> Any:
        ctx = client.contexts[0]
        ctx.set_dispatch(1, receiver([]))
        if client.task == 0:
            sent = [ctx.send(client.endpoint(1, 0), 77, b"", np.ones(n)) for n in (4, 9000)]
            for s in sent:
                with pytest.raises(ArgumentError) as failed:
                    s.wait(30)
            assert all(s.error is not None and not s.remote for s in sent)
            return str(failed.value)
        return errors_raised(client, 2)[-1]

    at_origin, at_target = run(program, 2, transport)
    for text in (at_origin, at_target):
        assert "Context.send" in text and "dispatch_id=77" in text and "on rank 1" in text


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_failed_send_is_raised_once(transport):
    """Two refusals handled by one advance: the advance raises the first, the second's wait
    the second, and nothing raises either again."""
    def program(client: Client) -> Any:
        ctx = client.contexts[0]
        if client.task == 1:
            errors_raised(client, 2)
            client.comm.barrier()
            return None
        sent = [ctx.send(client.endpoint(1, 0), 55, bytes([i]), np.ones(3)) for i in range(2)]
        client.comm.barrier()                        # both refusals have come back
        with pytest.raises(ArgumentError, match="dispatch_id=55"):
            ctx.advance()
        with pytest.raises(ArgumentError, match="dispatch_id=55"):
            sent[1].wait(30)
        for _ in range(20):
            ctx.advance()
        return [s.error is not None for s in sent]

    assert run(program, 2, transport)[0] == [True, True]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_buffer_too_small_or_missing_fails_at_both_ends(transport):
    def program(client: Client) -> Any:
        ctx = client.contexts[0]

        def small(header: bytes, data: Any, origin: Any, recv: Recv | None) -> None:
            assert recv is not None
            if header == b"small":
                recv.buffer = np.empty(recv.nbytes // 2, np.uint8)

        ctx.set_dispatch(5, small)
        if client.task == 1:
            texts = []
            for header in (b"small", b"none"):
                with pytest.raises(ArgumentError) as failed:
                    ctx.send(client.endpoint(0, 0), 5, header, np.ones(8000)).wait(30)
                texts.append(str(failed.value))
            return texts
        return errors_raised(client, 2)

    at_target, at_origin = run(program, 2, transport)
    assert at_target == at_origin
    assert "recv.buffer=(32000,) on rank 0: holds 32000 bytes" in at_origin[0]
    assert "has 64000" in at_origin[0]
    assert "recv.buffer=None on rank 0: the dispatch function named no buffer" in at_origin[1]


def test_a_raising_dispatch_function_fails_the_send():
    def program(client: Client) -> Any:
        ctx = client.contexts[0]

        def broken(header: bytes, data: Any, origin: Any, recv: Recv | None) -> None:
            raise KeyError("no such job")

        ctx.set_dispatch(6, broken)
        if client.task == 0:
            with pytest.raises(DispatchError, match="task 1, context 0 raised KeyError"):
                ctx.send(client.endpoint(1, 0), 6, b"job", np.ones(3)).wait(30)
        else:
            with pytest.raises(DispatchError, match="no such job"):
                drive(client, lambda: False, timeout=30)
        return None

    run(program, 2, "inproc")


def test_wrong_endpoints_and_regions_are_refused_before_anything_is_sent():
    def program(client: Client) -> Any:
        ctx = client.contexts[0]
        other = Client("other", client.comm)
        other.create_contexts(1)
        texts = []
        for call in (lambda: ctx.send(other.endpoint(0, 0), 1),
                     lambda: ctx.send("task 1", 1),
                     lambda: ctx.send(client.endpoint(0, 0), "one"),
                     lambda: ctx.send(client.endpoint(0, 0), 1, header=bytes(5000))):
            with pytest.raises(ArgumentError) as failed:
                call()
            texts.append(str(failed.value))
        mine = ctx.memregion(np.zeros(4))
        theirs = client.comm.allgather_object(mine)[1 - client.task]
        for call in (lambda: ctx.rput(theirs, theirs, 8),          # local region not ours
                     lambda: ctx.rput(mine, theirs, 8, remote_offset=30),
                     lambda: ctx.rget(mine, theirs, -1)):
            with pytest.raises(ArgumentError) as failed:
                call()
            texts.append(str(failed.value))
        assert not ctx.pending
        return texts

    texts = run(program, 2, "inproc")[1]
    assert texts[0].startswith("Context.send: argument target=Endpoint('other'")
    assert "on rank 1: must be an endpoint of client 'p2p'" in texts[0]
    assert "target='task 1'" in texts[1]
    assert "dispatch_id='one' on rank 1" in texts[2]
    assert "header='5000 bytes' on rank 1" in texts[3]
    assert texts[4].startswith("Context.rput: argument local=") and "registered on this" in texts[4]
    assert "remote_offset=30 on rank 1: 8 bytes from it do not fit the region's 32" in texts[5]
    assert "Context.rget: argument nbytes=-1 on rank 1" in texts[6]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_get_from_a_destroyed_region_fails_at_the_origin(transport):
    def program(client: Client) -> Any:
        ctx = client.contexts[0]
        region = ctx.memregion(np.zeros(10))
        regions = client.comm.allgather_object(region)
        ctx.memregion_destroy(region)
        client.comm.barrier()
        into = ctx.memregion(np.zeros(10))
        get = ctx.rget(into, regions[1 - client.task], 16)
        with pytest.raises(ArgumentError, match=r"Context.rget: argument remote=.*no such "
                                                r"memory region on task \d, context 0"):
            get.wait(30)
        return None

    run(program, 2, transport)


def test_a_send_to_a_context_nobody_advances_times_out():
    def program(client: Client) -> Any:
        if client.task == 0:
            ctx = client.contexts[0]
            send = ctx.send(client.endpoint(1, 5), 1, b"", np.ones(3))  # context 5: none
            with pytest.raises(CollectiveTimeout, match="Context.send on task 0"):
                send.wait(0.3)
        client.comm.barrier()
        return None

    def task(comm: collops.Comm) -> Any:
        client = Client("p2p", comm)
        client.create_contexts(1)
        return program(client)

    collops.spawn(task, 2, transport="inproc", timeout=60)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_send_to_a_context_the_target_never_created_fails_at_both_ends(transport):
    """Task 1 made two contexts; sends, puts and an immediate to its context 5 fail by name at
    the origin (eager and payload-carrying alike) and are raised by task 1's advance."""
    def program(client: Client) -> Any:
        ctx = client.contexts[0]
        if client.task == 1:
            return errors_raised(client, 4)
        missing = client.endpoint(1, 5)
        local = ctx.memregion(np.arange(9000, dtype=np.float64))
        remote = Memregion(1, 5, 0, local.nbytes)
        transfers = [ctx.send(missing, 1, b"", np.ones(3)),
                     ctx.send(missing, 1, b"", np.ones(9000)),
                     ctx.rput(local, remote, local.nbytes)]
        texts = []
        for transfer in transfers:
            with pytest.raises(ArgumentError) as failed:
                transfer.wait(30)
            texts.append(str(failed.value))
        ctx.send_immediate(missing, 1, b"x")
        texts += errors_raised(client, 1)
        return texts

    at_origin, at_target = run(program, 2, transport, contexts=2)
    assert len(at_origin) == 4 and len(at_target) == 4
    for text in at_origin + at_target:
        assert "task 1 has no context 5 (it created 2" in text, text
        assert "target='endpoint (task 1, context 5)' on rank 1" in text
    assert sum("Context.rput" in t for t in at_origin) == 1
    assert sum("Context.send" in t for t in at_target) == 3


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_progress_thread_runs_the_dispatch_and_keeps_its_errors(transport):
    def program(client: Client) -> Any:
        ctx, got = listening(client, 8)
        if client.task == 1:
            ctx.start_progress_thread()
            drive_until = time.monotonic() + 30
            while (len(got) < 2 or not ctx.dispatch_errors) and time.monotonic() < drive_until:
                time.sleep(0.001)
            ctx.stop_progress_thread()
            return sorted(header for header, _, _ in got), [str(e) for e in ctx.dispatch_errors]
        peer = client.endpoint(1, 0)
        sends = [ctx.send(peer, 8, b"small", np.arange(3)), ctx.send(peer, 8, b"large",
                                                                     np.arange(9000))]
        for s in sends:
            s.wait(30)
        with pytest.raises(ArgumentError, match="dispatch_id=99"):
            ctx.send(peer, 99, b"", np.ones(2)).wait(30)
        return None

    _, (headers, errors) = run(program, 2, transport)
    assert headers == [b"large", b"small"]
    assert len(errors) == 1 and "dispatch_id=99 on rank 1" in errors[0]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_progress_thread_is_woken_by_an_arrival_not_by_its_interval(transport):
    """A progress thread waits on the transport between advances, so an active message is
    taken at once even when its interval (the longest single wait) is far longer than the
    test allows."""
    def program(client: Client) -> Any:
        ctx, got = listening(client, 3)
        if client.task == 1:
            arrived = threading.Event()
            ctx.set_dispatch(3, lambda *args: arrived.set())
            client.comm.barrier()
            ctx.start_progress_thread(interval=60.0)
            taken = arrived.wait(20.0)
            ctx.stop_progress_thread()
            return taken
        client.comm.barrier()
        time.sleep(0.2)                             # the thread is waiting by now
        ctx.send(client.endpoint(1, 0), 3, b"", np.ones(2)).wait(30)
        return True

    assert run(program, 2, transport) == [True, True]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_message_another_context_routed_counts_as_pending_until_handled(transport):
    """Any context's advance takes the task's control messages; one for context 1 taken by
    context 0 is pending on context 1 until context 1 advances and runs its dispatch."""
    def program(client: Client) -> Any:
        ctx0, ctx1 = client.contexts
        got: list[Any] = []
        ctx1.set_dispatch(2, receiver(got))
        client.comm.barrier()
        if client.task == 0:
            ctx0.send(client.endpoint(1, 1), 2, b"to 1", np.arange(3)).wait(30)
            return None
        deadline = time.monotonic() + 30
        while not ctx1.pending:
            assert time.monotonic() < deadline, "context 0 never took the message"
            if not ctx0.advance():
                client.wait_for_activity(0.001)
        seen_before = list(got)
        drive(client, lambda: bool(got))
        return seen_before, [(h, t, d.tolist()) for h, t, d in got], ctx1.pending

    _, (before, after, pending) = run(program, 2, transport, contexts=2)
    assert before == [] and after == [(b"to 1", 0, [0, 1, 2])] and pending == 0
