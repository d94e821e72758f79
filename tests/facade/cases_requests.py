"""Facade cases for requests completed in groups, statuses, operator and group handles and
object messages (run by `cases.run_cases`), each checked against the values sent."""

from __future__ import annotations

import pickle
import warnings
from typing import Any

from collops import MPI

from .cases import case


def _object(rank: int, tag: int) -> dict[str, int]:
    return {"from": rank, "tag": tag}


@case
def case_object_requests_completed_in_groups(comm: Any) -> list[tuple[str, Any, Any]]:
    """waitsome/testsome/waitall/testall on object receives: the indices, the objects and
    statuses of the requests completed, statuses lists grown as mpi4py grows them."""
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    results = []
    requests = [comm.irecv(source=left, tag=t) for t in range(4)]
    statuses: list[Any] = []
    results.append(("testsome before any send", MPI.Request.testsome(requests, statuses),
                    ([], [])))
    results.append(("testsome statuses", len(statuses), 0))
    comm.Barrier()  # nothing is sent before every rank has tested
    sends = [comm.isend(_object(r, t), dest=right, tag=t) for t in (2, 0, 3, 1)]
    got: dict[int, Any] = {}
    sources = []
    while len(got) < 4:
        statuses = []
        indices, objects = MPI.Request.waitsome(requests, statuses)
        assert indices is not None and objects is not None
        got.update(zip(indices, objects, strict=True))
        sources += [(s.Get_source(), s.Get_tag()) for s in statuses]
        results.append(("waitsome statuses per index", len(statuses), len(indices)))
    results.append(("waitsome objects", [got[t] for t in range(4)],
                    [_object(left, t) for t in range(4)]))
    results.append(("waitsome statuses", sorted(sources), [(left, t) for t in range(4)]))
    results.append(("requests null", [bool(q) for q in requests], [False] * 4))
    results.append(("waitsome all null", MPI.Request.waitsome(requests), (None, None)))
    results.append(("testsome all null", MPI.Request.testsome(requests), (None, None)))
    statuses = []
    MPI.Request.Waitall(sends, statuses)
    results.append(("Waitall grows statuses", len(statuses), 4))
    requests = [comm.irecv(source=left, tag=5), comm.isend(_object(r, 5), dest=right, tag=5)]
    statuses = []
    flag, values = False, None
    while not flag:
        flag, values = MPI.Request.testall(requests, statuses)
    results.append(("testall objects", values, [_object(left, 5), None]))
    results.append(("testall statuses", [(s.Get_source(), s.Get_tag()) for s in statuses][0],
                    (left, 5)))
    return results


@case
def case_request_status_queries(comm: Any) -> list[tuple[str, Any, Any]]:
    """get_status and Get_status_all/any/some: complete requests found (their statuses
    filled) without completing them; null requests; cancelled receives."""
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    results = []
    null = [MPI.Request() for _ in range(3)]
    results.append(("null", (MPI.Request.Get_status_all(null),
                             MPI.Request.Get_status_any(null),
                             MPI.Request.Get_status_some(null), null[0].get_status()),
                    (True, (MPI.UNDEFINED, True), None, True)))
    receive = comm.irecv(source=left, tag=8)
    status = MPI.Status()
    results.append(("not yet", (receive.Get_status(status), MPI.Request.Get_status_any(
        [receive]), MPI.Request.Get_status_some([receive]), bool(receive)),
                    (False, (MPI.UNDEFINED, False), [], True)))
    comm.Barrier()
    send = comm.isend(_object(r, 8), dest=right, tag=8)
    while not receive.get_status(status):
        pass
    results.append(("found, not completed", (status.Get_source(), status.Get_tag(),
                                             bool(receive)), (left, 8, True)))
    statuses: list[Any] = []
    results.append(("Get_status_all", (MPI.Request.Get_status_all([receive], statuses),
                                       [s.Get_source() for s in statuses]), (True, [left])))
    results.append(("then wait", receive.wait(), _object(left, 8)))
    send.wait()
    cancelled = comm.irecv(source=left, tag=99)  # never sent
    cancelled.cancel()
    status = MPI.Status()
    results.append(("cancelled receive", (cancelled.Get_status(status),
                                          status.Is_cancelled()), (True, True)))
    cancelled.Free()
    return results


@case
def case_object_messages_from_buffers(comm: Any) -> list[tuple[str, Any, Any]]:
    """An object receive of a buffer message: empty is None, MPI.pickle's bytes their
    object; recv's buffer argument warns as mpi4py's does."""
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    results = []
    send = comm.Isend([None, 0, "B"], right)
    results.append(("empty message", comm.recv(None, left), None))
    send.Wait()
    obj = {"a": [1, 2.5], "rank": r}
    send = comm.Isend([MPI.pickle.dumps(obj), "B"], right, tag=3)
    results.append(("pickled bytes", comm.irecv(None, left, tag=3).wait(),
                    {"a": [1, 2.5], "rank": left}))
    send.Wait()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        comm.recv(bytearray(8), MPI.PROC_NULL)
    results.append(("recv(buf) warns", [w.category for w in caught], [UserWarning]))
    return results


@case
def case_handles(comm: Any) -> list[tuple[str, Any, Any]]:
    """Null operator, group and status handles, and pickling them, as mpi4py's."""
    results = []
    results.append(("Op() is OP_NULL", (bool(MPI.Op()), MPI.Op() == MPI.OP_NULL,
                                        MPI.Op(MPI.SUM) == MPI.SUM, MPI.SUM == MPI.MAX),
                    (False, True, True, False)))
    results.append(("predefined op pickled", (pickle.loads(pickle.dumps(MPI.SUM)) is MPI.SUM,
                                              pickle.loads(pickle.dumps(MPI.Op(MPI.MAX)))
                                              == MPI.MAX), (True, True)))
    try:
        MPI.OP_NULL(1, 2)
        results.append(("OP_NULL(x, y)", "no error", "ValueError"))
    except ValueError:
        pass
    group = comm.Get_group()
    results.append(("GROUP_NULL", (bool(MPI.GROUP_NULL), bool(MPI.Group()),
                                   MPI.Group() == MPI.GROUP_NULL, bool(MPI.GROUP_EMPTY),
                                   MPI.GROUP_EMPTY == MPI.GROUP_NULL, group.Get_size()),
                    (False, False, True, True, False, comm.size)))
    results.append(("groups pickled", (
        pickle.loads(pickle.dumps(MPI.GROUP_EMPTY)) is MPI.GROUP_EMPTY,
        pickle.loads(pickle.dumps(MPI.Group(MPI.GROUP_NULL))) == MPI.GROUP_NULL),
                    (True, True)))
    try:
        pickle.dumps(group)
        results.append(("a job's group pickled", "no error", "ValueError"))
    except ValueError:
        pass
    group.Free()
    results.append(("freed group is null", (bool(group), group == MPI.GROUP_NULL),
                    (False, True)))
    status = MPI.Status()
    status.count = 7
    results.append(("Status.count settable", (status.count, status.Get_count(MPI.BYTE)),
                    (7, 7)))
    try:
        MPI.Status(123)  # type: ignore[arg-type]
        results.append(("Status(123)", "no error", "TypeError"))
    except TypeError:
        pass
    return results


@case
def case_attributes(comm: Any) -> list[tuple[str, Any, Any]]:
    """Attribute caching: values per communicator (seen by all its handles), copied by Dup as
    each key's copy_fn says, handed to delete_fn when replaced, deleted or freed."""
    results = []
    deleted: list[tuple[str, Any]] = []
    base = comm.Dup()
    plain = MPI.Comm.Create_keyval()
    same = MPI.Comm.Create_keyval(copy_fn=True,
                                  delete_fn=lambda c, k, v: deleted.append(("same", v)))
    doubled = MPI.Comm.Create_keyval(copy_fn=lambda c, k, v: 2 * v,
                                     delete_fn=lambda c, k, v: deleted.append(("doubled", v)))
    refused = MPI.Comm.Create_keyval(copy_fn=lambda c, k, v: NotImplemented)
    values = {plain: [1], same: [2], doubled: 21, refused: "x"}
    results.append(("unset", base.Get_attr(plain), None))
    for keyval, value in values.items():
        base.Set_attr(keyval, value)
    results.append(("set", [base.Get_attr(k) is v for k, v in values.items()], [True] * 4))
    results.append(("another handle", MPI.Comm(base).Get_attr(same) is values[same], True))
    results.append(("not on its parent", comm.Get_attr(same), None))
    dup = base.Dup()
    results.append(("Dup copies", [dup.Get_attr(k) for k in values], [None, [2], 42, None]))
    base.Set_attr(doubled, 5)
    results.append(("replaced value deleted", list(deleted), [("doubled", 21)]))
    base.Delete_attr(same)
    results.append(("Delete_attr", (base.Get_attr(same), deleted[-1]), (None, ("same", [2]))))
    dup.Free()
    results.append(("Free deletes", sorted(deleted[-2:]), [("doubled", 42), ("same", [2])]))
    base.Free()
    results.append(("Free deletes the rest", deleted[-1], ("doubled", 5)))
    for keyval in values:
        results.append(("Free_keyval", MPI.Comm.Free_keyval(keyval), MPI.KEYVAL_INVALID))
    results.append(("TAG_UB", comm.Get_attr(MPI.TAG_UB) >= 32767, True))
    return results
