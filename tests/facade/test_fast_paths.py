"""The facade's fast paths for the regular collectives: the commonest calls (plain 1-D arrays,
a usable operator) go straight to collops' own call — blocking, ``I…`` and ``…_init`` —
and everything else takes the general path, which says what is wrong: null or freed
operators, and buffers of other shapes (read as flat, as MPI reads them)."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest

import collops
from collops import MPI
from collops.facade.comm import wrap

#: name -> (call on a facade communicator with 1-element blocks, collops' own method)
CALLS: dict[str, Any] = {
    "Gather": lambda c, x, r, w, b: c.Gather(x, b, 0),
    "Scatter": lambda c, x, r, w, b: c.Scatter(w, r, 0),
    "Alltoall": lambda c, x, r, w, b: c.Alltoall(w, b),
    "Allgather": lambda c, x, r, w, b: c.Allgather(x, b),
    "Scan": lambda c, x, r, w, b: c.Scan(x, r, MPI.SUM),
    "Exscan": lambda c, x, r, w, b: c.Exscan(x, r, MPI.SUM),
    "Reduce_scatter_block": lambda c, x, r, w, b: c.Reduce_scatter_block(w, r, MPI.SUM),
    "Reduce_scatter": lambda c, x, r, w, b: c.Reduce_scatter(w, r, [1], MPI.SUM),
    "Allreduce": lambda c, x, r, w, b: c.Allreduce(x, r, MPI.SUM),
    "Reduce": lambda c, x, r, w, b: c.Reduce(x, r, MPI.SUM, 0),
    "Bcast": lambda c, x, r, w, b: c.Bcast(x, 0),
    "Barrier": lambda c, x, r, w, b: c.Barrier(),
}
#: the general path's functions: none of them runs on a fast path
GENERAL = {"_run", "_gather", "_scatter", "_alltoall", "_allgather", "_scan",
           "_reduce_scatter_block", "_reduce_scatter", "_reduction", "_reduce", "_bcast",
           "planned"}


def _frames(call: Any) -> set[str]:
    """The names of the facade's collective functions ``call`` runs."""
    names: set[str] = set()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.endswith("collectives.py") \
                and "facade" in frame.f_code.co_filename:
            names.add(frame.f_code.co_name)
    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return names


def _blocking(name: str) -> Any:
    return lambda c, *bufs: CALLS[name](c, *bufs)


def _nonblocking(name: str) -> Any:
    method = "I" + name[0].lower() + name[1:]

    def call(c: Any, x: Any, r: Any, w: Any, b: Any) -> None:
        original = getattr(c, name)
        try:  # the I… form with the blocking form's arguments
            setattr(c, name, lambda *a: getattr(type(c), method)(c, *a).Wait())
            CALLS[name](c, x, r, w, b)
        finally:
            setattr(c, name, original)
    return call


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("form", ["blocking", "nonblocking"])
def test_the_commonest_call_runs_none_of_the_general_path(name, form):
    comm = MPI.COMM_SELF
    bufs = (np.ones(1), np.empty(1), np.ones(1), np.empty(1))
    call = (_blocking if form == "blocking" else _nonblocking)(name)
    call(comm, *bufs)  # prepared first
    ran = _frames(lambda: call(comm, *bufs))
    assert not ran & GENERAL, sorted(ran & GENERAL)


def _bad_operators(comm: Any) -> dict[str, str]:
    facade = wrap(comm)
    freed = MPI.Op.Create(lambda a, b, t: None, True)
    freed.Free()
    x, r = np.ones(2), np.zeros(2)
    calls = {
        "Allreduce": lambda op: facade.Allreduce(x, r, op),
        "Iallreduce": lambda op: facade.Iallreduce(x, r, op).Wait(),
        "Reduce": lambda op: facade.Reduce(x, r, op, 0),
        "Ireduce": lambda op: facade.Ireduce(x, r, op, 0).Wait(),
        "Scan": lambda op: facade.Scan(x, r, op),
        "Iexscan": lambda op: facade.Iexscan(x, r, op).Wait(),
        "Reduce_scatter_block": lambda op: facade.Reduce_scatter_block(
            np.ones(2 * comm.size), r, op),
    }
    found = {}
    for name, call in calls.items():
        for label, op in (("null", MPI.OP_NULL), ("freed", freed)):
            try:
                call(op)
                found[f"{name} {label}"] = "no error"
            except MPI.Exception as exc:
                found[f"{name} {label}"] = "ERR_OP" if exc.Get_error_class() == MPI.ERR_OP \
                    else str(exc)
    facade.Barrier()  # nobody was left waiting
    return found


@pytest.mark.timeout(60)
@pytest.mark.parametrize("transport", ["inproc", "shm"])
def test_a_null_or_freed_operator_is_an_error_not_a_sum(transport):
    for found in collops.spawn(_bad_operators, 2, transport=transport, timeout=30):
        assert set(found.values()) == {"ERR_OP"}, found


def _shaped(comm: Any) -> list[tuple[str, Any, Any]]:
    """Buffers of other shapes than 1-D take the general path, read flat as MPI reads them."""
    facade, p, me = wrap(comm), comm.size, comm.rank
    rows = np.arange(2 * p, dtype=np.float64).reshape(p, 2) + 10 * me
    flat = np.empty(2 * p)
    facade.Alltoall(rows, flat)
    want = np.concatenate([np.arange(2 * p, dtype=np.float64).reshape(p, 2)[me] + 10 * j
                           for j in range(p)])
    gathered = np.empty((p, 2))
    facade.Gather(rows[0], gathered, 0)
    scanned = np.empty((1, 2))
    facade.Scan(rows[:1], scanned, MPI.SUM)
    total = sum(np.arange(2, dtype=np.float64) + 10 * j for j in range(me + 1))
    return [("Alltoall 2-D into 1-D", flat, want),
            ("Gather into 2-D", gathered if me == 0 else None,
             np.stack([np.arange(2.0) + 10 * j for j in range(p)]) if me == 0 else None),
            ("Scan 2-D", scanned.ravel(), total)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("transport", ["inproc", "shm"])
def test_buffers_of_other_shapes_take_the_general_path_read_flat(transport):
    for rank, triples in enumerate(collops.spawn(_shaped, 2, transport=transport, timeout=30)):
        for label, got, want in triples:
            if want is None:
                continue
            assert np.array_equal(got, want), (rank, label, got, want)


def test_point_to_point_calls_of_plain_arrays_stage_nothing():
    """``Isend``/``Irecv``/``Sendrecv`` of plain arrays, and the object forms, go straight to
    collops' own call (no `Stage`, no generic dispatch), with the same results."""
    comm = MPI.COMM_SELF
    ran: set[str] = set()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and "facade" in frame.f_code.co_filename:
            ran.add(frame.f_code.co_name)

    x, r = np.arange(3.0), np.zeros(3)
    sys.setprofile(profile)
    try:
        send = comm.Isend(x, 0, 9)
        receive = comm.Irecv(r, 0, 9)
        status = MPI.Status()
        receive.Wait(status)
        send.Wait()
        status2 = MPI.Status()
        back = np.zeros(3)
        comm.Sendrecv(x * 2, 0, 6, back, 0, 6, status2)
        comm.send({"a": 1}, 0, 8)
        got = comm.recv(source=0, tag=8)
        later = comm.irecv(source=0, tag=7)
        comm.isend([2], 0, 7).wait()
        obj = later.wait()
    finally:
        sys.setprofile(None)
    assert not ran & {"_staged", "_do", "_in", "_out", "pack", "finisher"}, sorted(ran)
    assert r.tolist() == [0.0, 1.0, 2.0] and status.Get_count(MPI.DOUBLE) == 3
    assert got == {"a": 1} and obj == [2]
    assert back.tolist() == [0.0, 2.0, 4.0] and status2.Get_source() == 0 \
        and status2.Get_tag() == 6


def test_the_compiled_pair_check_gives_the_python_answer():
    from collops.facade import buffers
    frozen = np.zeros(2)
    frozen.flags.writeable = False
    specs = [np.zeros(3), [np.zeros(3), MPI.DOUBLE], [np.zeros(3, np.int32), MPI.DOUBLE],
             np.zeros((2, 2)), np.zeros(6)[::2], frozen, MPI.IN_PLACE, None, b"ab",
             [np.zeros(2), 2, MPI.DOUBLE]]
    for send in specs:
        for receive in specs:
            compiled = buffers.plain_pair(send, receive)
            python = buffers._plain_pair(send, receive)
            assert (compiled is None) == (python is None), (send, receive)
            if compiled is not None:
                assert compiled[0] is python[0] and compiled[1] is python[1]
