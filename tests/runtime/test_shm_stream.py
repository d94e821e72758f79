"""``shm_stream``: large collectives streamed through shared-memory rings, on real processes.

Every supported collective at 2, 3 and 4 ranks, against numpy, with the compiled loop and
with the Python one (``COLLOPS_COMPILED=0``): sizes around the chunk boundaries (one byte
over a chunk, several rings' worth, uneven), several dtypes, back-to-back blocking calls,
non-blocking calls of every collective in flight at once (with small ``shm_direct`` calls in
between) waited for last-first. Then the failures: a rank killed mid-stream, mismatched
calls, a late rank; and no segment left behind.
"""

from __future__ import annotations

import functools
import os
import time
import tracemalloc

import numpy as np
import pytest

import collops
from collops.shm import segment as seg
from collops.shm import stream as shm_stream
from collops.shm import stream_plan
from tests.support.failures import assert_survivors_name_the_dead, record_peer_failed
from tests.support.leaks import collops_segments, left_behind
from tests.support.runners import compiled_runners

NAME = shm_stream.NAME
CHUNK = seg.DEFAULT_STREAM_CHUNK_BYTES
RING = seg.DEFAULT_STREAM_CHUNKS * CHUNK
#: (dtype, items per rank): a byte over a chunk, 2.5 rings' worth, uneven, a whole chunk
SHAPES = [(np.uint8, CHUNK + 1), (np.float64, 5 * RING // 16 + 3), (np.int32, 100_003),
          (np.complex64, CHUNK // 8)]


def _counts(p, n):
    """The v-forms' blocks: uneven, one item fewer per rank."""
    return [n - j for j in range(p)]


def _input(collective, p, rank, dtype, n, salt):
    """Rank ``rank``'s send buffer (None where it sends nothing)."""
    if collective in ("bcast", "scatter", "scatterv") and rank != 0:
        return None
    items = n * p if collective in ("scatter", "alltoall", "reduce_scatter_block") else n
    if collective in ("gatherv", "allgatherv"):
        items = _counts(p, n)[rank]
    elif collective == "scatterv":
        items = sum(_counts(p, n))
    return ((np.arange(items) * (rank + 3) + salt) % 251).astype(dtype)


def _expected(collective, p, rank, dtype, n, salt):
    xs = [_input(collective, p, r, dtype, n, salt) for r in range(p)]
    if collective == "bcast":
        return xs[0]
    if collective == "scatter":
        return xs[0][rank * n:(rank + 1) * n]
    if collective == "scatterv":
        at = sum(_counts(p, n)[:rank])
        return xs[0][at: at + _counts(p, n)[rank]]
    if collective in ("gather", "gatherv"):
        return np.concatenate(xs) if rank == 0 else None
    if collective in ("allgather", "allgatherv"):
        return np.concatenate(xs)
    if collective == "reduce":  # in rank order, as the stream's root folds
        return functools.reduce(np.add, xs) if rank == 0 else None
    if collective == "allreduce":
        return functools.reduce(np.add, xs)
    if collective == "reduce_scatter_block":
        return functools.reduce(np.add, xs)[rank * n:(rank + 1) * n]
    return np.concatenate([x[rank * n:(rank + 1) * n] for x in xs])  # alltoall


def _call(comm, collective, x, blocking, n=0):
    prefix = "" if blocking else "i"
    fn = getattr(comm, prefix + collective)
    counts = _counts(comm.size, n)
    if collective == "scatterv":  # the counts at the root only
        return fn(x, counts if comm.rank == 0 else None, 0, algorithm=NAME)
    if collective == "gatherv":
        return fn(x, 0, counts, algorithm=NAME)
    if collective == "allgatherv":
        return fn(x, counts, algorithm=NAME)
    if collective in ("bcast", "scatter", "gather"):
        return fn(x, 0, algorithm=NAME)
    if collective == "reduce":
        return fn(x, "sum", 0, algorithm=NAME)
    if collective in ("allreduce", "reduce_scatter_block"):
        return fn(x, "sum", algorithm=NAME)
    return fn(x, algorithm=NAME)


def _same(got, expected):
    if expected is None:
        return got is None
    return got is not None and got.dtype == expected.dtype and np.array_equal(
        np.asarray(got).reshape(-1), expected)


def _everything(comm):
    """Every collective and shape blocking twice, then all non-blocking at once."""
    p, r = comm.size, comm.rank
    wrong = []
    salt = 0
    for collective in shm_stream.SUPPORTED:
        for dtype, n in SHAPES:
            for _ in range(2):
                salt += 1
                got = _call(comm, collective, _input(collective, p, r, dtype, n, salt), True, n)
                if not _same(got, _expected(collective, p, r, dtype, n, salt)):
                    wrong.append(("blocking", collective, np.dtype(dtype).name, n))
                if comm.last_algorithm != NAME:
                    wrong.append(("algorithm", collective, comm.last_algorithm))
    # all in flight, small direct calls in between, waited for last-first
    small = np.arange(3.0) + r
    requests = []
    for collective in shm_stream.SUPPORTED:
        for dtype, n in SHAPES[:3]:
            salt += 1
            req = _call(comm, collective, _input(collective, p, r, dtype, n, salt), False, n)
            requests.append((collective, dtype, n, salt, req))
            requests.append((None, None, 0, 0, comm.iallreduce(small, algorithm="shm_direct")))
    for collective, dtype, n, s, req in reversed(requests):
        got = req.wait()
        if collective is None:
            if not np.array_equal(got, sum(np.arange(3.0) + q for q in range(p))):
                wrong.append(("direct in between", got))
        elif not _same(got, _expected(collective, p, r, dtype, n, s)):
            wrong.append(("non-blocking", collective, np.dtype(dtype).name, n))
    return wrong


@pytest.fixture(params=["compiled", "python"])
def mode(request):
    """Run with the compiled loop and with the Python one (children fork with the setting)."""
    if request.param == "compiled":
        assert stream_plan._stream is not None, "collops.shm._stream was not built"
    with compiled_runners(request.param == "compiled"):
        yield request.param


def every_block_by_reference(spec):
    """Every block published by reference (read with process_vm_readv), whatever its size."""
    return True


def no_block_by_reference(spec):
    """Every block through the rings."""
    return False


@pytest.mark.timeout(120)
@pytest.mark.parametrize("p", [2, 3, 4])
def test_every_collective_matches_numpy(p, mode):
    before = collops_segments()
    per_rank = collops.spawn(_everything, p, transport="shm", timeout=100)
    assert per_rank == [[]] * p, per_rank
    assert not left_behind(before)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("p", [2, 3])
def test_every_collective_matches_numpy_with_blocks_by_reference(p, mode, monkeypatch):
    monkeypatch.setattr(stream_plan, "by_reference", every_block_by_reference)
    per_rank = collops.spawn(_everything, p, transport="shm", timeout=100)
    assert per_rank == [[]] * p, per_rank


def _page_aligned(nbytes, offset):
    """A uint8 array of ``nbytes`` starting ``offset`` bytes into a page."""
    raw = np.empty(nbytes + 2 * 4096, np.uint8)
    start = (-raw.ctypes.data) % 4096 + offset
    return raw[start:start + nbytes]


def _aliased_allgather(comm):
    """An allgather whose single copy into rank 1 lands 16 bytes past its source modulo 4 KiB
    (the kernel's slow case, which the compiled loop reads through a bounce buffer): rank 0
    publishes its block from its send buffer (its own copy is not aliased, so it takes the
    reader's to be fine), rank 1 from its receive buffer (its own copy would be aliased);
    the send buffers start at page offset 0, the receive buffers at 0 on rank 0 and 16 on
    rank 1."""
    n = 3 * 256 * 1024 + 4096  # more than one bounce buffer's worth, a whole number of pages
    x = _page_aligned(n, 0)
    x[:] = (np.arange(n) * (comm.rank + 3)) % 251
    out = _page_aligned(n * comm.size, 16 * comm.rank)
    comm.allgather(x, out=out, algorithm=NAME)
    expected = np.concatenate([(np.arange(n) * (r + 3)) % 251 for r in range(comm.size)])
    return bool(np.array_equal(out, expected.astype(np.uint8)))


def test_an_allgathers_own_block_is_read_from_send_unless_that_copy_would_be_aliased():
    from collops.shm.stream_protocol import IN_RECV, IN_SEND, own_block_source
    n = 1 << 20
    for rank in (0, 1, 2):
        own = (0, rank * n, n)
        for send_offset, recv_offset in ((16, 16), (0, 0), (16, 0), (0, 4000), (0, 100)):
            send, recv = 0x7F0000000000 + send_offset, 0x7F1000000000 + recv_offset
            delta = (recv_offset - send_offset) % 4096
            expected = IN_RECV if 0 < delta < 64 else IN_SEND
            for src in (0, 4096 * 3):
                assert own_block_source(own, src, n, send, recv) == expected
            # a piece too small to be slow is never worth waiting for the own copy
            assert own_block_source(own, 0, 2048, send, recv) == IN_SEND


def _plans_made(monkeypatch):
    """Record the keywords of every stream plan this process makes, compiled or not (a list
    of ``(kind, keywords)``)."""
    made = []
    compiled = stream_plan._stream

    class Compiled:  # the extension module, its Plan recorded
        def __getattr__(self, name):
            return getattr(compiled, name)

        @staticmethod
        def Plan(**keywords):
            made.append(("Plan", keywords))
            return compiled.Plan(**keywords)

    def python_plan(area, **keywords):
        made.append(("PyPlan", keywords))
        return real_python(area, **keywords)

    real_python = stream_plan.PyPlan
    if compiled is not None:
        monkeypatch.setattr(stream_plan, "_stream", Compiled())
    monkeypatch.setattr(stream_plan, "PyPlan", python_plan)
    return made


def _own_source_chosen(comm):
    """30 allgathers of 4 MiB blocks by reference, each checked; the source the plans took."""
    made = _plans_made(pytest.MonkeyPatch())
    n = 1 << 19
    wrong = []
    for i in range(30):
        x = np.arange(n, dtype=np.float64) * (comm.rank + 1) + i
        got = comm.allgather(x, algorithm=NAME)
        expected = np.concatenate([np.arange(n) * (r + 1.0) + i for r in range(comm.size)])
        if not np.array_equal(got, expected):
            wrong.append(i)
    return wrong, {keywords["own_from"] for _, keywords in made}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("table", ["builtin", "recv", "send"])
def test_an_allgathers_own_block_is_published_from_where_the_selection_table_says(
        table, mode, monkeypatch, tmp_path):
    # the built-in table says the send buffer; a user's table overrides it (correct either
    # way); the plan, compiled or not, takes what the table says
    from collops.shm.stream_protocol import IN_RECV, IN_SEND
    monkeypatch.setattr(stream_plan, "by_reference", every_block_by_reference)
    expected = IN_SEND
    if table != "builtin":
        path = tmp_path / "tuning.toml"
        path.write_text(f'[[protocols.shm_stream.own_block]]\nvalue = "{table}"\n'
                        'source = "mine"\n')
        monkeypatch.setenv("COLLOPS_TUNING_FILE", str(path))
        expected = IN_RECV if table == "recv" else IN_SEND
    collops.reload_settings()
    try:
        for wrong, sources in collops.spawn(_own_source_chosen, 2, transport="shm", timeout=50):
            assert wrong == []
            assert sources == {expected}
    finally:
        monkeypatch.delenv("COLLOPS_TUNING_FILE", raising=False)
        collops.reload_settings()


@pytest.mark.timeout(60)
def test_an_aliased_single_copy_goes_through_the_bounce_buffer_correctly(mode, monkeypatch):
    monkeypatch.setattr(stream_plan, "by_reference", every_block_by_reference)
    assert collops.spawn(_aliased_allgather, 2, transport="shm", timeout=50) == [True] * 2


#: a non-commutative, non-associative operator: a fold in any other order than the left fold
#: in rank order, ``((x0 ∘ x1) ∘ x2) ∘ …``, gives another result
SHIFT = collops.Op(lambda a, b: 3 * a + b, commutative=False, name="shift")


def _reduce_in_rank_order(comm):
    p, r = comm.size, comm.rank
    wrong = []
    n = 3 * CHUNK // 8 + 5  # several chunks, uneven
    xs = [np.arange(n, dtype=np.int64) * (q + 2) - q for q in range(p)]
    expected = functools.reduce(lambda a, b: 3 * a + b, xs)
    for root in range(p):
        got = comm.reduce(xs[r].copy(), SHIFT, root, algorithm=NAME)
        if (r == root) != (got is not None) or (got is not None
                                                and not np.array_equal(got, expected)):
            wrong.append(("blocking", root))
        mine = xs[r].copy()
        got = comm.ireduce(mine, SHIFT, root, out=mine if r == root else None,
                           algorithm=NAME).wait()
        if r == root and not (got is not None and np.array_equal(got, expected)):
            wrong.append(("in place", root))
    # allreduce: a reduce-scatter and an allgather (count divides), or a reduce and a bcast
    for m in (n - n % p, n - n % p + 1):
        ys = [x[:m] for x in xs]
        total = functools.reduce(lambda a, b: 3 * a + b, ys)
        mine = ys[r].copy()
        got = comm.allreduce(mine, SHIFT, out=mine, algorithm=NAME)
        if not np.array_equal(got, total):
            wrong.append(("allreduce in place", m))
        block = m // p
        got = comm.ireduce_scatter_block(ys[r][:block * p], SHIFT, algorithm=NAME).wait()
        if m % p == 0 and not np.array_equal(got, total[r * block:(r + 1) * block]):
            wrong.append(("reduce_scatter_block", m))
    return wrong


@pytest.mark.timeout(60)
@pytest.mark.parametrize("p", [2, 4])
def test_reductions_fold_in_rank_order_at_every_root_and_in_place(p):
    assert collops.spawn(_reduce_in_rank_order, p, transport="shm", timeout=50) == [[]] * p


def _peak_per_call(comm):
    """The most memory Python allocated during any of five reductions of one signature, the
    first (which may keep a scratch buffer for the signature) left out, and the bytes of one
    scratch buffer (a dtype the compiled kernels lack: a rank then folds after reading, not
    as it reads, see `test_fold_as_read`; numpy's add folds it in place, allocating nothing)."""
    x = np.arange(3.0 * CHUNK, dtype=np.complex128) + comm.rank
    out = np.empty(x.size // comm.size, x.dtype)
    comm.reduce_scatter_block(x, "sum", out=out, algorithm=NAME)
    peaks = []
    for _ in range(4):
        tracemalloc.start()
        comm.reduce_scatter_block(x, "sum", out=out, algorithm=NAME)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    return max(peaks), x.nbytes


@pytest.mark.timeout(60)
def test_reductions_reuse_one_scratch_buffer_per_signature():
    # no message-sized allocation per call: the calls after the first reuse its scratch
    for peak, scratch in collops.spawn(_peak_per_call, 2, transport="shm", timeout=50):
        assert peak < scratch // 8


def _late_peer(comm):
    """A blocking call whose first `advance` cannot finish (the peer comes 50 ms late) goes
    on as a `StreamExecution` from where it stopped."""
    n = 3 * RING // 8  # three rings' worth: the early rank's writes wait for the late reader
    x = np.arange(float(n)) * (comm.rank + 1)
    expected = np.concatenate([np.arange(float(n)) * (r + 1) for r in range(comm.size)])
    results = []
    # the first call goes the general way; from the second the blocking runner tries its one
    # `advance`; each next call finds the rings as they should be
    for _ in range(4):
        if comm.rank == 1:
            time.sleep(0.05)
        got = comm.allgather(x, algorithm=NAME, timeout=10)
        results.append(bool(np.array_equal(got, expected)))
    return results


@pytest.mark.timeout(60)
def test_a_call_that_cannot_finish_in_its_first_advance_goes_on_correctly():
    assert collops.spawn(_late_peer, 2, transport="shm", timeout=50) == [[True] * 4] * 2


def _plan_kind(comm):
    made = _plans_made(pytest.MonkeyPatch())
    comm.allgather(np.zeros(CHUNK), algorithm=NAME)
    return sorted({kind for kind, _ in made})


@pytest.mark.timeout(60)
def test_the_compiled_loop_runs_unless_switched_off(mode):
    kinds = collops.spawn(_plan_kind, 2, transport="shm", timeout=50)[0]
    assert kinds == (["Plan"] if mode == "compiled" else ["PyPlan"])


def _dies_mid_stream(comm, folder, collective, path):
    # every block through the rings, or every block by reference
    stream_plan.by_reference = (no_block_by_reference if path == "ring"
                                else every_block_by_reference)
    n = 4 * RING // 8 * comm.size  # 4 rings' worth: the writers wait for their readers
    x = np.ones(n)
    args = ("sum",) if collective == "allreduce" else ()
    getattr(comm, collective)(x, *args, algorithm=NAME)
    if comm.rank == 1:
        # through the rings: its first ring's worth is written, then it dies; by reference:
        # its blocks are published, then it dies before anyone could read them
        getattr(comm, "i" + collective)(x, *args, algorithm=NAME)
        os._exit(3)
    # by reference rank 1 may have read everything and its blocks been read before it died,
    # so the survivors' call completes; their next one must then raise ("pending or next")
    calls = 2 if path == "reference" else 1
    try:
        record_peer_failed(folder, comm.rank, lambda: [getattr(comm, collective)(
            x, *args, algorithm=NAME, timeout=20) for _ in range(calls)])
    finally:
        if path == "reference":
            # a survivor's blocks stay readable a while: the other meets the dead rank, not
            # this one gone after raising
            time.sleep(1.0)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", ["ring", "reference"])
@pytest.mark.parametrize("collective", ["allgather", "allreduce"])
def test_a_rank_killed_mid_stream_is_named_by_peer_failed_within_2_s(tmp_path, collective,
                                                                       path):
    assert_survivors_name_the_dead(_dies_mid_stream, tmp_path, collective, path)


def _chosen(comm):
    chosen = {}
    # bcasts of 800 bytes: a direct slot; 160 KB: beyond it, where the stream measured
    # faster; 8 MiB: beyond what it measured faster at on 2 ranks
    for n in (100, 20_000, 8 * 1024 * 1024 // 8):
        comm.bcast(np.arange(float(n)), 0)
        chosen[n] = comm.last_algorithm
    return chosen


@pytest.mark.timeout(60)
def test_selection_takes_it_only_between_a_direct_slot_and_its_measured_bound():
    chosen = collops.spawn(_chosen, 2, transport="shm", timeout=50)[0]
    assert list(chosen.values())[:2] == ["shm_direct", NAME], chosen
    assert list(chosen.values())[2] not in ("shm_direct", NAME), chosen


def _allreduce_chosen(comm):
    chosen = []
    for nbytes in (256 * 1024, 1024 * 1024, 16 * 1024 * 1024):
        comm.allreduce(np.ones(nbytes // 8), "sum")
        chosen.append(comm.last_algorithm)
    return chosen


@pytest.mark.timeout(60)
def test_a_2_rank_allreduce_streams_only_in_its_measured_window():
    small, middle, large = collops.spawn(_allreduce_chosen, 2, transport="shm", timeout=50)[0]
    assert middle == NAME
    assert small != NAME and large != NAME, (small, large)
