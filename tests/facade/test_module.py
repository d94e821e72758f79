"""The ``collops.MPI`` module: how it is found, its constants and functions, its errors,
and what it does not implement (NotImplementedError on every rank at once, nothing sent)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

import collops
from collops import MPI
from collops.facade.comm import wrap


def test_both_import_forms_give_one_module_and_no_file_is_named_mpi():
    mpi_module = importlib.import_module("collops.MPI")
    assert mpi_module is MPI is sys.modules["collops.MPI"] is collops.MPI
    assert MPI.__spec__.name == "collops.facade.api"  # its own spec, left alone
    package = Path(collops.__file__).parent
    assert [p.name for p in package.iterdir() if p.name.lower() in ("mpi", "mpi.py")] == ["mpi"]


def test_constants_share_collops_values():
    assert (MPI.ANY_SOURCE, MPI.ANY_TAG, MPI.PROC_NULL) == (collops.ANY_SOURCE, collops.ANY_TAG,
                                                            collops.PROC_NULL)
    assert MPI.UNDEFINED == collops.UNDEFINED and MPI.IDENT == collops.IDENT
    assert MPI.COMM_WORLD.Get_attr(MPI.TAG_UB) == collops.TAG_UB


def test_environment_functions():
    assert MPI.Is_initialized() and MPI.Get_version() == (4, 0)
    assert MPI.Query_thread() == MPI.THREAD_SERIALIZED
    assert MPI.Init_thread(MPI.THREAD_MULTIPLE) == MPI.THREAD_SERIALIZED
    t0 = MPI.Wtime()
    assert MPI.Wtime() >= t0 and 0 < MPI.Wtick() < 1e-3
    assert MPI.Get_processor_name() and "collops" in MPI.Get_library_version()
    assert MPI.Compute_dims(12, 2) == [4, 3] and MPI.Compute_dims(12, [0, 2]) == [6, 2]
    assert MPI.COMM_WORLD.Get_size() == 1 and MPI.COMM_SELF.Get_size() == 1


def test_datatypes_map_numpy_dtypes():
    assert MPI.DOUBLE.Get_size() == 8 and MPI.INT.Get_size() == np.dtype(np.intc).itemsize
    assert MPI.Datatype.fromcode("d") == MPI.DOUBLE and MPI.DOUBLE.tocode() == "d"
    assert MPI._typecode(MPI.FLOAT) == "f" and MPI.DOUBLE_INT.Get_size() == 12
    with pytest.raises(MPI.Exception) as info:
        MPI.DOUBLE.Free()
    assert info.value.Get_error_class() == MPI.ERR_TYPE


def test_exceptions_are_both_mpi_and_collops_errors():
    comm = MPI.COMM_SELF
    with pytest.raises(collops.ArgumentError) as info:
        comm.Bcast(np.zeros(2), root=3)
    exc = info.value
    assert isinstance(exc, MPI.Exception) and exc.Get_error_class() == MPI.ERR_ROOT
    assert "root" in str(exc) and "bcast" in str(exc)
    plain = MPI.Exception(MPI.ERR_TRUNCATE)
    assert plain == MPI.ERR_TRUNCATE and str(plain) == "Message truncated"
    assert MPI.Get_error_string(MPI.ERR_RANK) == "Invalid rank"


def test_reduce_local_and_predefined_ops_on_objects():
    inout = np.array([1.0, 5.0])
    MPI.MAX.Reduce_local(np.array([3.0, 2.0]), inout)
    assert inout.tolist() == [3.0, 5.0]
    assert MPI.SUM(2, 3) == 5 and MPI.MAXLOC((1, 0), (1, 1)) == (1, 0)


UNSUPPORTED = {
    "Win.Create": lambda comm: MPI.Win.Create(np.zeros(1), comm=comm),
    "File.Open": lambda comm: MPI.File.Open(comm, "x"),
    "Intercomm": lambda comm: MPI.Intercomm(comm),
    "Create_intercomm": lambda comm: comm.Create_intercomm(0, comm, 0),
    "Create_cart": lambda comm: comm.Create_cart([comm.Get_size()]),
    "Spawn": lambda comm: comm.Spawn("python"),
    "Neighbor_allgather": lambda comm: comm.Neighbor_allgather(np.zeros(1), np.zeros(1)),
    "Open_port": lambda comm: MPI.Open_port(),
    "Create_struct": lambda comm: MPI.Datatype.Create_struct([1, 1], [0, 8],
                                                             [MPI.DOUBLE, MPI.INT]),
    "Create_darray": lambda comm: MPI.DOUBLE.Create_darray(2, 0, 1, [4], [1], [0], [2]),
}


def _every_rank_refuses(comm):
    facade = wrap(comm)
    texts = {}
    for name, call in UNSUPPORTED.items():
        try:
            call(facade)
            texts[name] = None
        except NotImplementedError as exc:
            texts[name] = str(exc)
    # nobody was left waiting: the next collective runs at once
    return texts, facade.allreduce(1)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("transport", ["inproc", "shm"])
def test_what_collops_cannot_do_raises_on_every_rank_at_once(transport):
    results = collops.spawn(_every_rank_refuses, 2, transport=transport, timeout=30)
    for texts, total in results:
        assert total == 2
        for name, text in texts.items():
            assert text is not None and "not implemented by collops" in text, name
    assert "intercommunicators" in results[0][0]["Create_intercomm"]
    assert "topolog" in results[0][0]["Create_cart"]
    assert "RMA" in results[0][0]["Win.Create"]


def test_unknown_names_say_so():
    with pytest.raises(AttributeError, match="not part of what collops implements"):
        MPI.NO_SUCH_NAME  # noqa: B018


def test_group_methods_take_mpi4pys_instance_forms():
    world = MPI.COMM_SELF.Get_group()
    assert world.Translate_ranks([0], group=world) == [0]
    assert MPI.Group.Translate_ranks(world, [0], world) == [0]
    assert world.Compare(world) == MPI.IDENT == MPI.Group.Compare(world, world)


def test_null_communicators_are_equal_and_info_is_accepted():
    assert MPI.Comm() == MPI.COMM_NULL and not MPI.COMM_NULL
    assert MPI.Comm.Get_parent() == MPI.COMM_NULL
    MPI.COMM_SELF.Set_info(MPI.Info.Create())
    assert MPI.COMM_SELF.Get_info() == {}


def test_null_communicator_handles_and_buffer_attachment():
    with pytest.raises(TypeError):
        MPI.Comm((1, 2, 3))
    assert MPI.Comm() == MPI.COMM_NULL and MPI.COMM_NULL.Get_name() == "MPI_COMM_NULL"
    comm = MPI.COMM_SELF.Dup()
    buf = bytearray(64)
    comm.Attach_buffer(buf)
    comm.Flush_buffer()
    comm.Iflush_buffer().Wait()
    assert comm.Detach_buffer() is buf and comm.Detach_buffer() is None
    comm.Free()


def test_predefined_communicators_pickle_as_themselves():
    import pickle
    for comm in (MPI.COMM_NULL, MPI.COMM_SELF):
        assert pickle.loads(pickle.dumps(comm)) is comm
        copy = pickle.loads(pickle.dumps(MPI.Intracomm(comm)))
        assert copy == comm and copy is not comm
    dup = MPI.COMM_SELF.Dup()
    with pytest.raises(ValueError):
        pickle.dumps(dup)
    dup.Free()


@pytest.mark.parametrize(("nodes", "members", "spanned"), [
    ((0, 0, 1, 1), [0, 1, 2, 3], 2),  # spans two nodes: the node is a smaller level
    ((0, 0, 1, 1), [2, 3], 1),  # within one node: no smaller level known, COMM_NULL
    ((0, 0, 1, 1), [1, 2], 2),
    ((), [0, 1], 1),  # a transport that knows no nodes: one node
])
def test_split_type_hw_unguided_splits_at_the_node_when_the_members_span_nodes(nodes, members,
                                                                                spanned):
    from types import SimpleNamespace

    from collops.facade.comm import _split_kind
    from collops.runtime.communicators import Communicators
    caps = SimpleNamespace(node_of_rank=nodes)
    comm = SimpleNamespace(transport=SimpleNamespace(capabilities=lambda: caps),
                           _group=members)
    assert Communicators.nodes_spanned.fget(comm) == spanned  # type: ignore[attr-defined]
    comm.nodes_spanned = spanned
    assert _split_kind(comm, MPI.COMM_TYPE_HW_UNGUIDED, None) == (
        "shared" if spanned > 1 else None)
    assert _split_kind(comm, MPI.COMM_TYPE_SHARED, None) == "shared"
    assert _split_kind(comm, MPI.UNDEFINED, None) is None
    assert _split_kind(comm, 99, None) == 99  # collops' own split_type names it


def test_alloc_mem_gives_mpi4pys_buffer_and_attach_gives_it_back():
    import ctypes
    buf = MPI.Alloc_mem(64)
    assert isinstance(buf, MPI.buffer) and buf.nbytes == len(buf) == 64 and not buf.readonly
    ctypes.memmove(buf.address, b"abc", 3)  # the address is the memory's own
    assert bytes(buf[:3]) == b"abc" and buf.obj is None and MPI.Alloc_mem(0).address == 0
    comm = MPI.COMM_SELF.Dup()
    comm.Attach_buffer(buf)
    back = comm.Detach_buffer()
    assert back is buf and back.address == buf.address
    comm.Attach_buffer(MPI.BUFFER_AUTOMATIC)
    assert comm.Detach_buffer() is MPI.BUFFER_AUTOMATIC
    comm.Free()
    MPI.Free_mem(buf)


def test_requests_and_messages_pickle_as_mpi4pys():
    import pickle
    for handle in (MPI.REQUEST_NULL, MPI.MESSAGE_NULL, MPI.MESSAGE_NO_PROC):
        assert pickle.loads(pickle.dumps(handle)) is handle
        copy = pickle.loads(pickle.dumps(type(handle)(handle)))
        assert copy == handle and copy is not handle
    comm = MPI.COMM_SELF
    request = comm.Isend(b"xy", 0, 0)
    message = comm.Mprobe(0, 0)
    for active in (request, message):
        with pytest.raises(ValueError, match="cannot pickle"):
            pickle.dumps(active)
    message.Recv(bytearray(2))
    request.Wait()


def test_communicators_take_the_plain_attribute_lookup():
    """No ``__getattr__`` on a communicator class: with one, CPython looks up every method and
    attribute of every facade call the slow way. The parts collops lacks are named one by one
    and refuse when looked up (the test above)."""
    for handle in (MPI.COMM_WORLD, MPI.COMM_SELF, MPI.COMM_NULL, wrap(object.__new__(
            type("Stand", (), {"rank": 0})))):
        assert not any("__getattr__" in vars(cls) for cls in type(handle).__mro__), handle
    with pytest.raises(NotImplementedError, match="topolog"):
        MPI.COMM_SELF.Ineighbor_alltoallv  # noqa: B018
    with pytest.raises(NotImplementedError, match="intercommunicators"):
        MPI.COMM_SELF.Spawn_multiple  # noqa: B018
    with pytest.raises(AttributeError):
        MPI.COMM_SELF.No_such_method  # noqa: B018
