"""The seed-001 endpoint API on real ranks: threads in one process and processes over shm.

Every test program runs on each task and returns what it saw; the assertions compare with
numpy. Each task takes part through two contexts, so every geometry has two endpoints per
task, multiplexed over the task's one transport.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import numpy as np
import pytest

import collops
from collops import ops
from collops.check.cases import LAST_NONZERO
from collops.endpoints import Client, DispatchError, Xfer
from tests.support.endpoints import drive

TRANSPORTS = ["inproc", "shm"]
CONTEXTS = 2


def run(program: Any, tasks: int, transport: str) -> list[Any]:
    """``program(client)`` on every task (a client with two contexts each)."""
    def task(comm: collops.Comm) -> Any:
        client = Client("test", comm)
        client.create_contexts(CONTEXTS)
        try:
            return program(client)
        finally:
            client.close()

    return collops.spawn(task, tasks, transport=transport, timeout=90)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_collectives_through_every_endpoint_run_their_dispatch(transport):
    def program(client: Client) -> Any:
        geometry = client.geometry(contexts=CONTEXTS)
        seen: list[tuple[tuple[int, int], str, np.ndarray]] = []
        for ctx in client.contexts:
            for coll in ("allreduce", "bcast", "allgather"):
                ctx.endpoint.register_dispatch(
                    coll, 4, lambda data, info: seen.append((info.endpoint.key,
                                                             info.collective, data.copy())))
        done: list[str] = []
        xfers = []
        for ctx in client.contexts:
            me = geometry.rank_of(ctx.endpoint)
            xfers += [
                geometry.post(Xfer("allreduce", None, np.arange(5.0) * (me + 1), 4,
                                   done=lambda x: done.append(x.collective)), via=ctx.endpoint),
                geometry.post(Xfer("bcast", "binomial", np.arange(3) if me == 1 else None, 4,
                                   root=1), via=ctx.endpoint),
                ctx.endpoint.post(Xfer("allgather", "ring", np.full(2, me, np.int16), 4),
                                  geometry),
                geometry.post(Xfer("reduce", None, np.array([me + 1]), None, root=2,
                                   op=LAST_NONZERO), via=ctx.endpoint),
            ]
        drive(client, lambda: all(x.completed for x in xfers))
        return geometry.size, seen, done, [x.result for x in xfers[3::4]]

    tasks = 3
    n = tasks * CONTEXTS
    for task, (size, seen, done, reduced) in enumerate(run(program, tasks, transport)):
        assert size == n
        assert Counter(done) == {"allreduce": CONTEXTS}
        keys = Counter((key, coll) for key, coll, _ in seen)
        assert keys == {((task, c), coll): 1 for c in range(CONTEXTS)
                        for coll in ("allreduce", "bcast", "allgather")}
        for _, coll, data in seen:
            if coll == "allreduce":
                np.testing.assert_array_equal(data, np.arange(5.0) * sum(range(1, n + 1)))
            elif coll == "bcast":
                np.testing.assert_array_equal(data, np.arange(3))
            else:
                np.testing.assert_array_equal(data, np.repeat(np.arange(n), 2))
        for c, got in enumerate(reduced):
            if task * CONTEXTS + c == 2:
                np.testing.assert_array_equal(got, [n])  # rank order: the last rank wins
            else:
                assert got is None


def _am_program(client: Client) -> Any:
    """Every endpoint counts its deliveries; endpoint 3 is the root of four AMs, endpoint 0
    of one more running at the same time."""
    geometry = client.geometry(contexts=CONTEXTS)
    n = geometry.size
    deliveries: Counter[tuple[tuple[int, int], str, int]] = Counter()
    received: dict[tuple[tuple[int, int], str, int], np.ndarray] = {}

    def on_data(data: Any, info: Any) -> Any:
        me = geometry.rank_of(info.endpoint)
        key = (info.endpoint.key, info.collective, info.root)
        deliveries[key] += 1
        if info.collective in ("amgather", "amreduce") and me != info.root:
            assert data is None and info.shape == (4,)
            return np.arange(4) * (me + 1) if info.collective == "amreduce" else np.full(4, me)
        received[key] = np.array(data)
        return None

    for ctx in client.contexts:
        for coll in ("ambroadcast", "amscatter", "amgather", "amreduce"):
            ctx.endpoint.register_dispatch(coll, 11, on_data)
    xfers = []
    for ctx in client.contexts:
        me = geometry.rank_of(ctx.endpoint)
        if me == 3:
            xfers += [
                geometry.post(Xfer("ambroadcast", "binomial", np.arange(10) * 3, 11),
                              via=ctx.endpoint),
                geometry.post(Xfer("amscatter", None, np.arange(n * 6).reshape(n * 2, 3), 11),
                              via=ctx.endpoint),
                geometry.post(Xfer("amgather", "linear", np.full(4, me), 11), via=ctx.endpoint),
                geometry.post(Xfer("amreduce", None, np.arange(4) * (me + 1), 11, op="sum"),
                              via=ctx.endpoint),
            ]
        if me == 0:
            xfers.append(geometry.post(Xfer("ambroadcast", None, np.ones(3), 11),
                                       via=ctx.endpoint))
    expected = 5 * len(client.contexts)  # the roots' own callbacks run too
    drive(client, lambda: sum(deliveries.values()) == expected and not client.pending())
    client.comm.barrier()
    for _ in range(20):  # nothing more may arrive
        client.advance()
    return dict(deliveries), received, [(x.collective, x.result) for x in xfers]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_active_message_collectives_reach_every_endpoint_root_included_exactly_once(
        transport):
    tasks = 3
    n = tasks * CONTEXTS
    gathered = np.repeat(np.arange(n), 4).reshape(n, 4)
    reduced = np.arange(4) * sum(range(1, n + 1))
    results = run(_am_program, tasks, transport)
    for task, (deliveries, received, finished) in enumerate(results):
        for c in range(CONTEXTS):
            me, key = task * CONTEXTS + c, (task, c)
            for coll in ("ambroadcast", "amscatter", "amgather", "amreduce"):
                assert deliveries.get((key, coll, 3), 0) == 1, (key, coll)
            assert deliveries.get((key, "ambroadcast", 0), 0) == 1
            np.testing.assert_array_equal(received[(key, "ambroadcast", 3)], np.arange(10) * 3)
            np.testing.assert_array_equal(received[(key, "amscatter", 3)],
                                          np.arange(n * 6).reshape(n * 2, 3)[2 * me:2 * me + 2])
            np.testing.assert_array_equal(received[(key, "ambroadcast", 0)], np.ones(3))
            if me == 3:  # the root's callback runs on what lands there: the results
                np.testing.assert_array_equal(received[(key, "amgather", 3)], gathered)
                np.testing.assert_array_equal(received[(key, "amreduce", 3)], reduced)
        for coll, result in finished:
            if coll == "amgather":
                np.testing.assert_array_equal(result, gathered)
            if coll == "amreduce":
                np.testing.assert_array_equal(result, reduced)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_raising_dispatch_callback_fails_the_posting_endpoint_not_a_hang(transport):
    def program(client: Client) -> Any:
        geometry = client.geometry(contexts=CONTEXTS)
        calls = []

        def on_data(data: Any, info: Any) -> None:
            calls.append(info.endpoint.key)
            if info.endpoint.key == (1, 0):
                raise ValueError("bad data")

        for ctx in client.contexts:
            ctx.endpoint.register_dispatch("ambroadcast", 9, on_data)
            ctx.endpoint.register_dispatch("allreduce", 9, on_data)
        outcome = []
        if client.task == 0:
            xfer = geometry.post(Xfer("ambroadcast", None, np.arange(4), 9),
                                 via=client.contexts[0].endpoint)
            try:
                xfer.wait(20)
            except DispatchError as exc:
                outcome.append(str(exc))
            # the root's own callback runs unless the failure arrived before its data landed
            drive(client, lambda: calls.count((0, 1)) == 1 and not client.pending())
        else:
            drive(client, lambda: len(calls) == CONTEXTS and not client.pending())
        client.comm.barrier()
        # an ordinary collective: the raising endpoint's own post fails, the others complete
        xfers = [geometry.post(Xfer("allreduce", None, np.ones(2), 9), via=c.endpoint)
                 for c in client.contexts]
        for x in xfers:
            try:
                x.wait(20)
                outcome.append("ok")
            except DispatchError as exc:
                outcome.append(f"failed: {exc}")
        return outcome

    results = run(program, 2, transport)
    root_error, *root_rest = results[0]
    assert "endpoint 2" in root_error and "ValueError: bad data" in root_error
    assert root_rest == ["ok", "ok"]
    assert results[1][0].startswith("failed:") and "bad data" in results[1][0]
    assert results[1][1] == "ok"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_endpoint_post_finds_the_geometry_of_the_endpoint_or_of_the_xfer(transport):
    def program(client: Client) -> Any:
        ep0, ep1 = (c.endpoint for c in client.contexts)
        out: dict[str, Any] = {}
        everyone = client.geometry(contexts=CONTEXTS, name="everyone")
        # the form: each endpoint belongs to exactly one geometry, so post(xfer) is enough
        xfers = [ep.post(Xfer("allreduce", None, np.full(2, float(client.task + 1)), None))
                 for ep in (ep0, ep1)]
        drive(client, lambda: all(x.completed for x in xfers))
        out["one"] = [x.result.tolist() for x in xfers]
        out["geometry"] = [x.geometry.name for x in xfers]
        # a second geometry over context 0 only: ep0 is now ambiguous, ep1 still is not
        firsts = client.geometry(tasks=range(client.tasks), contexts=[0], name="firsts")
        with pytest.raises(collops.ArgumentError) as info:
            ep0.post(Xfer("allreduce", None, np.ones(1), None))
        out["ambiguous"] = str(info.value)
        x1 = ep1.post(Xfer("allreduce", None, np.ones(1), None))
        # the transfer names its geometry, or the post does (the old form keeps working)
        x0 = ep0.post(Xfer("allreduce", None, np.ones(3), None, geometry=firsts))
        x2 = ep0.post(Xfer("allreduce", None, np.ones(1), None), everyone)
        drive(client, lambda: x0.completed and x1.completed and x2.completed)
        out["named"] = [x0.result.tolist(), x0.geometry.name, x1.result.tolist(),
                        x2.result.tolist()]
        with pytest.raises(collops.ArgumentError) as info:
            ep0.post(Xfer("allreduce", None, np.ones(1), None, geometry=firsts), everyone)
        out["conflict"] = str(info.value)
        stranger = client.endpoint(client.task, 5)  # a context no geometry includes
        with pytest.raises(collops.ArgumentError) as info:
            stranger.post(Xfer("barrier"))
        out["none"] = str(info.value)
        client.comm.barrier()
        return out

    tasks = 2
    for out in run(program, tasks, transport):
        total = float(sum(range(1, tasks + 1)) * CONTEXTS)
        assert out["one"] == [[total, total]] * 2 and out["geometry"] == ["everyone"] * 2
        assert "belongs to 2 geometries (everyone, firsts)" in out["ambiguous"]
        assert "Xfer(..., geometry=geometry)" in out["ambiguous"]
        assert out["named"] == [[float(tasks)] * 3, "firsts", [4.0], [4.0]]
        assert "differs from the transfer's own geometry firsts" in out["conflict"]
        assert "belongs to no geometry" in out["none"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_progress_threads_complete_transfers_without_explicit_advance(transport):
    def program(client: Client) -> Any:
        geometry = client.geometry(contexts=CONTEXTS)
        got = []
        for ctx in client.contexts:
            ctx.endpoint.register_dispatch("ambroadcast", 1, lambda d, i: got.append(d.sum()))
            ctx.start_progress_thread()
        xfers = [geometry.post(Xfer("allreduce", None, np.full(3, 2.0), None), via=c.endpoint)
                 for c in client.contexts]
        if client.task == 1:
            xfers.append(geometry.post(Xfer("ambroadcast", None, np.arange(5), 1),
                                       via=client.contexts[1].endpoint))
        deadline = time.monotonic() + 20
        while not (all(x.completed for x in xfers) and len(got) == 2):  # the root's too
            assert time.monotonic() < deadline
            time.sleep(0.001)
        running = [c.progress_thread_running for c in client.contexts]
        client.comm.barrier()
        return [x.result for x in xfers[:2]], got, running

    for results, got, running in run(program, 2, transport):
        for r in results:
            np.testing.assert_array_equal(r, np.full(3, 8.0))
        assert got and all(v == 10 for v in got) and running == [True, True]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_geometries_from_task_lists_ranges_and_endpoint_lists(transport):
    def program(client: Client) -> Any:
        evens = client.geometry(tasks=[0, 2], contexts=1)
        mixed = client.geometry([client.endpoint(2, 1), client.endpoint(0, 0),
                                 client.endpoint(2, 0)])
        out: dict[str, Any] = {"evens_here": len(evens.local_endpoints),
                               "mixed_here": [e.key for e in mixed.local_endpoints]}
        for g in (evens, mixed):  # a power-of-two size is a resource of the geometry
            always, query = g.algorithms("allgather").names()
            assert ("recursive_doubling" in always + query) == (g.size == 2)
            assert {"one_node", "contiguous_buffers"} <= g.resources
        xfers = [mixed.post(Xfer("gather", None, np.array([mixed.rank_of(e)]), root=0),
                            via=e) for e in mixed.local_endpoints]
        if evens.local_endpoints:
            xfers.append(evens.post(Xfer("allreduce", None, np.array([client.task]))))
        drive(client, lambda: all(x.completed for x in xfers))
        out["results"] = [None if x.result is None else x.result.tolist() for x in xfers]
        return out

    a, b, c = run(program, 3, transport)
    assert a == {"evens_here": 1, "mixed_here": [(0, 0)], "results": [None, [2]]}
    assert b == {"evens_here": 0, "mixed_here": [], "results": []}
    assert c["mixed_here"] == [(2, 1), (2, 0)]
    assert c["results"] == [[0, 1, 2], None, [2]]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_geometry_from_a_toml_configuration_with_preferences(tmp_path, transport):
    path = tmp_path / "geometry.toml"
    path.write_text(
        '[geometry]\nname = "solver"\ntasks = "0-1"\ncontexts = 2\n'
        '[algorithms.allreduce]\nprefer = ["ring", "reduce_bcast"]\n'
        '[[algorithms.allreduce.rule]]\nmax_bytes = 64\nalgorithm = "recursive_doubling"\n')

    def program(client: Client) -> Any:
        geometry = client.geometry_from_config(str(path))
        lists = geometry.algorithms("allreduce")
        small = geometry.post(Xfer("allreduce", None, np.ones(2), None),
                              via=client.contexts[0].endpoint)
        large = geometry.post(Xfer("allreduce", None, np.ones(64), None),
                              via=client.contexts[0].endpoint)
        ordered = geometry.post(Xfer("allreduce", None, np.ones(64, np.int64), op=LAST_NONZERO),
                                via=client.contexts[0].endpoint)
        others = [geometry.post(Xfer(x.collective, None, x.data, op=x.op),
                                via=client.contexts[1].endpoint) for x in (small, large, ordered)]
        drive(client, lambda: all(x.completed for x in (small, large, ordered, *others)))
        return (geometry.name, geometry.size, lists.names(),
                [x.algorithm for x in (small, large, ordered)], small.result.tolist())

    for name, size, (always, must_query), chosen, small in run(program, 2, transport):
        assert (name, size) == ("solver", 4)
        assert "recursive_doubling" in must_query and "ring" in must_query
        assert "recursive_doubling" not in always
        assert chosen == ["recursive_doubling", "ring", "reduce_bcast"]
        assert small == [4.0, 4.0]


def test_affinity_params_drive_affinity_tree_on_a_geometry():
    def program(client: Client) -> Any:
        geometry = client.geometry(contexts=CONTEXTS)
        virtual = geometry.affinity_params("machine:2x1x2", "spread")
        real = geometry.affinity_params()
        xfers = [geometry.post(Xfer("allreduce", "affinity_tree", np.arange(3) + 1, None,
                                    params=virtual, op=ops.SUM), via=c.endpoint)
                 for c in client.contexts]
        drive(client, lambda: all(x.completed for x in xfers))
        return virtual, real, [x.result.tolist() for x in xfers]

    for virtual, real, results in run(program, 2, "inproc"):
        assert virtual == {"machine": "2x1x2", "mapping": "spread", "arity": 2}
        assert set(real) == {"machine", "mapping", "arity"}
        assert results == [[4, 8, 12]] * 2


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_contribution_that_raises_fails_a_tree_gather_and_leaves_nothing_in_flight(transport):
    def program(client: Client) -> Any:
        geometry = client.geometry(contexts=CONTEXTS)
        asked = []

        def contribute(data: Any, info: Any) -> Any:
            asked.append(info.endpoint.key)
            if info.endpoint.key == (2, 1):
                raise KeyError("no contribution")
            return np.full(info.shape, geometry.rank_of(info.endpoint))

        for ctx in client.contexts:
            ctx.endpoint.register_dispatch("amgather", 3, contribute)
        outcome = "no error"
        if client.task == 0:
            xfer = geometry.post(Xfer("amgather", "binomial", np.zeros(2), 3),
                                 via=client.contexts[0].endpoint)
            try:
                xfer.wait(20)
            except DispatchError as exc:
                outcome = str(exc)
        wanted = CONTEXTS - (client.task == 0)
        drive(client, lambda: len(asked) == wanted and not client.pending())
        client.comm.barrier()
        return outcome, client.pending()

    results = run(program, 3, transport)
    assert "endpoint 5" in results[0][0] and "KeyError" in results[0][0]
    assert [pending for _, pending in results] == [0, 0, 0]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_destroyed_geometries_and_clients_give_their_contexts_back(transport):
    """Geometries and clients made and destroyed without end reuse the same communicator ids
    (each holds some: without destroy they run out), and still compute right."""
    def task(comm: collops.Comm) -> Any:
        def lowest_free() -> list[int]:  # the ids the next ten communicators get
            probes = [comm.dup() for _ in range(10)]
            ids = [p.context for p in probes]
            for p in probes:
                p.free()
            return ids

        first = lowest_free()
        sums = []
        for round_ in range(40):
            client = Client(f"round{round_}", comm)
            client.create_contexts(1)
            geometry = client.geometry()
            x = geometry.post(Xfer("allreduce", None, np.arange(3.0) * (comm.rank + 1),
                                   op="sum"), via=client.contexts[0].endpoint)
            if round_ % 2:  # destroyed with the transfer in flight: it completes first
                geometry.destroy()
                assert x.completed
            sums.append(np.asarray(x.wait(timeout=30)).tolist())
            geometry.destroy()
            with pytest.raises(collops.ArgumentError, match="was destroyed"):
                geometry.post(Xfer("allreduce", None, np.ones(3), op="sum"))
            client.destroy()
        return first, lowest_free(), sums

    got = collops.spawn(task, 2, transport=transport, timeout=90)
    for first, again, sums in got:
        assert again == first
        assert all(s == (np.arange(3.0) * 3).tolist() for s in sums)
