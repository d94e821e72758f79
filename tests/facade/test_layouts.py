"""The v-collectives' remembered counts and displacements (`facade.layouts`) and the compiled
spec checks (`facade._specs`): a remembered layout is used only while the caller's counts and
displacements still hold the values it was checked with, and the compiled checks give the
Python checks' answers."""

from __future__ import annotations

import numpy as np
import pytest

from collops import MPI
from collops.facade import buffers, layouts
from collops.facade.buffers import BufferSpecError, vector


def _parse(spec, size=3, writable=True):
    return vector(spec, size, "Allgatherv", "recvbuf", 1, writable)


def test_the_same_objects_give_the_same_checked_layout():
    buf, counts, displs = np.zeros(12), [1, 2, 3], [0, 4, 8]
    first = _parse([buf, (counts, displs), MPI.DOUBLE])
    again = _parse([buf, (counts, displs), MPI.DOUBLE])
    assert first[1:3] == again[1:3] == ([1, 2, 3], [0, 4, 8])
    assert layouts.find(counts, displs, 3, 1) is not None
    assert layouts.find(list(counts), displs, 3, 1) is None  # equal values, another object
    assert layouts.find(counts, displs, 4, 1) is None  # another communicator size


@pytest.mark.parametrize("change,words", [
    (lambda c, d: c.__setitem__(0, -1), "must not be negative"),
    (lambda c, d: c.__setitem__(2, 9), "goes beyond"),
    (lambda c, d: d.__setitem__(2, 10), "goes beyond"),
    (lambda c, d: c.__setitem__(1, 2.0), "integer count"),
    (lambda c, d: c.__setitem__(1, True), "integer count"),
    (lambda c, d: c.append(1), "one entry per rank"),
], ids=["negative", "count-too-long", "displ-too-far", "float", "bool", "one-more"])
def test_counts_changed_between_calls_are_checked_again(change, words):
    buf, counts, displs = np.zeros(12), [1, 2, 3], [0, 4, 8]
    _parse([buf, (counts, displs), MPI.DOUBLE])
    change(counts, displs)
    with pytest.raises(BufferSpecError, match=words) as info:
        _parse([buf, (counts, displs), MPI.DOUBLE])
    assert "rank 1" in str(info.value) and "recvbuf" in str(info.value)
    assert "Allgatherv" in str(info.value)


def test_new_valid_values_are_used_not_the_remembered_ones():
    buf, counts, displs = np.zeros(12), [1, 2, 3], [0, 4, 8]
    _parse([buf, (counts, displs), MPI.DOUBLE])
    counts[0], displs[1] = 4, 5
    assert _parse([buf, (counts, displs), MPI.DOUBLE])[1:3] == ([4, 2, 3], [0, 5, 8])
    counts[0], displs[1] = 1, 4  # and back
    assert _parse([buf, (counts, displs), MPI.DOUBLE])[1:3] == ([1, 2, 3], [0, 4, 8])


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint16])
def test_an_ndarray_of_counts_changed_in_place_is_seen(dtype):
    buf = np.zeros(12)
    counts, displs = np.array([1, 2, 3], dtype), np.array([0, 4, 8], dtype)
    _parse([buf, (counts, displs), MPI.DOUBLE])
    counts[0] = 4
    assert _parse([buf, (counts, displs), MPI.DOUBLE])[1] == [4, 2, 3]
    displs[2] = 10
    with pytest.raises(BufferSpecError, match="goes beyond"):
        _parse([buf, (counts, displs), MPI.DOUBLE])
    counts.shape = (1, 3)  # the same bytes, but no longer one count per rank
    with pytest.raises(BufferSpecError):
        _parse([buf, (counts, displs), MPI.DOUBLE])


def test_the_buffer_is_checked_on_every_call():
    counts, displs = (2, 2, 2), (0, 3, 6)
    _parse([np.zeros(8), (counts, displs), MPI.DOUBLE])
    with pytest.raises(BufferSpecError, match="goes beyond"):
        _parse([np.zeros(7), (counts, displs), MPI.DOUBLE])
    frozen = np.zeros(8)
    frozen.flags.writeable = False
    with pytest.raises(BufferSpecError, match="writeable"):
        _parse([frozen, (counts, displs), MPI.DOUBLE])
    # a remembered layout with another datatype: counted in that type's elements
    got = _parse([np.zeros(16, np.float32), (counts, displs), MPI.DOUBLE])
    assert got[1:3] == ([2, 2, 2], [0, 3, 6]) and got[0].dtype == np.float64
    pair = MPI.DOUBLE.Create_contiguous(2).Commit()
    got = _parse([np.zeros(16), (counts, displs), pair])
    assert got[1:3] == ([4, 4, 4], [0, 6, 12])
    pair.Free()


def test_the_memo_keeps_what_it_compares_and_starts_again_when_full(monkeypatch):
    monkeypatch.setattr(layouts, "LIMIT", 4)
    layouts._memo.clear()
    kept = []
    for k in range(6):
        counts = [1, 1, k]
        _parse([np.zeros(8), (counts, None), MPI.DOUBLE])
        kept.append(counts)
        assert any(entry[0] is counts for entry in layouts._memo.values())
    assert len(layouts._memo) <= 4


def _specs_for(buf, counts, displs):
    return [[buf, (counts, displs), MPI.DOUBLE], [buf, counts, displs, MPI.DOUBLE],
            (buf, (counts, displs), MPI.DOUBLE), [buf, np.asarray(counts), MPI.DOUBLE],
            [buf, (counts, displs), MPI.FLOAT], [buf, (counts, displs), "d"],
            [buf, [counts, displs], MPI.DOUBLE], [buf, (counts, displs)], buf, None]


def test_the_compiled_checks_agree_with_the_python_ones():
    counts, displs = [1, 2, 3], [0, 4, 8]
    for buf in (np.zeros(12), np.zeros(11), np.zeros(12)[::-1], np.zeros((3, 4)),
                np.zeros(12, np.float32)):
        for spec in _specs_for(buf, counts, displs):
            try:
                _parse(spec)  # remember what parses
            except BufferSpecError:
                pass
            for writable in (False, True):
                assert _ids(buffers.fast_vector(spec, 3, writable)) == _ids(
                    buffers._fast_vector(spec, 3, writable))
            for received in _specs_for(buf, counts, displs):
                assert _args_ids(buffers.alltoallv_args(spec, received, 3)) == _args_ids(
                    buffers._alltoallv_args(spec, received, 3))
            for x in (buf, [buf, MPI.DOUBLE], [buf, MPI.FLOAT], np.zeros((2, 2)), None):
                assert _args_ids(buffers.allgatherv_args(x, spec, 3)) == _args_ids(
                    buffers._allgatherv_args(x, spec, 3))
            assert buffers.fast_array(spec) is buffers._fast_array(spec)
            assert buffers.elements(buf, True) == buffers._elements(buf, True)
    assert layouts._specs is not None, "collops.facade._specs was not built"
    for values in ([1, 2], (1, 2), [1, -2], [1, 2.0], [True, 2], [np.int64(1), 2],
                   np.array([1, 2]), np.array([1, 2], np.int8), np.array([[1, 2]]),
                   np.array([1, 2, 3])[::2], [1, 2**70]):
        snap = layouts.snapshot(values)
        if snap is not None:
            assert layouts._specs.same_ints(values, snap)
        for other in (layouts.snapshot([1, 2]), layouts.snapshot(np.array([1, 2]))):
            assert other is not None
            assert layouts._specs.same_ints(values, other) == layouts._same_ints(values, other)
    layout = layouts.find(counts, displs, 3, 1)
    assert layout is not None and layouts._find(counts, displs, 3, 1) is layout


def _ids(found):
    """What `fast_vector` found: the array and layout by identity, ``out`` by its memory."""
    if found is None:
        return None
    arr, layout, out = found
    return id(arr), id(layout), out.ctypes.data, out.size, out.dtype


def _args_ids(args):
    """What `alltoallv_args` or `allgatherv_args` gave: the send array, counts and
    displacements by identity, ``out`` by its memory."""
    if args is None:
        return None
    *given, out = args
    return (*map(id, given), out.ctypes.data, out.size, out.dtype)


def test_alltoallv_args_gives_what_alltoallv_takes():
    counts, displs = [1, 2, 3], [0, 4, 8]
    send, recv = np.arange(12.0), np.zeros(12)
    for spec in ([send, (counts, displs), MPI.DOUBLE], [recv, (counts, displs), MPI.DOUBLE]):
        _parse(spec)
    args = buffers.alltoallv_args([send, (counts, displs), MPI.DOUBLE],
                                  [recv, (counts, displs), MPI.DOUBLE], 3)
    assert args is not None
    x, scounts, sdispls, rcounts, rdispls, out = args
    assert x is send and list(scounts) == counts and list(sdispls) == displs
    assert list(rcounts) == counts and list(rdispls) == displs
    assert np.shares_memory(out, recv) and out.size == 11  # up to the end of the last block
    assert buffers.alltoallv_args([send, (counts, displs), MPI.DOUBLE], recv, 3) is None
    assert buffers.alltoallv_args(send, [recv, (counts, displs), MPI.DOUBLE], 3) is None


def test_allgatherv_args_gives_what_allgatherv_takes():
    counts, displs = [1, 2, 3], [0, 4, 8]
    x, recv = np.arange(2.0), np.zeros(12)
    _parse([recv, (counts, displs), MPI.DOUBLE])
    args = buffers.allgatherv_args(x, [recv, (counts, displs), MPI.DOUBLE], 3)
    assert args is not None
    sent, got_counts, got_displs, out = args
    assert sent is x and list(got_counts) == counts and list(got_displs) == displs
    assert np.shares_memory(out, recv) and out.size == 11
    assert buffers.allgatherv_args(np.zeros((1, 2)), [recv, (counts, displs), MPI.DOUBLE],
                                   3) is None  # counts are of a 1-D buffer's items
    assert buffers.allgatherv_args(x, recv, 3) is None
