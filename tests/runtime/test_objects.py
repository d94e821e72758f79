"""Object collectives: `reduce_object` against a Python fold, and out-of-band buffers.

Large arrays inside objects must travel as protocol-5 out-of-band frames — each moved by its
own array collective straight from the object's memory — never inside the pickle stream.
"""

from __future__ import annotations

import functools
import pickle

import numpy as np
import pytest

import collops
from collops import ArgumentError
from collops.runtime import comm as comm_module
from collops.runtime import objects


def run(fn, p, *args):
    return collops.spawn(fn, p, *args, timeout=60)


def _contribution(rank):
    # unequal, unhashable, order-revealing objects
    return {"ranks": [rank], "text": "abcdefghijklmnop"[rank], "n": rank * rank}


def _merge(a, b):
    # not commutative: the fold's order shows in "ranks" and "text"
    return {"ranks": a["ranks"] + b["ranks"], "text": a["text"] + b["text"], "n": a["n"] - b["n"]}


@pytest.mark.parametrize("p,root", [(1, 0), (2, 1), (4, 2), (5, 4), (7, 3)])
def test_reduce_object_folds_in_rank_order_on_the_root_only(p, root):
    def body(comm):
        return comm.reduce_object(_contribution(comm.rank), _merge, root=root)
    got = run(body, p)
    expected = functools.reduce(_merge, [_contribution(r) for r in range(p)])
    for rank, value in enumerate(got):
        if rank == root:
            assert value == expected
        else:
            assert value is None, (rank, value)


def test_reduce_object_of_arrays_and_a_bad_root():
    def body(comm):
        total = comm.reduce_object(np.full(50_000, comm.rank + 1.0), np.add, root=1)
        with pytest.raises(ArgumentError) as info:
            comm.reduce_object(1, max, root=comm.size)
        return total, info.value.argument
    got = run(body, 3)
    np.testing.assert_array_equal(got[1][0], np.full(50_000, 6.0))
    assert got[0][0] is None and got[2][0] is None
    assert all(argument == "root" for _, argument in got)


def test_dumps_puts_large_arrays_out_of_band_without_copying():
    big = np.arange(250_000, dtype=np.float64)  # 2 MB
    frames = objects.dumps({"meta": "x" * 10, "big": big})
    assert len(frames) == 2
    assert frames[0].nbytes < 1024, frames[0].nbytes  # the pickle stream: structure only
    assert frames[1].nbytes == big.nbytes and np.shares_memory(frames[1], big)
    # in-band pickling would put the array inside the stream
    assert len(pickle.dumps({"big": big}, protocol=5)) > big.nbytes
    again = objects.loads(frames)
    np.testing.assert_array_equal(again["big"], big)


class _Recorder:
    """Records the byte counts and send buffers of every object frame a rank moves."""

    def __init__(self):
        self.phases = []

    def wrap(self, original):
        recorder = self

        def _run_phase(comm, spec, send, recv, tag, timeout=None):
            recorder.phases.append((comm.rank, spec.collective, tag, spec, send))
            return original(comm, spec, send, recv, tag, timeout)
        return _run_phase


@pytest.mark.parametrize("call", ["bcast_object", "allgather_object", "alltoall_object",
                                  "scatter_object"])
def test_large_arrays_in_objects_travel_out_of_band(monkeypatch, call):
    recorder = _Recorder()
    monkeypatch.setattr(comm_module.Comm, "_run_phase",
                        recorder.wrap(comm_module.Comm._run_phase))
    n = 200_000  # 1.6 MB of float64 per array
    sent = {}

    def body(comm):
        big = np.full(n, comm.rank, np.float64)
        sent[comm.rank] = big
        if call == "bcast_object":
            got = comm.bcast_object({"a": big} if comm.rank == 0 else None)
            return [got["a"]]
        if call == "allgather_object":
            return [o["a"] for o in comm.allgather_object({"a": big})]
        if call == "alltoall_object":
            return [o["a"] for o in comm.alltoall_object([{"a": big}] * comm.size)]
        got = comm.scatter_object([{"a": big}] * comm.size if comm.rank == 0 else None)
        return [got["a"]]
    results = run(body, 3)
    for rank, arrays in enumerate(results):
        assert len(arrays) == (3 if call in ("allgather_object", "alltoall_object") else 1), (
            rank, len(arrays))
        for a in arrays:
            assert a.shape == (n,) and a.dtype == np.float64
    big_bytes = n * 8
    streams = [(spec, send) for _, _, tag, spec, send in recorder.phases if tag[1] == 0]
    frames = [(rank, spec, send) for rank, _, tag, spec, send in recorder.phases if tag[1] >= 1]
    assert streams and frames, recorder.phases
    # the pickle streams are small: no array bytes in them
    for spec, _ in streams:
        assert _moved(spec) < 64 * 1024, (call, spec)
    # the arrays went as frames of their own, each a multiple of the array's size ...
    assert all(_moved(spec) % big_bytes == 0 and _moved(spec) for _, spec, _ in frames)
    # ... sent straight from the object's memory wherever one array is the whole frame
    # (a bcast's non-roots send nothing; alltoall and scatter concatenate per-destination frames)
    if call in ("bcast_object", "allgather_object"):
        senders = [(rank, send) for rank, _, send in frames if send is not None]
        assert len(senders) == (1 if call == "bcast_object" else 3), (call, senders)
        for rank, send in senders:
            assert np.shares_memory(send, sent[rank]), (call, rank)


def _moved(spec):
    """The bytes one rank's part of an object frame collective moves (its largest count)."""
    counts = spec.counts or spec.sendcounts or (spec.count,)
    return max(max(counts), max(spec.recvcounts or (0,)), spec.count) * spec.itemsize
