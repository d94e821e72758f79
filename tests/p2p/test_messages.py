"""Point-to-point messages against MPI's semantics and numpy: order, wildcards, sizes, dtypes,
truncation, probes, synchronous sends, rings, cancel, objects and PROC_NULL."""

from __future__ import annotations

import pickle
import time

import numpy as np
import pytest

import collops
from collops import ANY_SOURCE, ANY_TAG, PROC_NULL, TruncationError
from collops.shm import segment as seg

pytestmark = pytest.mark.timeout(180)


def _plan(seed: int, n: int, tags: int) -> tuple[list[int], list[int]]:
    """Tags of ``n`` messages and a sequence of receive filters (a tag or ANY_TAG) that
    takes all of them, each filter chosen among those some message still fits."""
    rng = np.random.default_rng(seed)
    sent = [int(t) for t in rng.integers(0, tags, n)]
    left = list(sent)
    filters = []
    for _ in range(n):
        choices = sorted(set(left)) + [ANY_TAG]
        f = int(choices[rng.integers(0, len(choices))])
        filters.append(f)
        left.remove(left[0] if f == ANY_TAG else f)
    return sent, filters


def _model(sent: list[int], filters: list[int]) -> list[int]:
    """MPI's answer for one sender: each receive takes the earliest remaining fitting
    message (the message's index)."""
    left = list(enumerate(sent))
    taken = []
    for f in filters:
        k = next(i for i, (_, tag) in enumerate(left) if f in (ANY_TAG, tag))
        taken.append(left.pop(k)[0])
    return taken


def test_one_senders_messages_match_in_mpis_order(run):
    sent, filters = _plan(7, 120, 3)

    def body(comm):
        if comm.rank == 0:  # non-blocking: a blocking send of a large message would wait
            requests = [comm.isend(np.full(1 + i % 3 * 700, i, np.int64), 1, tag)  # for its
                        for i, tag in enumerate(sent)]  # receive, which comes after later ones
            collops.wait_all(requests)
            return None
        got = []
        for f in filters:
            data, status = comm.recv(source=0, tag=f)
            assert status.tag == sent[int(data[0])] and status.source == 0
            got.append(int(data[0]))
        return got

    assert run(body, 2)[1] == _model(sent, filters)


def test_wildcard_receives_keep_each_senders_order_across_ranks(run):
    per_sender = 40

    def body(comm):
        if comm.rank:
            for i in range(per_sender):
                comm.send(np.array([comm.rank, i]), 0, tag=i % 4)
            return None
        seen: dict[int, list[int]] = {}
        for _ in range(per_sender * (comm.size - 1)):
            data, status = comm.recv()  # ANY_SOURCE, ANY_TAG
            assert status.source == data[0] and status.tag == data[1] % 4
            seen.setdefault(int(data[0]), []).append(int(data[1]))
        return seen

    for p in (3, 4):
        seen = run(body, p)[0]
        assert seen == {r: list(range(per_sender)) for r in range(1, p)}


def test_wildcard_source_with_a_fixed_tag_takes_only_that_tag(run):
    def body(comm):
        if comm.rank:
            comm.send(np.array([comm.rank * 10 + 1]), 0, tag=1)
            comm.send(np.array([comm.rank * 10 + 2]), 0, tag=2)
            return None
        twos = sorted(int(comm.recv(source=ANY_SOURCE, tag=2)[0][0]) for _ in range(2))
        ones = sorted(int(comm.recv(source=ANY_SOURCE, tag=1)[0][0]) for _ in range(2))
        return twos, ones

    assert run(body, 3)[0] == ([12, 22], [11, 21])


SIZES = [0, 1, 8, 4095, 4096, 4097, 65536, 1 << 20, 16 << 20]


def test_sizes_dtypes_and_shapes_arrive_as_sent(run):
    dtypes = [np.float64, np.float32, np.int8, np.complex128, np.bool_, np.uint16]

    def make(i, n, dtype):
        rng = np.random.default_rng(i)
        return (rng.integers(0, 100, n) % 2 if dtype is np.bool_ else
                rng.integers(0, 100, n)).astype(dtype)

    def body(comm):
        if comm.rank == 0:
            for i, nbytes in enumerate(SIZES):
                dtype = dtypes[i % len(dtypes)]
                comm.send(make(i, nbytes // np.dtype(dtype).itemsize, dtype), 1, tag=i)
            comm.send(np.arange(24.0).reshape(2, 3, 4), 1, tag=100)
            comm.send(np.array(3.5), 1, tag=101)
            comm.send(collops.pairs(np.arange(5.0), np.arange(5)), 1, tag=102)
            return None
        report = []
        for i, nbytes in enumerate(SIZES):
            dtype = dtypes[i % len(dtypes)]
            n = nbytes // np.dtype(dtype).itemsize
            data, status = comm.recv(source=0, tag=i)
            expected = make(i, n, dtype)
            report.append((data.dtype == expected.dtype, np.array_equal(data, expected),
                           status.nbytes == expected.nbytes, status.count == n))
            # into a caller's buffer, twice as large: the bytes land at its start
        cube, _ = comm.recv(source=0, tag=100)
        scalar, _ = comm.recv(source=0, tag=101)
        pair, _ = comm.recv(source=0, tag=102)
        return report, cube, scalar, pair

    report, cube, scalar, pair = run(body, 2)[1]
    assert all(all(r) for r in report), report
    np.testing.assert_array_equal(cube, np.arange(24.0).reshape(2, 3, 4))
    assert scalar.shape == () and scalar == 3.5
    np.testing.assert_array_equal(pair, collops.pairs(np.arange(5.0), np.arange(5)))


#: payload bytes of a 1-D uint8 message that one shared-memory cell holds (the cell's body
#: less the dims and the dtype token), and the most a chain of cells carries
_CELL = seg.Layout.for_ranks(2).p2p_cell_bytes - 64 - 16
_CHAIN = 65536
CELL_EDGES = [_CELL - 1, _CELL, _CELL + 1, 2 * (_CELL + 16) - 16, 5 * (_CELL + 16) + 1,
              _CHAIN - 1, _CHAIN, _CHAIN + 1, 3]


def test_messages_around_a_cells_size_keep_order_content_and_truncation(run):
    def make(i, n):
        return np.random.default_rng(i).integers(0, 256, n, dtype=np.uint8)

    def body(comm):
        if comm.rank == 0:  # all in flight at once, one tag: order alone sorts them
            requests = [comm.isend(make(i, n), 1, tag=4) for i, n in enumerate(CELL_EDGES)]
            requests += [comm.isend(make(100 + i, n), 1, tag=5) for i, n in enumerate(CELL_EDGES)]
            collops.wait_all(requests)
            return None
        report = []
        for i, n in enumerate(CELL_EDGES):  # into a buffer, and as new arrays by wildcards
            out = np.full(n + 5, 9, np.uint8)
            data, status = comm.recv(out, source=0, tag=4)
            report.append((status.nbytes == n, np.array_equal(out[:n], make(i, n)),
                           bool((out[n:] == 9).all())))
        for i, n in enumerate(CELL_EDGES):
            if i % 3 == 1:
                with pytest.raises(TruncationError) as info:
                    comm.recv(np.empty(n - 1, np.uint8), source=0, tag=ANY_TAG)
                report.append((f"{n} bytes" in str(info.value),))
                continue
            data, status = comm.recv(source=ANY_SOURCE, tag=ANY_TAG)
            report.append((status.tag == 5, np.array_equal(data, make(100 + i, n))))
        return report

    report = run(body, 2)[1]
    assert all(all(r) for r in report), report


def test_a_buffer_given_receives_in_place_and_truncation_names_both_sizes(run):
    def body(comm):
        if comm.rank == 0:
            for n in (10, 5000, 1 << 20):
                comm.send(np.arange(n, dtype=np.float64), 1, tag=1)  # fits
                comm.send(np.arange(n, dtype=np.float64), 1, tag=2)  # truncated
                comm.send(np.full(3, float(n)), 1, tag=3)  # the next message still comes
            return None
        out = []
        for n in (10, 5000, 1 << 20):
            buf = np.full(n + 7, -1.0)
            data, status = comm.recv(buf, source=0, tag=1)
            assert data is buf and status.nbytes == 8 * n
            np.testing.assert_array_equal(buf[:n], np.arange(n, dtype=np.float64))
            assert (buf[n:] == -1).all()
            small = np.zeros(n - 1)
            with pytest.raises(TruncationError) as info:
                comm.recv(small, source=0, tag=2)
            out.append(str(info.value))
            after, _ = comm.recv(source=0, tag=3)
            assert after.tolist() == [float(n)] * 3
        return out

    texts = run(body, 2)[1]
    for n, text in zip((10, 5000, 1 << 20), texts, strict=True):
        assert f"{8 * n} bytes" in text and f"{8 * (n - 1)} bytes" in text, text


def test_probe_iprobe_and_a_matched_probe(run):
    def body(comm):
        if comm.rank == 0:
            comm.barrier()
            comm.send(np.arange(3), 1, tag=5)  # A
            comm.send(np.arange(70000), 1, tag=5)  # B, large
            comm.send(np.arange(4), 1, tag=6)
            return None
        before = comm.iprobe(0, 5)
        comm.barrier()
        status = comm.probe(0, 5)
        message = comm.mprobe(0, 5)  # takes A: the probe saw A
        assert message.status.nbytes == status.nbytes == 24
        b, b_status = comm.recv(source=0, tag=5)  # A is taken: B comes
        a, a_status = message.recv()
        with pytest.raises(collops.ArgumentError):
            message.recv()
        late = None
        while late is None:
            late = comm.improbe(ANY_SOURCE, ANY_TAG)
        c, _ = late.irecv().wait()
        return before, a.tolist(), b_status.nbytes, int(b[-1]), c.tolist(), a_status.tag

    before, a, b_bytes, b_last, c, tag = run(body, 2)[1]
    assert before is None and a == [0, 1, 2] and b_bytes == 8 * 70000 and b_last == 69999
    assert c == [0, 1, 2, 3] and tag == 5


def test_a_matched_probe_of_a_large_message_keeps_its_place(run):
    n = 100_000  # large on every transport: the payload follows its envelope

    def body(comm):
        if comm.rank == 0:
            collops.wait_all([comm.isend(np.full(n, float(k)), 1, tag=3) for k in (1, 2)])
            return None
        seen = comm.probe(0, 3)
        message = comm.mprobe(0, 3)
        second, second_status = comm.recv(source=0, tag=3)  # the first is the message's
        first, first_status = message.recv()
        return (seen.nbytes, message.status.nbytes, float(first.min()), float(first.max()),
                float(second.min()), float(second.max()), first_status.count,
                second_status.count)

    assert run(body, 2)[1] == (8 * n, 8 * n, 1.0, 1.0, 2.0, 2.0, n, n)


def test_ssend_completes_only_once_matched(run):
    def body(comm):
        if comm.rank == 0:
            quick = comm.isend(np.ones(4), 1, tag=1)
            eager_done = quick.test()
            sync = comm.issend(np.ones(4), 1, tag=2)
            end = time.monotonic() + 0.3
            early = False
            while time.monotonic() < end:
                early |= sync.test()
            comm.barrier()
            sync.wait()
            quick.wait()
            comm.ssend(np.ones(5), 1, tag=3)
            return eager_done, early
        comm.barrier()
        comm.recv(source=0, tag=2)
        comm.recv(source=0, tag=1)
        comm.recv(source=0, tag=3)
        return None

    eager_done, early = run(body, 2)[0]
    assert eager_done and not early


def test_sendrecv_ring_small_and_large(run):
    def body(comm):
        right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        out = []
        for n in (3, 1 << 19):
            data, status = comm.sendrecv(np.full(n, comm.rank, np.int32), right, sendtag=n,
                                         source=left, recvtag=n)
            out.append((int(data[0]), int(data[-1]), status.source, data.size))
        obj, _ = comm.sendrecv_object({"from": comm.rank}, right, source=left)
        return out, obj

    for p in (2, 3, 4):
        for rank, (out, obj) in enumerate(run(body, p)):
            left = (rank - 1) % p
            assert out == [(left, left, left, 3), (left, left, left, 1 << 19)]
            assert obj == {"from": left}


def test_sendrecv_into_its_own_send_buffer_sends_what_it_held(run):
    # rank 0 calls after the others sent theirs, so its receive may complete as it is posted;
    # it must still send its buffer's values from before (as MPI's Sendrecv_replace), small
    # and large, the whole buffer or a view of it
    def body(comm):
        right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        got = []
        for n in (3, 1 << 18):
            for tag, view in enumerate((slice(None), slice(1, n + 1))):
                x = np.full(n + 2, float(comm.rank))
                buf = x[view]
                if comm.rank == 0:
                    comm.barrier()
                    comm.sendrecv(buf, right, tag, out=buf, source=left, recvtag=tag)
                else:
                    receive = comm.irecv(buf.copy(), source=left, tag=tag)
                    send = comm.isend(buf.copy(), right, tag)
                    comm.barrier()
                    send.wait()
                    buf = receive.wait()[0]
                got.append(bool((buf == left).all()))
        return got

    for p in (2, 3):
        assert all(all(g) for g in run(body, p))


def test_cancel_a_pending_receive(run):
    def body(comm):
        if comm.rank == 0:
            comm.barrier()
            comm.send(np.array([9]), 1, tag=99)
            return None
        req = comm.irecv(source=0, tag=99)
        req.cancel()
        data, status = req.wait()
        comm.barrier()
        got, _ = comm.recv(source=0, tag=99)  # the message went to the next receive
        return status.cancelled, data, got.tolist()

    cancelled, data, got = run(body, 2)[1]
    assert cancelled and data is None and got == [9]


def test_pending_receives_advance_during_collectives_and_back(run):
    n = 1 << 20  # a payload the receiver must take (rendezvous on shm)

    def body(comm):
        x = np.full(8, comm.rank + 1.0)
        if comm.rank == 0:
            pending = comm.irecv(source=1, tag=1)
            total = comm.allreduce(x)  # rank 1's send finishes only if this wait moves it
            data, _ = pending.wait()
            collective = comm.iallreduce(x)
            got, _ = comm.recv(source=1, tag=2)  # the collective advances meanwhile
            return float(total[0]), float(data[-1]), float(collective.wait()[0]), int(got[0])
        comm.send(np.arange(n, dtype=np.float64), 0, tag=1)
        total = comm.allreduce(x)
        collective = comm.iallreduce(x)
        comm.send(np.array([5]), 0, tag=2)
        return float(total[0]), None, float(collective.wait()[0]), None

    assert run(body, 2)[0] == (3.0, n - 1.0, 3.0, 5)


def test_requests_mix_with_collective_requests_in_wait_helpers(run):
    def body(comm):
        other = 1 - comm.rank
        reqs = [comm.irecv(source=other, tag=t) for t in range(3)]
        coll = comm.iallreduce(np.ones(2))
        sends = [comm.isend(np.array([t, comm.rank]), other, tag=t) for t in (2, 1, 0)]
        values = collops.wait_all([coll, *reqs, *sends])
        return [v[0].tolist() for v in values[1:4]], values[0].tolist()

    for rank, (got, total) in enumerate(run(body, 2)):
        assert got == [[t, 1 - rank] for t in range(3)] and total == [2.0, 2.0]


def test_object_forms_and_proc_null(run):
    def body(comm):
        other = 1 - comm.rank
        if comm.rank == 0:
            comm.send_object({"big": np.arange(100000)}, 1, tag=4)
            comm.isend_object([1, "two"], 1).wait()
            comm.send(np.ones(2), PROC_NULL)
            return comm.recv(source=PROC_NULL)
        big, status = comm.recv_object(source=0, tag=4)
        small, _ = comm.irecv_object(other).wait()
        null_message = comm.mprobe(PROC_NULL)
        assert null_message.irecv().wait()[1].source == PROC_NULL
        return int(big["big"][-1]), status.tag, small, comm.iprobe(PROC_NULL)

    null_result, second = run(body, 2)
    assert null_result[0] is None and null_result[1].source == PROC_NULL
    assert null_result[1].nbytes == 0 and null_result[1].tag == ANY_TAG
    assert second[:3] == (99999, 4, [1, "two"]) and second[3].source == PROC_NULL


def test_sends_to_self(run):
    def body(comm):
        req = comm.irecv(source=comm.rank, tag=1)
        comm.send(np.arange(6000), comm.rank, tag=1)
        sync = comm.issend(np.array([1]), comm.rank, tag=2)
        matched_early = sync.test()
        comm.recv(source=comm.rank, tag=2)
        sync.wait()
        return int(req.wait()[0][-1]), matched_early

    assert run(body, 1)[0] == (5999, False)


def test_a_completed_receive_holds_no_reference_to_its_buffer(run):
    """Once a receive completed (and the transport progressed), nothing of it keeps the
    program's buffer: the memory goes when the program drops it, not at the next cyclic
    garbage collection (a receive and its posted entry used to refer to each other)."""
    import gc
    import sys

    def body(comm):
        gc.disable()
        try:
            held = {}
            for form in ("recv", "irecv", "mprobe", "improbe", "large"):
                n = 100_000 if form == "large" else 4
                buf = np.zeros(n)
                before = sys.getrefcount(buf)
                if comm.rank == 0:
                    comm.send(np.ones(n), 1, 0)
                elif form in ("recv", "large"):
                    comm.recv(buf, 0, 0)
                elif form == "irecv":
                    comm.irecv(buf, 0, 0).wait()
                elif form == "mprobe":
                    comm.mprobe(0, 0).recv(buf)
                else:
                    found = None
                    while found is None:
                        found = comm.improbe(0, 0)
                    found.irecv(buf).wait()
                    del found
                comm.barrier()  # (a large message's pipe entry goes at the next progress)
                held[form] = sys.getrefcount(buf) - before
            return held
        finally:
            gc.enable()

    assert run(body, 2)[1] == {"recv": 0, "irecv": 0, "mprobe": 0, "improbe": 0, "large": 0}


def test_status_get_count():
    status = collops.Status(0, 1, 24, np.dtype(np.float64))
    assert status.count == 3 and status.get_count(np.int32) == 6 and status.get_count() == 3
    with pytest.raises(collops.ArgumentError):
        status.get_count(np.dtype("V5"))
    assert pickle.loads(pickle.dumps(status)) == status
