"""Derived datatypes: each constructor's elements, size and extent against numpy slicing of
an index array and MPI's rules; buffer specs of gapped types packed and written back; and a
halo exchange of columns over every point-to-point route."""

from __future__ import annotations

import numpy as np
import pytest

import collops
from collops import MPI, config
from collops.facade.buffers import fast_array, message
from collops.facade.comm import wrap
from collops.facade.staging import Stage


def _elements(datatype, count: int = 1, first: int = 0, length: int = 200) -> list[int]:
    """The base-element indices of ``count`` elements of ``datatype`` from element ``first``
    of a buffer, as the buffer parser finds them (packing an index array)."""
    stage = Stage()
    packed, _ = message([np.arange(length, dtype=np.float64), count, first, datatype],
                        "Send", "buf", 0, False, 1, stage)
    stage.pack()
    return packed.astype(int).tolist()


def test_vector_is_a_strided_slice():
    t = MPI.DOUBLE.Create_vector(3, 2, 5).Commit()
    index = np.arange(200)
    assert _elements(t) == index[:15].reshape(3, 5)[:, :2].ravel().tolist()
    # a second element starts one extent ((3 - 1) * 5 + 2 = 12) further on
    assert _elements(t, 2, 1) == [i + 12 * k for k in (1, 2) for i in _elements(t)]
    assert t.Get_size() == 6 * 8 and t.Get_extent() == (0, 12 * 8)
    assert t.Get_true_extent() == (0, 12 * 8)


def test_hvector_indexed_and_blocks():
    pair = MPI.INT.Create_contiguous(2).Commit()
    assert _elements(MPI.DOUBLE.Create_hvector(2, 1, 24).Commit()) == [0, 3]
    ix = MPI.DOUBLE.Create_indexed([2, 1, 3], [5, 0, 9]).Commit()
    assert _elements(ix) == [5, 6, 0, 9, 10, 11]
    assert ix.Get_extent() == (0, 12 * 8) and ix.Get_true_extent() == (0, 12 * 8)
    assert _elements(MPI.DOUBLE.Create_indexed_block(2, [4, 1]).Commit()) == [4, 5, 1, 2]
    assert _elements(MPI.DOUBLE.Create_hindexed_block(1, [16, 0]).Commit()) == [2, 0]
    assert _elements(MPI.DOUBLE.Create_hindexed([1, 2], [8, 32]).Commit()) == [1, 4, 5]
    # a vector of a contiguous pair: blocks of pairs, the stride counted in pairs
    stage = Stage()
    packed, _ = message([np.arange(40, dtype=np.intc), 1, pair.Create_vector(2, 1, 3).Commit()],
                        "Send", "buf", 0, False, 1, stage)
    stage.pack()
    assert packed.tolist() == [0, 1, 6, 7]


@pytest.mark.parametrize("order", ["C", "F"])
def test_subarray_is_a_numpy_block(order):
    sizes, subsizes, starts = [4, 5, 3], [2, 3, 2], [1, 1, 0]
    t = MPI.DOUBLE.Create_subarray(sizes, subsizes, starts,
                                   MPI.ORDER_C if order == "C" else MPI.ORDER_FORTRAN).Commit()
    index = np.arange(60).reshape(sizes, order=order)
    block = index[1:3, 1:4, 0:2]
    assert _elements(t) == block.ravel(order=order).tolist()
    assert t.Get_extent() == (0, 60 * 8) and t.Get_size() == 12 * 8


def test_resized_and_struct():
    column = MPI.DOUBLE.Create_vector(3, 1, 4).Create_resized(0, 8).Commit()
    assert column.Get_extent() == (0, 8) and column.Get_true_extent() == (0, 9 * 8)
    assert _elements(column, 2, 1) == [1, 5, 9, 2, 6, 10]
    s = MPI.Datatype.Create_struct([1, 2], [0, 24], [MPI.DOUBLE, MPI.DOUBLE]).Commit()
    assert _elements(s) == [0, 3, 4] and s.Get_extent() == (0, 40)
    assert s.lb == 0 and s.ub == 40 and s.size == 24


def test_a_contiguous_type_stays_in_place():
    pair = MPI.DOUBLE.Create_contiguous(2).Commit()
    assert not pair.gaps
    a = np.arange(6.0)
    got, _ = message([a, 2, 1, pair], "Send", "buf", 0, False)
    assert np.shares_memory(got, a) and got.tolist() == [2.0, 3.0, 4.0, 5.0]


def test_a_received_gapped_buffer_is_written_back_only_at_its_elements():
    t = MPI.DOUBLE.Create_vector(2, 1, 3).Commit()
    a = np.full(8, -1.0)
    stage = Stage()
    packed, _ = message([a, 2, t], "Recv", "buf", 0, True, 1, stage)
    stage.pack()
    packed[:] = [10, 11, 12, 13]
    stage.unpack()
    assert a.tolist() == [10, -1, -1, 11, 12, -1, -1, 13]


def test_errors_are_named():
    t = MPI.DOUBLE.Create_vector(2, 1, 3)
    with pytest.raises(MPI.Exception) as info:
        message([np.zeros(8), 1, t], "Send", "buf", 0, False, 1, Stage())
    assert info.value.Get_error_class() == MPI.ERR_TYPE and "Commit" in str(info.value)
    one = MPI.DOUBLE.Create_contiguous(1)  # its elements are the array's own, yet uncommitted
    with pytest.raises(MPI.Exception, match="Commit"):
        message([np.zeros(2), one], "Send", "buf", 0, False, 1, Stage())
    assert fast_array([np.zeros(2), one]) is None and fast_array([np.zeros(2), one.Commit()]) \
        is not None
    t.Commit()
    with pytest.raises(MPI.Exception, match="beyond the buffer"):
        message([np.zeros(8), 3, t], "Send", "buf", 0, False, 1, Stage())
    with pytest.raises(NotImplementedError, match="whole number"):
        MPI.DOUBLE.Create_hvector(2, 1, 12)
    with pytest.raises(NotImplementedError, match="several base types"):
        MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.DOUBLE, MPI.INT])
    with pytest.raises(MPI.Exception):
        MPI.DOUBLE.Create_subarray([4], [3], [2])


ROUTES = {"inproc": ("inproc", None), "shm": ("shm", None), "shm-no-cells": ("shm", "0")}


def _halo(comm):
    world = wrap(comm)
    p, r = world.Get_size(), world.Get_rank()
    column = MPI.DOUBLE.Create_vector(3, 1, 6).Create_resized(0, 8).Commit()
    a = np.arange(18.0).reshape(3, 6) + 100 * r
    world.Sendrecv([a, 1, 4, column], (r + 1) % p, 0, [a, 1, 0, column], (r - 1) % p, 0)
    world.Sendrecv([a, 1, 1, column], (r - 1) % p, 1, [a, 1, 5, column], (r + 1) % p, 1)
    big = MPI.DOUBLE.Create_vector(4096, 1, 2).Commit()  # a payload beyond any cell
    b = np.zeros(8192)
    if r == 0:
        world.Isend([np.arange(8192.0), 1, big], 1, 2).Wait()
    elif r == 1:
        world.Recv([b, 1, big], 0, 2)
    return a, b


@pytest.mark.timeout(120)
@pytest.mark.parametrize("route", list(ROUTES))
def test_halo_exchange_of_columns_on_every_route(route, monkeypatch):
    transport, cells = ROUTES[route]
    if cells is None:
        monkeypatch.delenv("COLLOPS_SHM_P2P_CELLS", raising=False)
    else:
        monkeypatch.setenv("COLLOPS_SHM_P2P_CELLS", cells)
    config.reload_settings()
    try:
        results = collops.spawn(_halo, 3, transport=transport, timeout=90)
    finally:
        monkeypatch.undo()
        config.reload_settings()
    grids = [np.arange(18.0).reshape(3, 6) + 100 * r for r in range(3)]
    for r, (a, b) in enumerate(results):
        expected = grids[r].copy()
        expected[:, 0] = grids[(r - 1) % 3][:, 4]
        expected[:, 5] = grids[(r + 1) % 3][:, 1]
        np.testing.assert_array_equal(a, expected)
        index = np.arange(8192)
        want = np.where(index % 2 == 0, index, 0.0) if r == 1 else np.zeros(8192)
        np.testing.assert_array_equal(b, want)
