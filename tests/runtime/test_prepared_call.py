"""One prepared call per signature (`PreparedCall`), serving blocking, non-blocking and
persistent calls, in one bounded cache per communicator; results against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import collops
from collops import config


def _x(rank, shape, seed):
    n = int(np.prod(shape, dtype=np.int64))
    return ((np.arange(n) * (rank + 2) + seed) % 31).astype(np.float64).reshape(shape)


def _three_forms(comm):
    """allreduce and gather of one signature, blocking, then ``i…``, then ``…_init``: what
    each returns and the prepared calls held after each form."""
    me = comm.rank
    got, held = [], []
    for seed in range(3):  # the first blocking call prepares, the next ones bind
        got.append(comm.allreduce(_x(me, (2, 3), seed)))
        got.append(comm.gather(_x(me, (2, 3), seed), root=1))
    held.append(sorted(comm.prepared_calls()))
    got.append(comm.iallreduce(_x(me, (2, 3), 3)).wait())
    got.append(comm.igather(_x(me, (2, 3), 3), root=1).wait())
    held.append(sorted(comm.prepared_calls()))
    x = _x(me, (2, 3), 4)
    requests = [comm.allreduce_init(x), comm.gather_init(x, root=1)]
    for r in requests:
        r.start()
        got.append(r.wait())
    held.append(sorted(comm.prepared_calls()))
    return got, held


def _want(p, me, seeds):
    out = []
    for seed in seeds:
        xs = [_x(r, (2, 3), seed) for r in range(p)]
        out.append(np.sum(xs, axis=0))
        out.append(np.concatenate(xs) if me == 1 else None)
    return out


@pytest.mark.timeout(90)
@pytest.mark.parametrize("transport", ["inproc", "shm"])
def test_blocking_nonblocking_and_persistent_calls_share_one_prepared_call(transport):
    p = 3
    for me, (got, held) in enumerate(collops.spawn(_three_forms, p, transport=transport,
                                                   timeout=80)):
        want = _want(p, me, [0, 1, 2, 3, 4])
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            if w is None:
                assert g is None
            else:
                np.testing.assert_array_equal(g, w)
        # the blocking calls made one prepared call per signature; the other forms reused them
        assert held[0] == held[1] == held[2], (me, held)
        kinds = [kind for kind, collective in held[0] if collective in ("allreduce", "gather")]
        assert kinds == ["blocking", "blocking"], (me, held[0])


def _many_signatures(comm, limit):
    me = comm.rank
    got, sizes = [], []
    for round_ in range(2):
        for n in range(1, 3 * limit):
            got.append(comm.allreduce(_x(me, (n,), n + round_)).tolist())
            got.append(comm.iallgather(_x(me, (n,), n)).wait().tolist())
            sizes.append(len(comm.prepared_calls()))
    return got, sizes


@pytest.mark.timeout(90)
def test_the_cache_stays_within_its_bound_and_results_stay_right(monkeypatch):
    p, limit = 2, 6
    monkeypatch.setenv("COLLOPS_CALL_CACHE", str(limit))
    config.reload_settings()
    try:
        outcomes = collops.spawn(_many_signatures, p, limit, timeout=80)
    finally:
        monkeypatch.delenv("COLLOPS_CALL_CACHE")
        config.reload_settings()
    for me, (got, sizes) in enumerate(outcomes):
        assert max(sizes) <= limit
        k = 0
        for round_ in range(2):
            for n in range(1, 3 * limit):
                xs = [_x(r, (n,), n + round_) for r in range(p)]
                assert got[k] == np.sum(xs, axis=0).tolist(), (me, n)
                assert got[k + 1] == np.concatenate([_x(r, (n,), n) for r in range(p)]).tolist()
                k += 2
