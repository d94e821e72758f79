"""The compiled ``I…`` v-methods (`facade._specs.Starter`): each passes collops exactly what its
Python method passes — checked call by call on a communicator that records its calls, over
the commonest specs and the others — takes its commonest calls without the Python method,
hands every other call to it, and raises what it raises."""

from __future__ import annotations

import inspect
import sys
from typing import Any

import numpy as np
import pytest

from collops import MPI
from collops.errors import ArgumentError
from collops.facade import buffers, collectives
from collops.facade.comm import wrap
from collops.facade.requests import Request

NAMES = ("Iallgatherv", "Igatherv", "Iscatterv", "Ialltoallv")


class _Recorder:
    """A collops communicator whose v-calls record their arguments and return a request."""

    def __init__(self, rank: int, size: int, fail: bool = False) -> None:
        self.rank, self.size, self.fail = rank, size, fail
        self.calls: list[tuple[str, tuple, dict]] = []

    def _record(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if self.fail:
                raise ArgumentError(name, "out", 3, "the counts need 4", self.rank)
            self.calls.append((name, args, kwargs))
            return ("started", name)
        return call

    def __getattr__(self, name: str) -> Any:
        if name in ("iallgatherv", "igatherv", "iscatterv", "ialltoallv"):
            return self._record(name)
        raise AttributeError(name)


def _same(a: Any, b: Any) -> bool:
    """Equal arguments: arrays the same view of the same memory, the rest equal."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (type(a) is type(b) and a.shape == b.shape and a.dtype == b.dtype
                and a.__array_interface__["data"] == b.__array_interface__["data"])
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return bool(a == b)


def _specs(p: int) -> list[tuple[str, Any, Any]]:
    """Receive/send v-specs of each form the facade takes, with exact and longer buffers,
    back-to-back and gapped blocks: ``(label, spec, plain array of one block)``."""
    n = 2
    out = []
    for gap in (0, 1):
        counts = [n] * p
        displs = [(n + gap) * j for j in range(p)]
        end = displs[-1] + n
        for extra in (0, 3):
            buf = np.zeros(end + extra)
            out.append((f"gap{gap}-extra{extra}-pair", [buf, (counts, displs), MPI.DOUBLE]))
            out.append((f"gap{gap}-extra{extra}-four", [buf, counts, displs, MPI.DOUBLE]))
        if not gap:
            out.append(("counts-array", [np.zeros(end), np.array(counts), MPI.DOUBLE]))
    out.append(("float-spec-other-type", [np.zeros(8, np.float32), ([2] * p, [0, 2, 4, 6][:p]),
                                           MPI.DOUBLE]))
    out.append(("strided", [np.zeros(16)[::2], ([2] * p, [0, 2, 4, 6][:p]), MPI.DOUBLE]))
    return [(label, spec, np.ones(n)) for label, spec in out]


def _calls(name: str, spec: Any, block: np.ndarray, root: int) -> list[tuple[tuple, dict]]:
    """The argument lists of ``name`` to try: positional, with and without a root."""
    if name == "Iallgatherv":
        return [((block, spec), {}), ((MPI.IN_PLACE, spec), {}), (([block, MPI.DOUBLE], spec), {})]
    if name == "Ialltoallv":
        return [((spec, spec), {}), ((MPI.IN_PLACE, spec), {})]
    if name == "Igatherv":
        return [((block, spec, root), {}), ((block, spec), {}), ((block,), {"recvbuf": spec})]
    longer = np.ones(block.size + 1)  # a receive buffer longer than the rank's block
    return [((spec, block, root), {}), ((spec, block), {}), ((spec,), {"recvbuf": block}),
            ((spec, longer, root), {})]


def _both(starter: Any, rank: int, size: int, args: tuple, kwargs: dict) -> tuple[Any, Any]:
    """``(what the compiled method did, what the Python method did)``: each a list of
    recorded calls, or the exception raised; both after a first call that checked the specs
    (whose planned call may name its arguments otherwise)."""
    done: list[Any] = []
    for method in (starter.fallback, starter, starter.fallback):
        comm = _Recorder(rank, size)
        try:
            request = method(wrap(comm), *args, **kwargs)
            assert type(request) is Request and request._request == ("started", comm.calls[-1][0])
            done.append(comm.calls)
        except Exception as exc:  # noqa: BLE001 - compared below
            done.append((type(exc), str(exc)))
    return done[1], done[2]


@pytest.fixture(scope="module")
def starters() -> dict[str, Any]:
    assert buffers.compiled is not None, "collops.facade._specs is not built"
    found = {name: MPI.Comm.__dict__.get(name) or getattr(collectives.Collectives, name)
             for name in NAMES}
    assert all(type(s) is buffers.compiled.Starter for s in found.values()), found
    return found


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("size,rank", [(2, 0), (2, 1), (3, 2)])
def test_the_compiled_method_passes_collops_what_the_python_one_passes(starters, name, size,
                                                                      rank):
    for label, spec, block in _specs(size):
        for root in (0, 1):
            for args, kwargs in _calls(name, spec, block, root):
                compiled, python = _both(starters[name], rank, size, args, kwargs)
                assert len(compiled) == len(python) and all(
                        c[0] == p[0] and _same(c[1], p[1]) and c[2].keys() == p[2].keys()
                        and all(_same(c[2][k], p[2][k]) for k in c[2])
                        for c, p in zip(compiled, python, strict=True)) if isinstance(
                        python, list) else compiled == python, (label, root, args, kwargs)


def _python_frames(call: Any, name: str) -> int:
    """How many times the Python function named ``name`` ran during ``call()``."""
    seen = []
    sys.setprofile(lambda frame, event, arg: seen.append(frame.f_code.co_name)
                   if event == "call" else None)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen.count(name)


@pytest.mark.parametrize("name", NAMES)
def test_the_commonest_calls_never_run_the_python_method(starters, name):
    comm = _Recorder(0, 2)
    f = wrap(comm)
    label, spec, block = _specs(2)[1]  # back to back, a longer buffer, [buf, (c, d), type]
    args = (spec, spec) if name == "Ialltoallv" else (block, spec, 0) if name == "Igatherv" \
        else (block, spec) if name == "Iallgatherv" else (spec, block, 0)
    getattr(f, name)(*args)  # the layout checked and remembered
    assert _python_frames(lambda: getattr(f, name)(*args), name) == 0
    assert _python_frames(lambda: getattr(f, name)(*args[:1], recvbuf=args[1]), name) == 1


@pytest.mark.parametrize("name", NAMES)
def test_a_collops_error_is_raised_as_mpi_s_from_none(starters, name):
    comm = _Recorder(0, 2, fail=True)
    label, spec, block = _specs(2)[0]
    args = (spec, spec) if name == "Ialltoallv" else (block, spec, 0) if name == "Igatherv" \
        else (block, spec) if name == "Iallgatherv" else (spec, block, 0)
    for method in (starters[name], starters[name].fallback):
        for _ in range(2):
            with pytest.raises(MPI.Exception) as caught:
                method(wrap(comm), *args)
            assert "the counts need 4" in str(caught.value)
            assert caught.value.__cause__ is None and caught.value.__suppress_context__
            assert isinstance(caught.value.__context__, ArgumentError)


def test_the_compiled_methods_read_as_the_python_ones(starters):
    for name, starter in starters.items():
        assert starter.__name__ == name and starter.__doc__ == starter.fallback.__doc__
        bound = getattr(wrap(_Recorder(0, 2)), name)
        assert list(inspect.signature(bound).parameters) == \
            list(inspect.signature(starter.fallback).parameters)[1:]


class _Status:
    nbytes = 8


class _Started:
    """A collops request whose wait returns ``value`` or raises ``error``."""

    def __init__(self, value: Any = None, error: Exception | None = None) -> None:
        self.value, self.error, self.waits = value, error, 0

    def wait(self) -> Any:
        self.waits += 1
        if self.error is not None:
            raise self.error
        return self.value


@pytest.mark.parametrize("value", [None, np.arange(3.0), ("object", _Status()), (1, 2),
                                   [1, 2]], ids=["none", "array", "received", "pair", "list"])
@pytest.mark.parametrize("with_status", [False, True])
def test_the_compiled_wait_keeps_what_the_python_wait_keeps(starters, value, with_status):
    wait: Any = Request.Wait
    assert buffers.compiled is not None and type(wait) is buffers.compiled.Starter
    kept = []
    for method in (wait, wait.fallback):
        started = _Started(value)
        request = Request(started, None)
        status = MPI.Status() if with_status else None
        assert (method(request) if status is None else method(request, status)) is True
        kept.append((request._request, request._value, request._status, started.waits,
                     bool(request), None if status is None else status.Get_source()))
        assert method(request) is True and started.waits == 1  # null now: nothing to wait for
    assert kept[0][0] is kept[1][0] is None
    assert kept[0][1] is kept[1][1] and kept[0][2] is kept[1][2] and kept[0][3:] == kept[1][3:]
    received = isinstance(value, tuple) and isinstance(value[1], _Status)
    assert kept[0][1] is (value[0] if received else value)  # a receive keeps its object
    assert kept[0][2] is value


def test_the_compiled_wait_raises_as_the_python_one(starters):
    wait: Any = Request.Wait
    for method in (wait, wait.fallback):
        request = Request(_Started(error=ArgumentError("allreduce", "x", 1, "too short", 0)),
                          None)
        with pytest.raises(MPI.Exception) as caught:
            method(request)
        assert "too short" in str(caught.value) and caught.value.__suppress_context__
        assert not request  # null after the failed wait, as MPI's request is freed
    finished = Request(_Started(5), lambda v: v * 2)  # a finish step: the Python method's
    assert finished.Wait() is True and finished._value == 10


@pytest.mark.parametrize("name", NAMES)
def test_a_freed_or_null_communicator_raises_as_the_python_method_does(starters, name):
    label, spec, block = _specs(2)[0]
    args = (spec, spec) if name == "Ialltoallv" else (block, spec, 0) if name == "Igatherv" \
        else (block, spec) if name == "Iallgatherv" else (spec, block, 0)
    raised = []
    for method in (starters[name], starters[name].fallback):
        with pytest.raises(MPI.Exception) as caught:
            method(MPI.Comm(), *args)  # COMM_NULL's handle
        raised.append((caught.value.Get_error_class(), str(caught.value)))
    assert raised[0] == raised[1] and raised[0][0] == MPI.ERR_COMM


_SENT = [np.ones(2), ([1, 1], [0, 1]), MPI.DOUBLE]


def _received_view(spec: Any) -> np.ndarray:
    """The ``out`` the compiled `Ialltoallv` hands collops for receive spec ``spec`` (its
    layout remembered first: the Python method takes a call whose layout is new)."""
    recorder = _Recorder(0, 2)
    for _ in range(2):
        wrap(recorder).Ialltoallv(_SENT, spec)
    return recorder.calls[-1][2]["out"]


def test_a_longer_receive_buffer_gives_its_kept_view_of_the_same_memory_only():
    """The view of a buffer's blocks' span is kept and given again for the same memory, type,
    length and writeability (whatever array it is cut from), and never for other memory."""
    counts, displs = [1, 1], [1, 3]  # span 4, buffer 6
    buf = np.zeros(6)
    spec = [buf, (counts, displs), MPI.DOUBLE]
    first = _received_view(spec)
    assert first.shape == (4,) and np.shares_memory(first, buf) and first.base is buf
    assert _received_view(spec) is first  # kept
    same_memory = buf[:5]  # another array over the same memory: the same view is right
    assert _received_view([same_memory, (counts, displs), MPI.DOUBLE]) is first
    other = np.zeros(6)
    second = _received_view([other, (counts, displs), MPI.DOUBLE])
    assert second is not first and second.base is other
    shifted = _received_view([buf[1:], (counts, displs), MPI.DOUBLE])  # other first element
    assert shifted is not first and shifted.__array_interface__["data"][0] == \
        buf[1:].__array_interface__["data"][0]
    as_ints = buf.view(np.int64)  # same memory, another type
    ints = _received_view([as_ints, (counts, displs), MPI.INT64_T])
    assert ints.dtype == np.int64 and ints is not first
    longer = _received_view([buf, ([1, 2], [1, 3]), MPI.DOUBLE])  # span 5
    assert longer.shape == (5,) and longer is not first


def test_a_dropped_receive_buffer_is_let_go_at_the_next_v_call():
    import weakref
    counts, displs = [1, 1], [1, 3]
    buf = np.zeros(6)
    gone = weakref.ref(buf)
    _received_view([buf, (counts, displs), MPI.DOUBLE])
    del buf
    assert gone() is not None  # held by the kept view until the next call
    _received_view([np.zeros(6), (counts, displs), MPI.DOUBLE])
    assert gone() is None
