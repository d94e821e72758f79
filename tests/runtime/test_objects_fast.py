"""Object collectives, small and large, on threads and shared memory, with the compiled slot
codec and the Python one: every form against a plain-Python answer, the default and named
operators, the scans, one pickle per call, and the codec itself."""

from __future__ import annotations

import functools
import operator
import pickle
import time

import numpy as np
import pytest

import collops
from collops.runtime import _slots, objects, slot_codec
from tests.support.runners import compiled_runners

BIG = 10_000  # elements: a pickle larger than a slot, with an out-of-band buffer


def thing(rank: int, big: bool = False):
    """A rank's object: small (odd ranks' None), or (``big``) one with a large array and a
    long string."""
    if big:
        return {"rank": rank, "array": np.arange(BIG) * rank, "text": "x" * 2000}
    if rank % 2:
        return None
    return {"rank": rank, "tag": f"r{rank}", "vals": (rank, rank * 2)}


def same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return bool(a == b)


def every_form(comm, big_rank: int, timeout: float | None = None):
    """Each object collective once; ``big_rank``'s object is large (−1: none); with
    ``timeout``, every call is given it."""
    p, r = comm.size, comm.rank
    mine = thing(r, r == big_rank)
    kw = {} if timeout is None else {"timeout": timeout}
    out = {
        "allgather": comm.allgather_object(mine, **kw),
        "gather": comm.gather_object(mine, root=p - 1, **kw),
        "bcast": comm.bcast_object(mine if r == 1 % p else None, root=1 % p, **kw),
        "scatter": comm.scatter_object([thing(j, j == big_rank) for j in range(p)]
                                       if r == 0 else None, root=0, **kw),
        "alltoall": comm.alltoall_object([(r, j, thing(j, r == big_rank)) for j in range(p)],
                                         **kw),
        "allreduce": comm.allreduce_object(r + 1, **kw),
        "reduce": comm.reduce_object([r], root=0, **kw),
        "scan": comm.scan_object(r + 1, **kw),
        "exscan": comm.exscan_object(r + 1, **kw),
        "max": comm.allreduce_object(r * 7 % p, "max", **kw),
        "maxloc": comm.allreduce_object((r % 2, r), collops.MAXLOC, **kw),
        "callable": comm.allreduce_object(str(r), lambda a, b: a + b, **kw),
    }
    return out


def check(got, p: int, big_rank: int) -> None:
    objs = [thing(j, j == big_rank) for j in range(p)]
    for r, out in enumerate(got):
        assert all(same(a, b) for a, b in zip(out["allgather"], objs, strict=True))
        if r == p - 1:
            assert all(same(a, b) for a, b in zip(out["gather"], objs, strict=True))
        else:
            assert out["gather"] is None
        assert same(out["bcast"], objs[1 % p])
        assert same(out["scatter"], thing(r, r == big_rank))
        assert [x[:2] for x in out["alltoall"]] == [(j, r) for j in range(p)]
        assert all(same(x[2], thing(r, j == big_rank)) for j, x in enumerate(out["alltoall"]))
        assert out["allreduce"] == sum(range(1, p + 1))
        assert out["reduce"] == (list(range(p)) if r == 0 else None)
        assert out["scan"] == sum(range(1, r + 2))
        assert out["exscan"] == (None if r == 0 else sum(range(1, r + 1)))
        assert out["max"] == max(j * 7 % p for j in range(p))
        assert out["maxloc"] == functools.reduce(
            lambda a, b: b if b[0] > a[0] or (b[0] == a[0] and b[1] < a[1]) else a,
            [(j % 2, j) for j in range(p)])
        assert out["callable"] == "".join(str(j) for j in range(p))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("transport", ["inproc", "shm"])
@pytest.mark.parametrize("p, big_rank", [(1, -1), (2, -1), (3, -1), (3, 2), (4, 0)])
def test_every_object_collective_small_and_large(transport: str, p: int, big_rank: int):
    got = collops.spawn(every_form, p, big_rank, transport=transport, timeout=150)
    check(got, p, big_rank)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("transport", ["inproc", "shm"])
@pytest.mark.parametrize("big_rank", [-1, 1])
def test_every_object_collective_takes_a_timeout(transport: str, big_rank: int):
    got = collops.spawn(every_form, 3, big_rank, 30.0, transport=transport, timeout=150)
    check(got, 3, big_rank)


def _late_peer(comm, call: str):
    """Rank 0 calls at once with a short timeout; rank 1 comes 3 s late."""
    if comm.rank == 1:
        time.sleep(3.0)
    try:
        if call == "allgather":
            comm.allgather_object(comm.rank, timeout=0.5 if comm.rank == 0 else 20.0)
        else:
            comm.bcast_object({"a": 1} if comm.rank == 0 else None, root=0,
                              timeout=0.5 if comm.rank == 0 else 20.0)
    except collops.CollopsError as exc:
        return type(exc).__name__
    return "completed"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", ["inproc", "shm"])
@pytest.mark.parametrize("call", ["allgather", "bcast"])
def test_an_object_call_waiting_past_its_timeout_raises(transport: str, call: str):
    # rank 1 then completes with what rank 0 had sent, or is told: never left waiting
    got = collops.spawn(_late_peer, 2, call, transport=transport, timeout=90)
    assert got[0] == "CollectiveTimeout", got


@pytest.mark.timeout(180)
@pytest.mark.parametrize("transport", ["inproc", "shm"])
@pytest.mark.parametrize("p, big_rank", [(2, -1), (2, 1), (3, 0)])
def test_every_object_collective_with_the_python_codec(transport: str, p: int, big_rank: int):
    with compiled_runners(False):
        got = collops.spawn(every_form, p, big_rank, transport=transport, timeout=150)
    check(got, p, big_rank)


def slot_sized(rank: int, p: int, fits: bool):
    """An object whose pickle is exactly one byte longer than a slot holds (``fits`` false),
    or exactly as long as it holds, with the rank in it."""
    return (rank, text_pickled_to(objects.SLOT - slot_codec.HEAD + (0 if fits else 1),
                                  lambda text: (rank, text)))


def text_pickled_to(length: int, wrap=lambda text: text) -> str:
    """A string of y's that, wrapped, pickles (protocol 5) to exactly ``length`` bytes."""
    for n in range(length):
        if len(pickle.dumps(wrap("y" * n), protocol=5)) == length:
            return "y" * n
    raise AssertionError(f"no string pickles to {length} bytes")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("fits", [True, False])
def test_objects_at_the_slot_boundary_and_small_arrays(compiled: bool, fits: bool):
    """A pickle that just fits its slot and one a byte too long, and small numpy arrays
    inside objects (out-of-band buffers), come back equal on every form."""
    def body(comm):
        p, r = comm.size, comm.rank
        mine = slot_sized(r, p, fits)
        arr = {"a": np.arange(3.0) + r}
        return (comm.allgather_object(mine), comm.gather_object(mine, root=1),
                comm.bcast_object(mine if r == 0 else None),
                comm.scatter_object([slot_sized(j, p, fits) for j in range(p)]
                                    if r == 1 else None, root=1),
                comm.alltoall_object([slot_sized(j, p, fits) for j in range(p)]),
                comm.allgather_object(arr), comm.allreduce_object(arr["a"]),
                comm.scan_object(mine[1]), comm.exscan_object(mine[1]))
    with compiled_runners(compiled):
        got = collops.spawn(body, 3, transport="shm", timeout=150)
    objs = [slot_sized(j, 3, fits) for j in range(3)]
    for r, (ag, ga, bc, sc, a2a, arrays, total, scan, exscan) in enumerate(got):
        assert ag == objs and bc == objs[0] and sc == objs[r] and a2a == [objs[r]] * 3
        assert ga == (objs if r == 1 else None)
        assert [a["a"].tolist() for a in arrays] == [[j, j + 1.0, j + 2.0] for j in range(3)]
        np.testing.assert_array_equal(total, sum(np.arange(3.0) + j for j in range(3)))
        assert scan == "".join(o[1] for o in objs[: r + 1])
        assert exscan == (None if r == 0 else "".join(o[1] for o in objs[:r]))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("compiled", [True, False])
def test_small_arrays_in_objects_take_one_round_and_large_ones_the_frames(monkeypatch,
                                                                        compiled: bool):
    frames_paths = []
    real = objects._gather_frames

    def counting(comm, frames, timeout):
        frames_paths.append(comm.rank)
        return real(comm, frames, timeout)

    monkeypatch.setattr(objects, "_gather_frames", counting)

    def body(comm):
        small = comm.allgather_object({"a": np.arange(8.0) + comm.rank})
        ones = len(frames_paths)
        comm.barrier()
        large = comm.allgather_object({"a": np.arange(100.0) + comm.rank})
        return small, ones, large
    with compiled_runners(compiled):
        got = collops.spawn(body, 2, transport="inproc", timeout=100)
    for small, ones, large in got:
        assert [o["a"].tolist() for o in small] == [(np.arange(8.0) + j).tolist()
                                                    for j in range(2)]
        assert [o["a"].tolist() for o in large] == [(np.arange(100.0) + j).tolist()
                                                    for j in range(2)]
        assert ones == 0
    assert sorted(frames_paths) == [0, 1]


PICKLED: list[int] = []


class Counted:
    """An object that counts how often it is pickled (in `PICKLED`)."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def __reduce__(self):
        PICKLED.append(self.rank)
        return Counted, (self.rank,)

    def __eq__(self, other):
        return isinstance(other, Counted) and other.rank == self.rank


@pytest.mark.timeout(120)
@pytest.mark.parametrize("compiled", [True, False])
def test_a_small_object_is_pickled_once_per_rank_and_call(compiled: bool):
    """One pickle per contributing rank; a bcast's non-roots pickle nothing, even when they
    pass an object."""
    PICKLED.clear()

    def body(comm):
        comm.barrier()
        return (comm.allgather_object(Counted(comm.rank)),
                comm.bcast_object(Counted(10 + comm.rank)),
                comm.alltoall_object([Counted(comm.rank)] * comm.size))
    with compiled_runners(compiled):
        got = collops.spawn(body, 3, timeout=100)
    assert [g[0] for g in got] == [[Counted(0), Counted(1), Counted(2)]] * 3
    assert [g[1] for g in got] == [Counted(10)] * 3
    assert [g[2] for g in got] == [[Counted(0), Counted(1), Counted(2)]] * 3
    # three allgather contributions, the root's broadcast, three per rank in the alltoall
    assert sorted(PICKLED) == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 10]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", ["inproc", "shm"])
def test_mismatched_object_calls_still_raise(transport: str):
    """Every rank raises; one that sees the other's call says it is a mismatch (its peer may
    learn of it as the rank's failure)."""
    def body(comm):
        with pytest.raises(collops.CollopsError) as info:
            if comm.rank == 0:
                comm.allgather_object(comm.rank)
            else:
                comm.bcast_object("x")
        return type(info.value)
    raised = collops.spawn(body, 2, transport=transport, timeout=100)
    assert collops.CollectiveMismatch in raised, raised


def test_an_operator_that_is_neither_named_nor_callable_is_an_error():
    def body(comm):
        with pytest.raises(collops.ArgumentError, match="op"):
            comm.allreduce_object(1, 42)
        with pytest.raises(collops.ArgumentError, match="op"):
            comm.reduce_object(1, "plus")
        return True
    assert all(collops.spawn(body, 2, timeout=60))


@pytest.mark.parametrize("codec", [_slots, slot_codec], ids=["compiled", "python"])
def test_the_codec_fills_a_slot_up_to_its_size_and_reads_what_it_is_asked(codec):
    slot, head = objects.SLOT, slot_codec.HEAD
    rows = np.zeros(4 * slot, np.uint8)
    room = slot - head
    exact = text_pickled_to(room)
    longer = text_pickled_to(room + 1)
    assert codec.encode(rows, 0, slot, exact) is None
    assert codec.encode(rows, slot, slot, None) is None
    assert codec.encode(rows, 2 * slot, slot, [1, "b"]) is None
    assert codec.decode(rows, slot, 3, 0, 3) == [exact, None, [1, "b"]]
    assert codec.decode(rows, slot, 3, 1, 2) == [None, [1, "b"]]
    assert codec.decode(rows, slot, 3, 0, 0) == []
    # a byte too long, or an out-of-band buffer: the slot says so and the pickle comes back
    main, buffers = codec.encode(rows, 3 * slot, slot, longer)
    assert pickle.loads(main) == longer and buffers == []
    assert codec.decode(rows, slot, 4, 0, 1) is None
    assert codec.decode(rows, slot, 3, 0, 1) == [exact]  # the fourth not among the total
    # a small array stays in band, in the slot; a larger one travels out of band
    small = np.arange(4)
    assert codec.encode(rows, 3 * slot, slot, {"x": small}) is None
    np.testing.assert_array_equal(codec.decode(rows, slot, 4, 3, 1)[0]["x"], small)
    array = np.arange(room // 8 + 1)
    main, buffers = codec.encode(rows, 3 * slot, slot, {"x": array})
    assert len(buffers) == 1 and np.shares_memory(np.asarray(buffers[0]), array)
    assert len(main) < room
    np.testing.assert_array_equal(pickle.loads(main, buffers=buffers)["x"], array)
    assert codec.decode(rows, slot, 4, 0, 4) is None
    # slots out of the buffer, or a corrupt length, are errors, not reads out of bounds
    with pytest.raises(ValueError):
        codec.encode(rows, 4 * slot - 1, slot, 1)
    with pytest.raises(ValueError):
        codec.decode(rows, slot, 5, 0, 1)
    with pytest.raises(ValueError):
        codec.decode(rows, slot, 2, 1, 2)
    rows[:head].view(np.int64)[0] = room + 1
    with pytest.raises(ValueError, match="corrupt"):
        codec.decode(rows, slot, 1, 0, 1)


def test_the_python_operator_defaults_to_add():
    assert operator.add is objects._python_op(None)
