"""The buffer-specification parser: every form mpi4py accepts, and bad forms named."""

from __future__ import annotations

import array

import numpy as np
import pytest

import collops
from collops import MPI
from collops.facade.buffers import BufferSpecError, fast_array, message, vector


def test_plain_buffers_take_their_own_type():
    arr = np.arange(6, dtype=np.int32).reshape(2, 3)
    got, datatype = message(arr, "Send", "buf", 0, False)
    assert datatype is MPI.INT32_T or datatype.Get_size() == 4
    assert got.shape == (6,) and np.shares_memory(got, arr)
    got, datatype = message(array.array("d", [1.0, 2.0]), "Send", "buf", 0, False)
    assert datatype == MPI.DOUBLE and got.tolist() == [1.0, 2.0]
    got, datatype = message(bytearray(b"abc"), "Send", "buf", 0, True)
    assert datatype.Get_size() == 1 and got.tobytes() == b"abc"


@pytest.mark.parametrize("spec_of", [
    lambda a: [a, MPI.DOUBLE], lambda a: (a, MPI.DOUBLE), lambda a: [a, "d"],
    lambda a: [a, 8], lambda a: [a, 8, MPI.DOUBLE], lambda a: [a, (8, 0), MPI.DOUBLE],
    lambda a: [a, 8, 0, MPI.DOUBLE]], ids=["list", "tuple", "typecode", "count",
                                           "count-type", "count-displ-type", "four"])
def test_every_form_names_the_same_data(spec_of):
    a = np.arange(8.0)
    got, datatype = message(spec_of(a), "Send", "buf", 0, True)
    assert datatype == MPI.DOUBLE
    assert np.array_equal(got, a) and np.shares_memory(got, a)


def test_count_and_displacement_select_a_slice():
    a = np.arange(10.0)
    got, _ = message([a, (3, 4), MPI.DOUBLE], "Send", "buf", 0, False)
    assert got.tolist() == [4.0, 5.0, 6.0]
    got, _ = message([a, 2, 7, MPI.DOUBLE], "Send", "buf", 0, False)
    assert got.tolist() == [7.0, 8.0]


def test_a_datatype_reinterprets_raw_bytes():
    raw = bytearray(np.arange(3, dtype=np.float64).tobytes())
    got, _ = message([raw, MPI.DOUBLE], "Recv", "buf", 0, True)
    got[1] = 42.0
    assert np.frombuffer(raw, np.float64).tolist() == [0.0, 42.0, 2.0]


def test_contiguous_types_count_in_their_own_elements():
    pair = MPI.DOUBLE.Create_contiguous(2).Commit()
    assert pair.Get_size() == 16 and pair.Get_extent() == (0, 16)
    a = np.arange(10.0)
    got, datatype = message([a, 2, 1, pair], "Send", "buf", 0, False)
    assert datatype is pair and got.tolist() == [2.0, 3.0, 4.0, 5.0]
    pair.Free()
    with pytest.raises(MPI.Exception):
        message([a, pair], "Send", "buf", 0, False)


def test_vector_specs_default_and_explicit():
    a = np.arange(12.0)
    arr, counts, displs, _ = vector(a, 3, "Gatherv", "recvbuf", 0, True)
    assert (counts, displs) == ([4, 4, 4], [0, 4, 8])
    _, counts, displs, _ = vector([a, (2, 3, 4)], 3, "Gatherv", "recvbuf", 0, True)
    assert (counts, displs) == ([2, 3, 4], [0, 2, 5])
    _, counts, displs, _ = vector([a, ([1, 1, 1], [9, 0, 5]), MPI.DOUBLE], 3, "Gatherv",
                                  "recvbuf", 0, True)
    assert (counts, displs) == ([1, 1, 1], [9, 0, 5])
    _, counts, displs, _ = vector([a, [2, 2, 2], [0, 4, 8], "d"], 3, "Gatherv", "recvbuf",
                                  0, True)
    assert (counts, displs) == ([2, 2, 2], [0, 4, 8])


@pytest.mark.parametrize("spec,words", [
    (object(), "expected a buffer"),
    ([np.zeros(2)], "2 to 4 items"),
    ([np.zeros(2), 1, 2, MPI.DOUBLE, 5], "2 to 4 items"),
    ([np.zeros(2), 3, MPI.DOUBLE], "goes beyond"),
    ([np.zeros(2), -1, MPI.DOUBLE], "must not be negative"),
    ([np.zeros(2), 1.5, MPI.DOUBLE], "integer count"),
    ([np.zeros(2), 1, 3.0], "Datatype or a typecode"),
    ([bytearray(3), MPI.DOUBLE], "whole number"),
    (np.zeros((4, 4))[:, 1], "not contiguous"),
    (MPI.BOTTOM, "MPI.BOTTOM"),
    (MPI.IN_PLACE, "IN_PLACE is not allowed"),
    (b"read-only", "writeable"),
])
def test_bad_forms_are_named(spec, words):
    with pytest.raises(BufferSpecError, match="buf") as info:
        message(spec, "Recv", "buf", 3, True)
    assert words in str(info.value) and "rank 3" in str(info.value)
    assert isinstance(info.value, MPI.Exception) and isinstance(info.value, TypeError)
    assert isinstance(info.value, collops.ArgumentError)


def test_vector_specs_need_one_count_per_rank():
    with pytest.raises(BufferSpecError, match="one entry per rank"):
        vector([np.zeros(4), [1, 1]], 3, "Gatherv", "recvbuf", 0, True)
    with pytest.raises(BufferSpecError, match="do not split equally"):
        vector(np.zeros(4), 3, "Gatherv", "recvbuf", 0, True)


def test_fast_path_takes_only_the_commonest_forms():
    a = np.zeros(3)
    assert fast_array(a) is a and fast_array([a, MPI.DOUBLE]) is a
    assert fast_array([a, MPI.FLOAT]) is None and fast_array([a, 3, MPI.DOUBLE]) is None
    assert fast_array((a, MPI.DOUBLE)) is None and fast_array(bytearray(8)) is None


def test_a_scalar_displacement_in_a_vector_spec_is_a_stride():
    a = np.arange(12.0)
    _, counts, displs, _ = vector([a, (2, 4), MPI.DOUBLE], 3, "Gatherv", "recvbuf", 0, True)
    assert (counts, displs) == ([2, 2, 2], [0, 4, 8])


def test_a_collectives_count_is_per_block():
    a = np.arange(12.0)
    got, _ = message([a, 2, MPI.DOUBLE], "Alltoall", "recvbuf", 0, True, blocks=3)
    assert got.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    got, _ = message([a, MPI.DOUBLE], "Alltoall", "recvbuf", 0, True, blocks=4)
    assert got.size == 12
    with pytest.raises(BufferSpecError, match="do not split into 5 blocks"):
        message([a, MPI.DOUBLE], "Alltoall", "recvbuf", 0, True, blocks=5)


class _HostTensor:
    """A DLPack producer over a numpy array (the unversioned protocol)."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_host_dlpack_tensors_are_read_and_written_in_place():
    backing = np.arange(4.0)
    got, datatype = message(_HostTensor(backing), "Recv", "buf", 0, True)
    assert datatype == MPI.DOUBLE and got.tolist() == [0.0, 1.0, 2.0, 3.0]
    got[2] = 9.0
    assert backing[2] == 9.0
    complex_backing = np.zeros(2, np.complex128)
    got, _ = message(_HostTensor(complex_backing), "Recv", "buf", 0, True)
    assert got.dtype == np.complex128 and got.size == 2


def test_device_buffers_and_none_in_place():
    class Device:
        __cuda_array_interface__ = {"shape": (1,), "typestr": "<f8", "data": (0, False),
                                    "version": 3}
    with pytest.raises(BufferSpecError, match="device"):
        message(Device(), "Recv", "buf", 0, True)
    comm = MPI.COMM_SELF
    buf = np.array([1.0, 2.0])
    comm.Allreduce(None, buf, op=MPI.SUM)  # None is IN_PLACE, as in mpi4py
    assert buf.tolist() == [1.0, 2.0]


def test_reduce_local_counts_must_match():
    with pytest.raises(ValueError, match="inoutbuf"):
        MPI.SUM.Reduce_local(np.zeros(2), np.zeros(3))


def test_reduce_local_datatypes_must_match():
    # mpi4py checks it before MPI: ValueError, and the buffer is left as it was
    inout = np.arange(3, dtype=np.int16)
    with pytest.raises(ValueError, match="datatypes"):
        MPI.SUM.Reduce_local([np.arange(3, dtype=np.intc), 1, MPI.INT], [inout, 1, MPI.SHORT])
    assert inout.tolist() == [0, 1, 2]
