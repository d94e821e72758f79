"""`gather_object` and `reduce_object` as one rooted round: small and large objects (None,
nested containers with numpy arrays, objects larger than a slot on any rank, the root's own
included) against plain Python, on threads, shared memory (compiled and ``COLLOPS_COMPILED=0``)
and MPI; large objects' frames go to the root alone, straight from the object's memory; a
disagreement on the root or the call still raises."""

from __future__ import annotations

import numpy as np
import pytest

import collops
from collops.runtime import objects
from tests.mpi.harness import MPIEXEC, by_rank, mpirun
from tests.support.runners import compiled_runners

LARGE = 5_000  # float64 elements: an out-of-band buffer, far larger than a slot


def value(rank: int, large: bool) -> object:
    """Rank ``rank``'s object: None on rank 1, a nested container with small numpy arrays
    elsewhere, and (``large``) one holding a large array and a long string."""
    if large:
        return {"rank": rank, "big": np.arange(LARGE) * (rank + 1.0), "text": "t" * 900,
                "nested": [(rank, np.arange(3) + rank)]}
    if rank == 1:
        return None
    return {"rank": rank, "nested": [(rank, np.arange(3) + rank), {"s": f"r{rank}"}]}


def equal(a: object, b: object) -> bool:
    """Deep equality for values' dicts, lists, tuples and numpy arrays."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
                and a.dtype == b.dtype and np.array_equal(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(equal, a, b))
    return bool(a == b)


def gathers(comm, large: tuple[int, ...]) -> dict[str, object]:
    """Every root's gather_object and reduce_object of `value`, ranks in ``large`` large."""
    r, p = comm.rank, comm.size
    out: dict[str, object] = {}
    for root in range(p):
        out[f"gather{root}"] = comm.gather_object(value(r, r in large), root=root)
        out[f"reduce{root}"] = comm.reduce_object([r, r in large], root=root)
        mine = np.full(LARGE if large else 2, r + 1.0)  # larger than a slot, or not
        out[f"sum{root}"] = comm.reduce_object(mine, root=root)
    return out


def check(results: list[dict[str, object]], large: tuple[int, ...]) -> None:
    p = len(results)
    expected = [value(j, j in large) for j in range(p)]
    for r, got in enumerate(results):
        for root in range(p):
            here = r == root
            gathered = got[f"gather{root}"]
            assert (equal(gathered, expected) if here else gathered is None), (r, root)
            reduced = got[f"reduce{root}"]
            assert reduced == ([x for j in range(p) for x in (j, j in large)] if here
                               else None), (r, root)
            total = got[f"sum{root}"]
            if here:
                n = LARGE if large else 2
                np.testing.assert_array_equal(total, np.full(n, p * (p + 1) / 2))
            else:
                assert total is None


CASES = [(2, ()), (2, (0,)), (3, (1,)), (4, (0, 2, 3)), (4, ())]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("transport", ["inproc", "shm"])
@pytest.mark.parametrize("p, large", CASES)
def test_gather_and_reduce_objects_small_and_large(transport: str, p: int, large):
    got = collops.spawn(gathers, p, large, transport=transport, timeout=200)
    check(got, large)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("p, large", [(2, (1,)), (3, (0, 2))])
def test_gather_and_reduce_objects_without_compiled_code(p: int, large):
    with compiled_runners(False):
        got = collops.spawn(gathers, p, large, transport="shm", timeout=200)
    check(got, large)


@pytest.mark.timeout(240)
@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec missing")
def test_gather_and_reduce_objects_over_mpi():
    proc = mpirun(3, "object_gather.py", timeout=200)
    got = by_rank(proc, 3)
    assert all("error" not in got[r] for r in range(3)), proc.stdout + proc.stderr


def _frames_of_large_objects(comm):
    """The gather of one large object per rank; what each rank sent or received as frames."""
    sent: list[object] = []
    real = objects.FramesToRoot

    def recording(comm, what, seq, root, frames, expected, timeout):
        sent.append(([f for f in frames], dict(expected)))
        return real(comm, what, seq, root, frames, expected, timeout)

    objects.FramesToRoot = recording  # threads: one module, so only rank 0 patches
    comm.barrier()
    big = np.arange(LARGE) * (comm.rank + 1.0)
    small = comm.gather_object(comm.rank, root=0)
    rounds_after_small = len(sent)
    got = comm.gather_object({"big": big} if comm.rank != 2 else 7, root=0)
    comm.barrier()
    objects.FramesToRoot = real
    shares = [any(np.shares_memory(f, big) for f in frames) for frames, _ in sent]
    return small, rounds_after_small, got, shares, [e for _, e in sent]


@pytest.mark.timeout(120)
def test_large_objects_go_to_the_root_alone_from_their_memory():
    got = collops.spawn(_frames_of_large_objects, 3, transport="shm", timeout=100)
    for r, (small, rounds, gathered, shares, expected) in enumerate(got):
        assert small == ([0, 1, 2] if r == 0 else None)
        assert rounds == 0  # small objects: the one round, no frames
        if r == 0:
            assert [o if o == 7 else o["big"].tolist() for o in gathered] == [
                (np.arange(LARGE) * 1.0).tolist(), (np.arange(LARGE) * 2.0).tolist(), 7]
            assert expected == [{1: 2}]  # rank 1's pickle and its array; its own copied
            assert not np.shares_memory(gathered[0]["big"], gathered[1]["big"])
        elif r == 1:
            assert gathered is None and shares == [True]  # sent from the array itself
        else:
            assert gathered is None and shares == []  # rank 2 fit its slot: done


def _past_single_copy(comm):
    """A gather of objects holding arrays large enough for the transport's single copy."""
    n = 300_000  # 2.4 MB of float64: past the 2 MiB from which shm messages go single-copy
    got = comm.gather_object({"r": comm.rank, "a": np.arange(n) * (comm.rank + 1.0)}, root=1)
    return None if got is None else [(g["r"], np.array_equal(g["a"], np.arange(n) * (j + 1.0)))
                                     for j, g in enumerate(got)]


@pytest.mark.timeout(120)
def test_a_gather_of_objects_whose_arrays_go_single_copy():
    assert collops.spawn(_past_single_copy, 2, transport="shm", timeout=100) == [
        None, [(0, True), (1, True)]]


def _disagreeing(comm, case: str):
    """Ranks that disagree on a gather_object's root, or call another object collective."""
    try:
        if case == "root":
            comm.gather_object(comm.rank, root=0 if comm.rank < 2 else 1, timeout=20)
        elif case == "call":
            if comm.rank == 0:
                comm.gather_object(comm.rank, root=0, timeout=20)
            else:
                comm.allgather_object(comm.rank, timeout=20)
        else:
            comm.reduce_object(comm.rank, root=comm.rank % 2, timeout=20)
    except collops.CollopsError as exc:
        return type(exc).__name__
    return "completed"


#: the ranks that can tell, per case: a root meets every rank's word, a non-root its root's
#: (an allgather's ranks meet the gather root's word, or learn of its failure on threads)
TELLING = {"root": [0, 2], "call": [0], "reduce-root": [0, 1]}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", ["inproc", "shm"])
@pytest.mark.parametrize("case", sorted(TELLING))
def test_a_gather_object_disagreement_raises_a_mismatch(transport: str, case: str):
    got = collops.spawn(_disagreeing, 3, case, transport=transport, timeout=100)
    assert [got[r] for r in TELLING[case]] == ["CollectiveMismatch"] * len(TELLING[case]), got
    assert "CollectiveTimeout" not in got, got
    if case == "call":  # before, a gather_object was an allgather: this went unnoticed
        assert "completed" not in got, got
