"""The API contract: shapes, out=, non-blocking requests, communicators, errors, selection."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import collops
from collops import ArgumentError, CollopsError, RankFailed
from collops.algorithms.registry import get_algorithm


def run(fn, p=3, *args):
    return collops.spawn(fn, p, *args, timeout=60)


def test_shapes_follow_numpy_concatenation():
    def body(comm):
        x = np.full((2, 3), comm.rank, dtype=np.int16)
        return (comm.allgather(x), comm.allgather(np.int32(comm.rank)),
                comm.alltoall(np.arange(comm.size * 2 * 2).reshape(comm.size * 2, 2) + comm.rank))
    for rank, (ag, scalar, a2a) in enumerate(run(body)):
        np.testing.assert_array_equal(ag, np.concatenate([np.full((2, 3), r, np.int16)
                                                          for r in range(3)]))
        np.testing.assert_array_equal(scalar, np.arange(3, dtype=np.int32))
        blocks = [(np.arange(12).reshape(6, 2) + src)[2 * rank: 2 * rank + 2] for src in range(3)]
        np.testing.assert_array_equal(a2a, np.concatenate(blocks))


def test_bcast_carries_shape_and_dtype_to_ranks_passing_none():
    def body(comm):
        small = np.arange(6, dtype=np.complex64).reshape(2, 3)
        large = np.arange(50_000, dtype=np.uint16).reshape(100, 500)
        return (comm.bcast(small if comm.rank == 2 else None, root=2),
                comm.bcast(large if comm.rank == 0 else None))
    for small, large in run(body, 4):
        assert small.dtype == np.complex64 and small.shape == (2, 3)
        np.testing.assert_array_equal(small, np.arange(6).reshape(2, 3))
        assert large.dtype == np.uint16 and large.shape == (100, 500)
        np.testing.assert_array_equal(large.reshape(-1), np.arange(50_000, dtype=np.uint16))


def test_out_receives_into_the_given_array():
    def body(comm):
        out = np.zeros(comm.size * 2)
        got = comm.allgather(np.full(2, float(comm.rank)), out=out)
        return got is out or np.shares_memory(got, out), out
    for same, out in run(body):
        assert same
        np.testing.assert_array_equal(out, np.repeat(np.arange(3.0), 2))


def test_any_buffer_protocol_object_is_accepted():
    def body(comm):
        return comm.allreduce(bytearray([comm.rank + 1] * 4), "sum")
    for got in run(body):
        np.testing.assert_array_equal(got, np.full(4, 6, np.uint8))


def test_v_variants_exchange_counts_when_not_given():
    def body(comm):
        mine = np.arange(comm.rank + 1, dtype=np.float32) + 10 * comm.rank
        counts = list(range(comm.size)) if comm.rank == 0 else None
        source = np.arange(sum(range(comm.size)), dtype=np.int8) if comm.rank == 0 else None
        return (comm.allgatherv(mine), comm.gatherv(mine, root=1),
                comm.scatterv(source, counts, root=0),
                comm.alltoallv(np.arange(comm.size) * (comm.rank + 1), [1] * comm.size))
    results = run(body, 4)
    want = np.concatenate([np.arange(r + 1, dtype=np.float32) + 10 * r for r in range(4)])
    for rank, (ag, g, sc, a2a) in enumerate(results):
        np.testing.assert_array_equal(ag, want)
        assert (g is None) == (rank != 1)
        if g is not None:
            np.testing.assert_array_equal(g, want)
        start = sum(range(rank))
        np.testing.assert_array_equal(sc, np.arange(start, start + rank, dtype=np.int8))
        np.testing.assert_array_equal(a2a, [rank * (src + 1) for src in range(4)])


def test_exscan_is_none_on_rank_zero_and_reduce_none_off_root():
    def body(comm):
        x = np.array([comm.rank + 1])
        return comm.exscan(x, "prod"), comm.reduce(x, "max", root=2)
    results = run(body, 4)
    assert results[0][0] is None
    for rank in range(1, 4):
        assert results[rank][0][0] == np.prod(np.arange(1, rank + 1))
    assert [r[1] is None for r in results] == [True, True, False, True]
    assert results[2][1][0] == 4


def test_nonblocking_collectives_complete_in_any_order():
    def body(comm):
        rng = np.random.default_rng(comm.rank)
        reqs = [comm.iallreduce(np.full(5, i + comm.rank), "sum") for i in range(5)]
        reqs.append(comm.ibarrier())
        reqs.append(comm.ibcast(np.arange(3) if comm.rank == 1 else None, root=1))
        order = rng.permutation(len(reqs))
        values = [None] * len(reqs)
        for k in order:
            while not reqs[k].test():
                pass
            values[k] = reqs[k].wait()
        return values
    for values in run(body, 3):
        for i in range(5):
            np.testing.assert_array_equal(values[i], np.full(5, 3 * i + 3))
        assert values[5] is None
        np.testing.assert_array_equal(values[6], np.arange(3))


def test_wait_all_returns_values_in_order():
    def body(comm):
        reqs = [comm.iallgather(np.array([comm.rank * k])) for k in range(4)]
        return collops.wait_all(reqs)
    for values in run(body, 2):
        for k, v in enumerate(values):
            np.testing.assert_array_equal(v, [0, k])


def test_split_and_dup_have_their_own_message_space():
    def body(comm):
        half = comm.split(comm.rank % 2, key=-comm.rank)
        none = comm.split(None if comm.rank == 0 else 1)
        dup = comm.dup()
        r1 = dup.iallreduce(np.array([1]), "sum")
        r2 = comm.iallreduce(np.array([10]), "sum")
        inner = half.allgather(np.array([comm.rank]))
        return half.rank, half.size, inner, none is None, r2.wait()[0], r1.wait()[0]
    results = run(body, 5)
    for rank, (hr, hs, inner, is_none, big, small) in enumerate(results):
        members = sorted([r for r in range(5) if r % 2 == rank % 2], key=lambda r: -r)
        assert hs == len(members) and hr == members.index(rank)
        np.testing.assert_array_equal(inner, members)
        assert is_none == (rank == 0)
        assert (big, small) == (50, 5)


def test_object_variants_round_trip_large_arrays():
    def body(comm):
        big = {"rank": comm.rank, "data": np.full(100_000, comm.rank, np.float64)}
        every = comm.allgather_object(big)
        root_list = comm.gather_object(("x", comm.rank), root=1)
        one = comm.bcast_object({"k": [1, 2, 3], "a": np.arange(5)} if comm.rank == 0 else None)
        mine = comm.scatter_object([f"to {r}" for r in range(comm.size)] if comm.rank == 2
                                   else None, root=2)
        swapped = comm.alltoall_object([(comm.rank, j, np.ones(j)) for j in range(comm.size)])
        total = comm.allreduce_object([comm.rank], lambda a, b: a + b)
        return every, root_list, one, mine, swapped, total
    for rank, (every, root_list, one, mine, swapped, total) in enumerate(run(body, 3)):
        assert [e["rank"] for e in every] == [0, 1, 2]
        for r, e in enumerate(every):
            np.testing.assert_array_equal(e["data"], np.full(100_000, r))
        assert root_list == ([("x", 0), ("x", 1), ("x", 2)] if rank == 1 else None)
        assert one["k"] == [1, 2, 3]
        np.testing.assert_array_equal(one["a"], np.arange(5))
        assert mine == f"to {rank}"
        assert [(s[0], s[1]) for s in swapped] == [(src, rank) for src in range(3)]
        assert all(len(s[2]) == rank for s in swapped)
        assert total == [0, 1, 2]


def test_last_algorithm_and_forced_algorithm():
    def body(comm):
        comm.allreduce(np.ones(4), algorithm="ring")
        first = comm.last_algorithm
        comm.set_algorithm("allreduce", "reduce_bcast")
        comm.allreduce(np.ones(4))
        return first, comm.last_algorithm
    assert run(body, 2) == [("ring", "reduce_bcast")] * 2


def test_environment_override(monkeypatch):
    monkeypatch.setenv("COLLOPS_ALLREDUCE_ALGORITHM", "rabenseifner")
    collops.reload_settings()
    try:
        def body(comm):
            comm.allreduce(np.ones(3))
            return comm.last_algorithm
        assert run(body, 2) == ["rabenseifner"] * 2
    finally:
        monkeypatch.delenv("COLLOPS_ALLREDUCE_ALGORITHM")
        collops.reload_settings()


def test_tuning_file_by_message_size(tmp_path, monkeypatch):
    tuning = tmp_path / "tuning.toml"
    tuning.write_text('[allreduce]\nalgorithm = "reduce_bcast"\n'
                      '[[allreduce.rule]]\nmax_bytes = 64\nalgorithm = "recursive_doubling"\n')
    monkeypatch.setenv("COLLOPS_TUNING_FILE", str(tuning))
    collops.reload_settings()
    try:
        def body(comm):
            comm.allreduce(np.ones(4))
            small = comm.last_algorithm
            comm.allreduce(np.ones(400))
            return small, comm.last_algorithm
        assert run(body, 2) == [("recursive_doubling", "reduce_bcast")] * 2
    finally:
        monkeypatch.delenv("COLLOPS_TUNING_FILE")
        collops.reload_settings()


def test_explain_prints_the_selection_table():
    def body(comm):
        return comm.explain("allreduce", np.ones(1000))
    text = run(body, 1)[0]
    assert "recursive_doubling" in text and "<--" in text and "est. time" in text


def _table(text):
    """{algorithm: (eligible, chosen)} from an explain table."""
    rows = {}
    for line in text.splitlines()[2:]:
        if line.startswith("decided by:"):  # the rule or cost that decided, protocols
            break
        name, rest = line.split(None, 1)
        rows[name] = (rest.startswith("yes"), "<--" in rest)
    return rows


@pytest.mark.parametrize("collective", ["allreduce", "reduce", "reduce_scatter_block", "scan"])
def test_explain_honours_a_non_commutative_operator(collective):
    minus = collops.Op(lambda a, b: a - b, commutative=False)

    def body(comm):
        x = np.ones(4 * 1000)
        return (comm.explain(collective, x), comm.explain(collective, x, op=minus),
                comm.explain(collective, x, op="max"))
    default, non_commutative, maximum = run(body, 4)[0]
    needs = {a.name for a in collops.algorithms(collective)
             if any(r.name == "commutative" for r in a.restrictions)}
    assert "op SUM" in default and "op user" in non_commutative and "op MAX" in maximum
    plain, nc = _table(default), _table(non_commutative)
    assert set(plain) == set(nc) == {a.name for a in collops.algorithms(collective)}
    for name, (eligible, chosen) in nc.items():
        if name in needs:
            assert not eligible and not chosen, non_commutative
            assert "commutative" in non_commutative.split(name, 1)[1].splitlines()[0]
        else:
            assert eligible == plain[name][0], (name, non_commutative)
    assert sum(chosen for _, chosen in nc.values()) == 1
    if collective == "allreduce":
        assert needs and all(plain[n][0] for n in needs)  # eligible for SUM: the op decided


def test_explain_checks_op_root_and_counts_like_the_call():
    def body(comm):
        errors = []
        for kwargs, collective in [({"op": "band"}, "allreduce"), ({"root": 9}, "reduce"),
                                   ({"counts": [1, 2]}, "gatherv")]:
            with pytest.raises(ArgumentError) as info:
                comm.explain(collective, np.ones(8), **kwargs)
            errors.append(info.value.argument)
        return errors, [comm.explain("gatherv", np.ones(8), counts=[1, 2, 3]),
                        comm.explain("gatherv", np.ones(8))]
    errors, (given, default) = run(body, 3)[0]
    assert errors == ["op", "root", "counts"]
    # the largest contribution: 3 float64 rows with the counts given, else x's 8 on every rank
    assert "gatherv: p=3, 24 bytes" in given and "gatherv: p=3, 64 bytes" in default


def test_spawn_reports_the_failing_rank_with_traceback():
    def body(comm):
        if comm.rank == 2:
            raise ValueError("boom on two")
        comm.barrier()
    with pytest.raises(RankFailed) as info:
        run(body, 4)
    assert info.value.rank == 2
    assert "boom on two" in str(info.value) and "Traceback" in info.value.traceback_text


@pytest.mark.parametrize("transport", ["inproc", "shm"])
def test_spawn_refuses_its_own_bad_arguments_before_any_rank_starts(transport):
    def body(comm):
        return comm.rank
    cases = [((None, 2), {}, "fn"), ((body, 0), {}, "nprocs"), ((body, "2"), {}, "nprocs"),
             ((body, 2), {"timeout": -1}, "timeout"), ((body, 2), {"timeout": 0}, "timeout"),
             ((body, 2), {"timeout": "5"}, "timeout")]
    for args, kw, name in cases:
        with pytest.raises(collops.ArgumentError, match=f"argument {name}="):
            collops.spawn(*args, transport=transport, **kw)
    assert collops.spawn(body, 2, transport=transport, timeout=30) == [0, 1]


def test_world_without_launcher_has_size_one():
    if os.environ.get("COLLOPS_JOB"):
        pytest.skip("running inside a launched job")
    world = collops.init()
    assert (world.rank, world.size) == (0, 1)
    np.testing.assert_array_equal(world.allreduce(np.arange(3)), np.arange(3))


# -- bad input: errors from collops' hierarchy naming argument, value and rank ------------

BAD_CALLS = {
    "root out of range": (lambda c: c.bcast(np.ones(2), root=7), "root", ArgumentError),
    "negative counts": (lambda c: c.alltoallv(np.ones(4), [-1, 5]), "sendcounts", ArgumentError),
    "counts of wrong length": (lambda c: c.alltoallv(np.ones(4), [4]), "sendcounts",
                               ArgumentError),
    "counts inconsistent with x": (lambda c: c.reduce_scatter(np.ones(4), "sum", [1, 1]),
                                   "counts", ArgumentError),
    "sdispls past the end": (lambda c: c.alltoallv(np.ones(4), [2, 2], [0, 3]), "sdispls",
                             ArgumentError),
    "out too small": (lambda c: c.allgather(np.ones(3), out=np.empty(2)), "out", ArgumentError),
    "out dtype mismatch": (lambda c: c.allreduce(np.ones(3), out=np.empty(3, np.float32)),
                           "out", ArgumentError),
    "op undefined for dtype": (lambda c: c.allreduce(np.ones(3), "band"), "op",
                               collops.UnsupportedOperation),
    "unknown op": (lambda c: c.allreduce(np.ones(3), "frobnicate"), "op",
                   collops.UnsupportedOperation),
    "ineligible algorithm": (lambda c: c.allreduce(np.ones(3), collops.Op(np.add, False),
                                                   algorithm="ring"), "algorithm",
                             collops.AlgorithmIneligible),
    "unknown algorithm": (lambda c: c.allgather(np.ones(3), algorithm="teleport"), "algorithm",
                          collops.UnknownAlgorithm),
    "unknown parameter": (lambda c: c.alltoall(np.ones(4), algorithm="random_chunked",
                                               chunky=3), "chunky", ArgumentError),
    "bad parameter value": (lambda c: c.alltoall(np.ones(4), algorithm="random_chunked",
                                                 chunk=0), "chunk", ArgumentError),
    "not divisible": (lambda c: c.alltoall(np.ones(3)), "x", ArgumentError),
    "object array": (lambda c: c.allgather(np.array([object()])), "x", ArgumentError),
    # what a rank sends itself (sendcounts[rank]) must be what it receives from itself
    "self block mismatch pairwise": (lambda c: c.alltoallv(np.ones(4), [2, 2], recvcounts=[1, 1],
                                                          algorithm="pairwise"), "recvcounts",
                                     ArgumentError),
    "self block mismatch auto": (lambda c: c.alltoallv(np.ones(4), [2, 2], recvcounts=[3, 3]),
                                 "recvcounts", ArgumentError),
    "self block mismatch non-blocking": (lambda c: c.ialltoallv(np.ones(4), [2, 2],
                                                                recvcounts=[2, 2][:c.rank] + [0]
                                                                + [2][c.rank:]).wait(),
                                         "recvcounts", ArgumentError),
}


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_bad_input_raises_before_sending(name):
    call, argument, kind = BAD_CALLS[name]

    def body(comm):
        with pytest.raises(kind) as info:
            call(comm)
        # the error is local: the communicator still works afterwards
        ok = comm.allreduce(np.array([1]), "sum")[0]
        return str(info.value), info.value.argument, info.value.rank, info.value.value, ok
    for rank, (text, arg, err_rank, value, ok) in enumerate(run(body, 2)):
        assert arg == argument
        assert err_rank == rank and f"rank {rank}" in text
        # the message names the argument and the value given (repr, shortened past 120 chars)
        assert f"argument {argument}=" in text, text
        shown = repr(value)
        assert (shown if len(shown) <= 120 else shown[:117] + "...") in text, (text, shown)
        assert ok == 2


def test_a_blocks_to_itself_mismatch_names_both_counts_and_is_not_a_plain_value_error():
    def body(comm):
        with pytest.raises(ArgumentError) as info:
            comm.alltoallv(np.ones(4), [2, 2], recvcounts=[1, 1], algorithm="pairwise")
        return str(info.value)
    for rank, text in enumerate(run(body, 2)):
        assert text == (f"alltoallv: argument recvcounts=[1, 1] on rank {rank}: "
                        f"recvcounts[{rank}]=1 differs from sendcounts[{rank}]=2 "
                        f"(this rank's block to itself)")


DTYPE_MISMATCH = [(c, a.name) for c in ("allgather", "alltoall")
                  for a in collops.algorithms(c) if not a.needs]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("collective,algorithm", DTYPE_MISMATCH,
                         ids=[f"{c}-{a}" for c, a in DTYPE_MISMATCH])
def test_a_dtype_mismatch_across_ranks_is_a_collops_error_on_every_rank(collective, algorithm):
    # rank 0 sends float64, the other ranks int32, in one allgather / alltoall: every rank must
    # end in a collops error (never a hang, never silently reinterpreted bytes), and some rank
    # names the mismatch with both dtypes
    def body(comm):
        x = np.arange(4 * comm.size, dtype=np.float64 if comm.rank == 0 else np.int32)
        try:
            getattr(comm, collective)(x, algorithm=algorithm, timeout=1)
        except CollopsError as exc:
            return type(exc).__name__, str(exc)
        return None, "completed"
    power_of_two = any(r.name == "power_of_two"
                       for r in get_algorithm(collective, algorithm).restrictions)
    p = 4 if power_of_two else 3
    got = run(body, p)
    assert all(kind is not None for kind, _ in got), got
    assert all(kind in ("CollectiveMismatch", "CollectiveTimeout", "PeerFailed")
               for kind, _ in got), got
    named = [text for kind, text in got if kind == "CollectiveMismatch"]
    assert named and all("dtype: float64 vs int32" in t or "dtype: int32 vs float64" in t
                         for t in named), got


def _dtype_mismatch(comm, collective):
    x = np.arange(4 * comm.size, dtype=np.float64 if comm.rank == 0 else np.int32)
    try:
        getattr(comm, collective)(x, timeout=2)
    except CollopsError as exc:
        return type(exc).__name__, str(exc)
    return None, "completed"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("collective", ["allgather", "alltoall"])
def test_a_dtype_mismatch_across_processes_is_a_collops_error_on_every_rank(collective):
    # the same over shared memory (automatic selection: the shm transport's own algorithms)
    got = collops.spawn(_dtype_mismatch, 2, collective, transport="shm", timeout=60)
    assert all(kind in ("CollectiveMismatch", "CollectiveTimeout", "PeerFailed")
               for kind, _ in got), got
    assert any(kind == "CollectiveMismatch" for kind, _ in got), got


def test_errors_derive_from_collops_error():
    for cls in (ArgumentError, RankFailed, collops.PeerFailed, collops.CollectiveMismatch,
                collops.CollectiveTimeout, collops.UnsupportedOperation):
        assert issubclass(cls, CollopsError)


def test_mismatched_collectives_are_reported():
    def body(comm):
        if comm.rank == 0:
            return comm.allreduce(np.ones(4), timeout=10)
        return comm.allgather(np.ones(2), timeout=10)
    with pytest.raises(RankFailed) as info:
        run(body, 2)
    assert info.value.exc_type in ("CollectiveMismatch", "PeerFailed")
    assert "allreduce" in str(info.value) or "allgather" in str(info.value)


def test_timeout_names_the_collective_and_silent_ranks():
    done = threading.Event()  # rank 1 stays alive but silent (returning would be PeerFailed)

    def body(comm):
        if comm.rank == 1:
            done.wait(30)
            return "idle"
        try:
            comm.allreduce(np.ones(2), timeout=0.3, algorithm="recursive_doubling")
        finally:
            done.set()
    with pytest.raises(RankFailed) as info:
        run(body, 2)
    text = str(info.value)
    assert info.value.exc_type == "CollectiveTimeout"
    assert "allreduce[recursive_doubling]" in text and "[1]" in text


def _non_native(comm):
    return (np.arange(3) + comm.rank).astype(">i4"), np.array([1.5], dtype=">f8")


@pytest.mark.timeout(60)
def test_spawn_on_processes_returns_arrays_with_their_byte_order():
    """Results cross the process boundary with pickle protocol 5, which keeps a dtype's byte
    order (older protocols turn big-endian arrays into native ones)."""
    got = collops.spawn(_non_native, 2, transport="shm", timeout=50)
    for rank, (ints, floats) in enumerate(got):
        assert ints.dtype == np.dtype(">i4") and floats.dtype == np.dtype(">f8")
        assert ints.tolist() == [rank, rank + 1, rank + 2]
