"""Object collectives, small and large, on threads and shared memory: every form against a
plain-Python answer, the default and named operators, the scans, and one pickle per call."""

from __future__ import annotations

import functools
import operator
import pickle

import numpy as np
import pytest

import collops
from collops.runtime import objects

BIG = 10_000  # elements: a pickle larger than a slot, with an out-of-band buffer


def thing(rank: int, big: bool = False):
    """A rank's object: small, or (``big``) one with a large array and a long string."""
    if big:
        return {"rank": rank, "array": np.arange(BIG) * rank, "text": "x" * 2000}
    return {"rank": rank, "tag": f"r{rank}", "vals": (rank, rank * 2)}


def same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return bool(a == b)


def every_form(comm, big_rank: int):
    """Each object collective once; ``big_rank``'s object is large (−1: none)."""
    p, r = comm.size, comm.rank
    mine = thing(r, r == big_rank)
    out = {
        "allgather": comm.allgather_object(mine),
        "gather": comm.gather_object(mine, root=p - 1),
        "bcast": comm.bcast_object(mine if r == 1 % p else None, root=1 % p),
        "scatter": comm.scatter_object([thing(j, j == big_rank) for j in range(p)]
                                       if r == 0 else None, root=0),
        "alltoall": comm.alltoall_object([(r, j, thing(j, r == big_rank)) for j in range(p)]),
        "allreduce": comm.allreduce_object(r + 1),
        "reduce": comm.reduce_object([r], root=0),
        "scan": comm.scan_object(r + 1),
        "exscan": comm.exscan_object(r + 1),
        "max": comm.allreduce_object(r * 7 % p, "max"),
        "maxloc": comm.allreduce_object((r % 2, r), collops.MAXLOC),
        "callable": comm.allreduce_object(str(r), lambda a, b: a + b),
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


@pytest.mark.timeout(120)
def test_a_small_object_is_pickled_once_per_rank_and_call(monkeypatch):
    calls = []
    real = pickle.dumps

    def counting(obj, *args, **kwargs):
        calls.append(obj)
        return real(obj, *args, **kwargs)

    monkeypatch.setattr(objects.pickle, "dumps", counting)

    def body(comm):
        comm.barrier()
        return comm.allgather_object(comm.rank), comm.bcast_object("x" if comm.rank == 0
                                                                   else None)
    got = collops.spawn(body, 3, timeout=100)
    assert [g[0] for g in got] == [[0, 1, 2]] * 3 and [g[1] for g in got] == ["x"] * 3
    assert len(calls) == 3 + 1  # three allgather contributions, the root's broadcast


def test_an_operator_that_is_neither_named_nor_callable_is_an_error():
    def body(comm):
        with pytest.raises(collops.ArgumentError, match="op"):
            comm.allreduce_object(1, 42)
        with pytest.raises(collops.ArgumentError, match="op"):
            comm.reduce_object(1, "plus")
        return True
    assert all(collops.spawn(body, 2, timeout=60))


def test_the_slot_holds_a_pickle_up_to_its_size():
    small = objects.dumps("a" * 100)
    assert objects._fits(objects._slot(small)[None, :])
    large = objects.dumps("a" * objects.SLOT)
    assert not objects._fits(objects._slot(large)[None, :])
    assert objects._unslot(objects._slot(small)) == "a" * 100
    assert operator.add is objects._python_op(None)
