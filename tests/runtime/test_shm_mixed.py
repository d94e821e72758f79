"""A seeded random mix of collectives on real processes: direct and schedule algorithms,
blocking and non-blocking, the world and a sub-communicator, interleaved — every result
checked against numpy. Guards the shared-memory direct areas' slot reuse and call matching,
where an ordering bug would show as a wrong value or a hang (the timeout)."""

from __future__ import annotations

import numpy as np
import pytest

import collops

SIZES = [1, 3, 100, 600, 5000]


def _expected_sum(size: int, members: list[int]) -> np.ndarray:
    return sum(np.arange(size, dtype=float) + r for r in members)


def _mix(comm, steps: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)  # the same on every rank: the same calls in order
    p, me = comm.size, comm.rank
    sub = comm.split(me % 2)
    sub_members = [r for r in range(p) if r % 2 == me % 2]
    wrong = []
    for step in range(steps):
        kind = int(rng.integers(0, 8))
        size = int(rng.choice(SIZES))
        x = np.arange(size, dtype=float) + me
        if kind == 0:
            comm.barrier()
            continue
        if kind == 1:
            alg = str(rng.choice(["auto", "ring", "recursive_doubling"]))
            got = comm.allreduce(x, algorithm=None if alg == "auto" else alg)
            want = _expected_sum(size, list(range(p)))
        elif kind == 2:
            got = comm.bcast(x if me == 0 else None, 0)
            want = np.arange(size, dtype=float)
        elif kind == 3:
            requests = [comm.iallreduce(x), comm.ibarrier(), comm.iallgather(x)]
            total, _, gathered = collops.wait_all(requests)
            got = np.concatenate([total, gathered])
            want = np.concatenate([_expected_sum(size, list(range(p)))]
                                  + [np.arange(size, dtype=float) + r for r in range(p)])
        elif kind == 4:
            got = comm.alltoall(np.full(p * 2, float(me)))
            want = np.repeat(np.arange(p, dtype=float), 2)
        elif kind == 5:
            got = sub.allreduce(x)
            want = _expected_sum(size, sub_members)
        elif kind == 6:
            root = int(rng.integers(0, p))
            got = comm.reduce(x, root=root)
            want = _expected_sum(size, list(range(p))) if me == root else None
        else:
            got = comm.scatter(np.arange(p * 2.0) * 3 if me == 1 else None, 1)
            want = np.arange(2.0 * me, 2.0 * me + 2) * 3
        if want is None:
            ok = got is None
        else:
            ok = got is not None and got.shape == want.shape and np.allclose(got, want)
        if not ok:
            wrong.append(f"step {step} kind {kind} size {size} rank {me}")
    return wrong


@pytest.mark.timeout(120)
@pytest.mark.parametrize("nprocs", [3, 4])
def test_a_random_mix_of_collectives_matches_numpy(nprocs):
    per_rank = collops.spawn(_mix, nprocs, 400, 11 + nprocs, transport="shm", timeout=100)
    assert per_rank == [[]] * nprocs
