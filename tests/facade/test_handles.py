"""mpi4py's integer handles (``handle``, ``fromhandle``, ``toint``/``fromint``,
``py2f``/``f2py``) on every handle class, handle copies' equality, and generalized requests
(``Grequest``) — in one process, on ``COMM_SELF``."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

from collops import MPI


def _handles() -> list[tuple[type, object]]:
    """A live object of every handle class (and what must be released after)."""
    comm = MPI.COMM_SELF.Dup()
    column = MPI.DOUBLE.Create_vector(2, 1, 3).Commit()
    request = MPI.COMM_SELF.Isend(np.ones(2), 0, 5)
    message = MPI.COMM_SELF.Mprobe(0, 5)
    return [
        (MPI.Intracomm, comm), (MPI.Comm, MPI.COMM_WORLD), (MPI.Group, comm.Get_group()),
        (MPI.Datatype, column), (MPI.Datatype, MPI.DOUBLE), (MPI.Op, MPI.SUM),
        (MPI.Op, MPI.Op.Create(lambda a, b, t: None)), (MPI.Request, request),
        (MPI.Prequest, MPI.COMM_SELF.Send_init(np.ones(1), MPI.PROC_NULL)),
        (MPI.Grequest, MPI.Grequest.Start()), (MPI.Message, message),
        (MPI.Message, MPI.MESSAGE_NO_PROC),
    ]


def test_every_handle_class_round_trips_its_number_to_an_equal_handle():
    objects = _handles()
    for cls, obj in objects:
        number = obj.handle
        assert isinstance(number, int) and number != 0, cls
        for copy in (cls.fromhandle(number), cls.fromint(obj.toint()), cls.f2py(obj.py2f())):
            assert type(copy) is cls and copy == obj, (cls, obj)
    for cls, _ in objects:  # a null handle is 0 and back
        null = cls()
        assert null.handle == 0 and not cls.fromhandle(0) and type(cls.fromhandle(0)) is cls
    message = objects[-2][1]
    message.Recv(np.empty(2))
    objects[7][1].Wait()
    objects[0][1].Free()


def test_a_handle_nothing_holds_any_more_is_refused_by_name():
    datatype = MPI.DOUBLE.Create_contiguous(2).Commit()
    number = datatype.handle
    del datatype
    gc.collect()
    with pytest.raises(MPI.Exception) as info:
        MPI.Datatype.fromhandle(number)
    assert info.value.Get_error_class() == MPI.ERR_ARG and "fromhandle" in str(info.value)


def test_copies_of_a_handle_are_equal_and_new_objects_are_not():
    column = MPI.DOUBLE.Create_vector(2, 1, 3).Commit()
    assert MPI.Datatype(column) == column and column.Dup() != column
    assert MPI.Datatype(column).handle == column.handle != column.Dup().handle
    persistent = MPI.COMM_SELF.Send_init(np.ones(1), MPI.PROC_NULL)
    plain = MPI.Request(persistent)
    assert type(plain) is MPI.Request and plain == persistent
    generalized = MPI.Grequest.Start()
    with pytest.raises(TypeError):
        MPI.Prequest(generalized)
    with pytest.raises(TypeError):
        MPI.Grequest(persistent)
    assert MPI.Request(generalized) == generalized and MPI.Grequest(generalized) == generalized
    generalized.Complete()
    generalized.Wait()
    persistent.Free()


class _Callbacks:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def query(self, status, extra):
        self.calls.append(("query", extra))
        status.Set_source(3)
        status.Set_tag(7)

    def free(self, extra):
        self.calls.append(("free", extra))

    def cancel(self, completed, extra):
        self.calls.append(("cancel", completed, extra))


def test_a_generalized_request_completes_when_the_program_says_so():
    seen = _Callbacks()
    request = MPI.Grequest.Start(seen.query, seen.free, seen.cancel, args=("x",))
    assert not request.Test() and seen.calls == []
    request.Cancel()
    request.Complete()
    request.Cancel()
    status = MPI.Status()
    assert request.Get_status(status) and (status.Get_source(), status.Get_tag()) == (3, 7)
    assert ("free", "x") not in seen.calls  # not freed by a status query
    assert request.Test(status) and (status.Get_source(), status.Get_tag()) == (3, 7)
    assert seen.calls == [("cancel", False, "x"), ("cancel", True, "x"), ("query", "x"),
                          ("query", "x"), ("free", "x")]
    assert not request and request == MPI.REQUEST_NULL
    with_value = MPI.Grequest.Start()
    with_value.complete({"answer": 42})
    assert with_value.wait() == {"answer": 42} and with_value.test() == (True, None)


def test_a_generalized_request_waited_for_is_completed_by_another_thread():
    request = MPI.Grequest.Start()
    timer = threading.Timer(0.05, request.Complete)
    timer.start()
    request.Wait()
    timer.join()
    assert not request


@pytest.mark.parametrize("failing", ["query", "free", "cancel"])
def test_a_failing_callback_is_an_mpi_exception_and_leaves_no_request(failing, capsys):
    def fails(*_args):
        raise ValueError("callback failed")

    callbacks = {name: (fails if name == failing else None)
                 for name in ("query", "free", "cancel")}
    request = MPI.Grequest.Start(callbacks["query"], callbacks["free"], callbacks["cancel"])
    if failing == "cancel":
        with pytest.raises(MPI.Exception) as info:
            request.Cancel()
        request.Complete()
        request.Wait()
    else:
        request.Complete()
        with pytest.raises(MPI.Exception) as info:
            request.Wait()
    assert info.value.Get_error_class() == MPI.ERR_OTHER and "callback failed" in str(info.value)
    assert "Traceback" in capsys.readouterr().err and not request
