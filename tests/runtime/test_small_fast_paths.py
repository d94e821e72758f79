"""The blocking fast path of small calls (`Comm._fast`; bcast and scatter through their envelope),
on real processes over shared memory and on threads, against numpy on the same inputs.

bcast and scatter travel in one phase when the data fits the envelope (a direct slot's worth
on shared memory): the root packs dtype, shape and data, non-roots pass None. The fast and
the general paths share the envelope, so each rank may take either: the tests mix them on
purpose (odd buffers on some ranks only, non-blocking calls in between) and check that the
fast path is what repeated calls take. Timings decide nothing here.
"""

from __future__ import annotations

import array

import numpy as np
import pytest

import collops
from collops import pair_dtype
from collops.errors import ArgumentError, CollectiveMismatch

DTYPES = [np.float64, np.complex128, np.bool_, np.int8, np.uint16, np.float32, ">i4"]
PAIR = pair_dtype(np.float64, np.int64)


def _values(dtype, shape, seed):
    """Deterministic values of ``dtype`` and ``shape`` (the same on every rank)."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    base = np.arange(n, dtype=np.int64) * 7 + seed * 13
    if dt == PAIR:
        arr = np.empty(n, PAIR)
        arr["value"] = base * 0.5
        arr["index"] = base
        return arr.reshape(shape)
    if dt.kind == "b":
        return (base % 3 == 0).reshape(shape)
    if dt.kind == "c":
        return (base + 1j * (base % 5)).astype(dt).reshape(shape)
    return (base % 100).astype(dt).reshape(shape)


def _counting(comm):
    """Count the calls that take the general path (`Comm._start`) on this rank."""
    count = [0]
    start = comm._start

    def counted(phases, blocking):
        count[0] += 1
        return start(phases, blocking)

    comm._start = counted
    return count


# -- scatter ------------------------------------------------------------------------------------
#: (dtype, rows per rank, trailing shape): inline at every p used, then two that are not inline
#: on shared memory (2000 bytes per rank: the data phase still fits a direct slot at p = 2;
#: 6000: it does not, and goes through messages)
SCATTER_CASES = ([(dt, 1, ()) for dt in DTYPES]
                 + [(np.float64, 2, (3, 2)), (np.complex64, 3, (2,)), (np.int8, 0, (4,)),
                    (PAIR, 2, ()), (np.float64, 250, ()), (np.float64, 750, ())])


def _scatter_all(comm, roots):
    p, me = comm.size, comm.rank
    general = _counting(comm)
    got = []
    for i, (dtype, rows, trailing) in enumerate(SCATTER_CASES):
        whole = _values(dtype, (p * rows, *trailing), i)
        for root in roots:
            for out_mode in ("none", "out", "flat out"):
                for rep in range(3):  # the first call prepares the fast path
                    before = general[0]
                    x = whole if me == root else None
                    out = None
                    if out_mode != "none":
                        out = np.empty((rows, *trailing), whole.dtype)
                        if out_mode == "flat out":
                            out = out.reshape(-1)
                    r = comm.scatter(x, root, out=out)
                    if out is not None:
                        assert r is out or out.size == 0 or np.shares_memory(r, out)
                    # the dtype as a string: a pickled '>i4' array comes back native
                    got.append((i, root, rep, r.dtype.str, r, general[0] - before))
    return got


@pytest.mark.timeout(120)
@pytest.mark.parametrize("p", [2, 4])
def test_scatter_matches_numpy_and_repeats_take_the_fast_path(p):
    roots = [0, p - 1]
    per_rank = collops.spawn(_scatter_all, p, roots, transport="shm", timeout=100)
    for me, results in enumerate(per_rank):
        for i, _root, rep, dtype_str, r, general in results:
            dtype, rows, trailing = SCATTER_CASES[i]
            whole = _values(dtype, (p * rows, *trailing), i)
            want = whole[me * rows: (me + 1) * rows]
            assert dtype_str == whole.dtype.str and r.shape == want.shape, (i, me)
            np.testing.assert_array_equal(r, want)
            inline = want.nbytes <= (4096 // p) - 128
            if rep and inline and np.dtype(dtype) != PAIR:
                assert general == 0, f"case {i} on rank {me}: repeated call took the general path"


def _scatter_odd_buffers(comm):
    """Some ranks take the general path (a list, a non-contiguous array, an `array.array`
    as ``out``),
    the others the fast path, in the same calls."""
    p, me = comm.size, comm.rank
    got = []
    for it in range(4):
        whole = np.arange(p * 6, dtype=np.float64).reshape(p * 2, 3) + it
        x = None
        if me == 0:
            x = whole.tolist() if it % 2 else np.asfortranarray(whole)
            x = whole if it == 3 else x
        out = array.array("d", bytes(48)) if me == 1 and it != 2 else None
        r = comm.scatter(x, 0, out=out)
        got.append(np.asarray(r).reshape(2, 3).copy())
    return got


@pytest.mark.timeout(60)
def test_scatter_ranks_on_different_paths_agree():
    p = 3
    per_rank = collops.spawn(_scatter_odd_buffers, p, transport="shm", timeout=50)
    for me, results in enumerate(per_rank):
        for it, r in enumerate(results):
            whole = np.arange(p * 6, dtype=np.float64).reshape(p * 2, 3) + it
            np.testing.assert_array_equal(r, whole[2 * me: 2 * me + 2])


def _scatter_on_threads(comm):
    p, me = comm.size, comm.rank
    got = []
    for i, (dtype, rows, trailing) in enumerate(SCATTER_CASES):
        whole = _values(dtype, (p * rows, *trailing), i)
        for _ in range(2):
            got.append(comm.scatter(whole if me == 1 else None, 1))
        got.append(comm.iscatter(whole if me == 1 else None, 1).wait())
    return got


@pytest.mark.timeout(60)
def test_scatter_envelope_over_threads_inline_or_not():
    p = 3
    per_rank = collops.spawn(_scatter_on_threads, p, timeout=50)
    for me, results in enumerate(per_rank):
        for k, r in enumerate(results):
            i = k // 3
            dtype, rows, trailing = SCATTER_CASES[i]
            whole = _values(dtype, (p * rows, *trailing), i)
            assert r.dtype == whole.dtype
            np.testing.assert_array_equal(r, whole[me * rows: (me + 1) * rows])


# -- bcast --------------------------------------------------------------------------------------
#: (dtype, shape): 8 bytes to 1 KiB inline (one phase on shared memory); 1025 and 4000 bytes
#: in a second, direct phase; 64 KiB through messages
BCAST_CASES = ([(dt, (3,)) for dt in DTYPES]
               + [(np.float64, (128,)), (np.uint8, (1024,)), (np.int16, (4, 5, 6)), (PAIR, (3,)),
                  (np.uint8, (1025,)), (np.uint8, (4000,)), (np.float64, (8192,)),
                  (np.float32, (0, 3))])


def _bcast_all(comm):
    p, me = comm.size, comm.rank
    general = _counting(comm)
    got = []
    for i, (dtype, shape) in enumerate(BCAST_CASES):
        data = _values(dtype, shape, i)
        for root in (0, p - 1):
            for out_mode in ("none", "out"):
                for rep in range(3):
                    before = general[0]
                    out = np.empty(shape, data.dtype) if out_mode == "out" else None
                    r = comm.bcast(data if me == root else None, root, out=out)
                    if out is not None:
                        assert r is out or out.size == 0 or np.shares_memory(r, out)
                    got.append((i, rep, r.dtype.str, r, general[0] - before))
    return got


@pytest.mark.timeout(120)
@pytest.mark.parametrize("p", [2, 4])
def test_bcast_matches_numpy_and_small_repeats_take_the_fast_path(p):
    per_rank = collops.spawn(_bcast_all, p, transport="shm", timeout=100)
    for me, results in enumerate(per_rank):
        for i, rep, dtype_str, r, general in results:
            dtype, shape = BCAST_CASES[i]
            want = _values(dtype, shape, i)
            assert dtype_str == want.dtype.str and r.shape == want.shape
            np.testing.assert_array_equal(r, want)
            if rep and want.nbytes <= 1024 and np.dtype(dtype) != PAIR:
                assert general == 0, f"case {i} on rank {me}: repeated call took the general path"


# -- the reductions' and gathers' fast path ---------------------------------------------------
def _reductions(comm):
    p, me = comm.size, comm.rank
    general = _counting(comm)
    got = []
    for i, (dtype, op) in enumerate([(np.float64, "sum"), (np.complex128, "prod"),
                                     (np.bool_, "lor"), (np.int8, "sum"), (np.int32, "max")]):
        x = _values(dtype, (p * 2, 3), i + me)
        for rep in range(3):
            before = general[0]
            out = np.empty((2, 3), x.dtype) if rep == 2 else None
            rsb = comm.reduce_scatter_block(x, op, out=out)
            gathered = comm.gather(x, 1, out=np.empty((p * p * 2, 3), x.dtype)
                                   if me == 1 and rep == 2 else None)
            total = comm.allreduce(x, op, out=np.empty(x.shape, x.dtype) if rep else None)
            got.append((i, rep, rsb, gathered, total, general[0] - before,
                        comm.last_algorithm))
    return got


@pytest.mark.timeout(90)
def test_reduce_scatter_block_gather_allreduce_fast_paths_match_numpy():
    p = 4
    ops = {"sum": np.add, "prod": np.multiply, "lor": np.logical_or, "max": np.maximum}
    specs = [(np.float64, "sum"), (np.complex128, "prod"), (np.bool_, "lor"), (np.int8, "sum"),
             (np.int32, "max")]
    per_rank = collops.spawn(_reductions, p, transport="shm", timeout=80)
    for me, results in enumerate(per_rank):
        for i, rep, rsb, gathered, total, general, alg in results:
            dtype, op = specs[i]
            xs = [_values(dtype, (p * 2, 3), i + r) for r in range(p)]
            want = xs[0]
            with np.errstate(all="ignore"):
                for x in xs[1:]:
                    want = ops[op](want, x).astype(want.dtype)
            np.testing.assert_array_equal(total, want)
            np.testing.assert_array_equal(rsb, want[2 * me: 2 * me + 2])
            if me == 1:
                np.testing.assert_array_equal(gathered, np.concatenate(xs))
            else:
                assert gathered is None
            assert alg == "shm_direct"
            if rep:
                assert general == 0, f"case {i} rep {rep} on rank {me} took the general path"


# -- errors ---------------------------------------------------------------------------------------
def _wrong_out(comm):
    p, me = comm.size, comm.rank
    raised = []
    whole = np.arange(p * 2.0)
    big = np.arange(p * 300.0)  # 2400 bytes per rank: not inline, a data phase follows
    for _ in range(3):  # general path first, then the fast path
        for data in (whole, big):
            rows = len(data) // p
            comm.scatter(data if me == 0 else None, 0)
            try:  # raised at the root, which tells the others (`abandon`): nothing else sent
                comm.scatter(data if me == 0 else None, 0,
                             out=np.empty(rows + 1) if me == 0 else None)
            except ArgumentError as exc:
                raised.append(("root scatter", exc.argument, exc.rank))
            except CollectiveMismatch as exc:
                raised.append(("told", "out=(" in str(exc), me))
            try:  # a non-root learns the shape from the envelope, then raises
                comm.scatter(data if me == 0 else None, 0,
                             out=np.empty(rows + 1) if me == 1 else None)
            except ArgumentError as exc:
                raised.append(("scatter", exc.argument, exc.rank))
            if data is whole:  # (a larger one may start its data phase early, on a guess
                try:           # from ``out`` that a wrong ``out`` makes wrong)
                    comm.bcast(data if me == 0 else None, 0,
                               out=np.empty(len(data), np.float32) if me == 1 else None)
                except ArgumentError as exc:
                    raised.append(("bcast", exc.argument, exc.rank))
            # the calls still match afterwards
            r = comm.scatter(data if me == 0 else None, 0)
            np.testing.assert_array_equal(r, data[me * rows: (me + 1) * rows])
    x = np.arange(p * 2.0)
    for _ in range(3):
        comm.allreduce(x, out=np.empty(len(x)))
        try:
            comm.allreduce(x, out=np.empty(len(x) + 1))  # raised before anything is sent
        except ArgumentError as exc:
            raised.append(("allreduce", exc.argument, exc.rank))
    return raised


@pytest.mark.timeout(60)
def test_a_wrong_out_raises_argument_error_naming_it_and_the_calls_still_match():
    per_rank = collops.spawn(_wrong_out, 3, transport="shm", timeout=50)
    assert per_rank[0] == [("root scatter", "out", 0)] * 6 + [("allreduce", "out", 0)] * 3
    assert per_rank[1] == [("told", True, 1), ("scatter", "out", 1), ("bcast", "out", 1),
                           ("told", True, 1), ("scatter", "out", 1)] * 3 + [
                               ("allreduce", "out", 1)] * 3
    assert per_rank[2] == [("told", True, 2)] * 6 + [("allreduce", "out", 2)] * 3


def _bad_arguments(comm):
    p, me = comm.size, comm.rank
    raised = []
    for bad in ([0], 5, -1):
        try:
            comm.scatter(np.arange(p * 1.0), bad)
        except ArgumentError as exc:
            raised.append(exc.argument)
        try:
            comm.bcast(np.arange(2.0), bad)
        except ArgumentError as exc:
            raised.append(exc.argument)
    for x in (np.arange(p * 1.0 + 1), np.float64(3.0), np.zeros((p,) + (1,) * 8)):
        for _ in range(2):
            try:  # the root's mistake: it tells the others (`abandon`), who raise a mismatch
                comm.scatter(x if me == 0 else None, 0)
            except ArgumentError as exc:
                raised.append(exc.argument)
            except CollectiveMismatch as exc:
                raised.append("told" if "on rank 0" in str(exc) else str(exc))
    return raised


@pytest.mark.timeout(60)
def test_bad_roots_and_arrays_raise_argument_errors():
    for rank, raised in enumerate(collops.spawn(_bad_arguments, 2, transport="shm", timeout=50)):
        assert raised == ["root"] * 6 + ["x" if rank == 0 else "told"] * 6


def _mismatch(comm, warm):
    x = np.arange(4.0)
    for _ in range(warm):
        comm.scatter(x if comm.rank == 0 else None, 0)
        comm.bcast(x if comm.rank == 0 else None, 0)
    try:
        if comm.rank == 0:
            comm.scatter(x, 0)
        else:
            comm.bcast(None, 0)
        comm.barrier(timeout=20)  # where a root 0 that did not wait for its reader finds it
    except CollectiveMismatch as exc:
        return str(exc)
    return "no error"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("warm", [0, 3])
def test_scatter_against_bcast_is_a_mismatch(warm):
    texts = collops.spawn(_mismatch, 2, warm, transport="shm", timeout=50)
    # the root meets every member's word, at the call or at its next one, so it raises too
    for text in texts:
        assert "scatter" in text and "bcast" in text, texts


# -- blocking and non-blocking together ---------------------------------------------------------
def _mixed(comm):
    p, me = comm.size, comm.rank
    wrong = []
    for it in range(6):
        whole = np.arange(p * 2 * 3, dtype=np.int32).reshape(p * 2, 3) + it
        small = np.arange(5, dtype=np.complex128) * (it + 1j)
        big = np.arange(p * 700.0) + it
        a = comm.iscatter(whole if me == 0 else None, 0)
        b = comm.ibcast(small if me == p - 1 else None, p - 1)
        c = comm.scatter(whole if me == 1 else None, 1)
        d = comm.bcast(small if me == 0 else None, 0, out=np.empty(5, np.complex128))
        e = comm.iscatter(big if me == 0 else None, 0)
        f = comm.allreduce(np.full(3, float(me)))
        g = comm.scatter(big if me == p - 1 else None, p - 1)
        h = comm.reduce_scatter_block(np.full(p, me + it, np.int64))
        results = [(e.wait(), big[me * 700: (me + 1) * 700]), (c, whole[2 * me: 2 * me + 2]),
                   (b.wait(), small), (a.wait(), whole[2 * me: 2 * me + 2]), (d, small),
                   (f, np.full(3, float(sum(range(p))))), (g, big[me * 700: (me + 1) * 700]),
                   (h, np.full(1, sum(r + it for r in range(p))))]
        for k, (got, want) in enumerate(results):
            if got.dtype != want.dtype or not np.array_equal(got, want):
                wrong.append((it, k, got.tolist()))
    return wrong


@pytest.mark.timeout(90)
@pytest.mark.parametrize("p", [2, 3])
def test_blocking_and_non_blocking_calls_interleave(p):
    assert collops.spawn(_mixed, p, transport="shm", timeout=80) == [[]] * p


def _settings_change(comm):
    from collops import config
    x = np.arange(comm.size * 2.0)
    got = [comm.scatter(x if comm.rank == 0 else None, 0) for _ in range(3)]
    got += [comm.bcast(x if comm.rank == 0 else None, 0) for _ in range(3)]
    before = config.generation
    config.reload_settings()  # the same settings: the templates are dropped and made again
    got += [comm.scatter(x if comm.rank == 0 else None, 0) for _ in range(3)]
    got += [comm.bcast(x if comm.rank == 0 else None, 0) for _ in range(3)]
    got += [comm.allreduce(x) for _ in range(2)]
    return [g.tolist() for g in got], config.generation > before


@pytest.mark.timeout(60)
def test_calls_after_a_settings_change_still_match():
    for me, (got, changed) in enumerate(collops.spawn(_settings_change, 2, transport="shm",
                                                      timeout=50)):
        x = np.arange(4.0)
        assert changed
        mine = x[2 * me: 2 * me + 2].tolist()
        assert got == ([mine] * 3 + [x.tolist()] * 3) * 2 + [(2 * x).tolist()] * 2
