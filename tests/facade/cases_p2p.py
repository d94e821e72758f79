"""Facade point-to-point cases (run by `cases.run_cases`), checked against numpy."""

from __future__ import annotations

from typing import Any

import numpy as np

from collops import MPI

from .cases import case, data


@case
def case_send_recv(comm: Any) -> list[tuple[str, Any, Any]]:
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    results = []
    got = np.zeros(4)
    status = MPI.Status()
    if r % 2 == 0:
        comm.Send(data(r, 4), dest=right, tag=5)
        comm.Recv([got, MPI.DOUBLE], source=left, tag=5, status=status)
    else:
        comm.Recv(got, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
        comm.Send([data(r, 4), MPI.DOUBLE], dest=right, tag=5)
    results.append(("Send/Recv ring", got, data(left, 4)))
    results.append(("status", (status.Get_source(), status.Get_tag(),
                               status.Get_count(MPI.DOUBLE), status.Get_count()),
                    (left, 5, 4, 32)))
    got = np.zeros(3, np.intc)
    requests = [comm.Irecv(got, source=left, tag=1),
                comm.Isend(data(r, 3, np.intc), dest=right, tag=1)]
    statuses = [MPI.Status(), MPI.Status()]
    MPI.Request.Waitall(requests, statuses)
    results.append(("Isend/Irecv", got, data(left, 3, np.intc)))
    results.append(("Waitall status", statuses[0].Get_source(), left))
    got = np.zeros(2)
    comm.Sendrecv(data(r, 2), dest=right, sendtag=2, recvbuf=got, source=left, recvtag=2)
    results.append(("Sendrecv", got, data(left, 2)))
    buf = data(r, 2)
    comm.Sendrecv_replace(buf, dest=right, sendtag=3, source=left, recvtag=3)
    results.append(("Sendrecv_replace", buf, data(left, 2)))
    # Isendrecv_replace whose incoming message is already here: rank 0 posts after the others
    # sent theirs (its receive completes as it is posted) and must still send what its buffer
    # held before (it once sent the message it had just received)
    buf = data(r, 3)
    if r == 0:
        comm.Barrier()
        comm.Isendrecv_replace(buf, dest=right, sendtag=4, source=left, recvtag=4).Wait()
    else:
        request = comm.Isendrecv_replace(buf, dest=right, sendtag=4, source=left, recvtag=4)
        comm.Barrier()
        request.Wait()
    results.append(("Isendrecv_replace, its message already here", buf, data(left, 3)))
    buf = data(r, 3)  # the same through Isendrecv with one buffer for both sides
    if r == 0:
        comm.Barrier()
        comm.Isendrecv(buf, dest=right, sendtag=6, recvbuf=buf, source=left, recvtag=6).Wait()
    else:
        request = comm.Isendrecv(buf.copy(), dest=right, sendtag=6, recvbuf=buf, source=left,
                                 recvtag=6)
        comm.Barrier()
        request.Wait()
    results.append(("Isendrecv into its send buffer, its message already here", buf,
                    data(left, 3)))
    null = np.full(2, 9.0)
    status = MPI.Status()
    comm.Recv(null, source=MPI.PROC_NULL, status=status)
    comm.Send(data(r, 2), dest=MPI.PROC_NULL)
    results.append(("PROC_NULL", (null.tolist(), status.Get_source(), status.Get_count()),
                    ([9.0, 9.0], MPI.PROC_NULL, 0)))
    return results


@case
def case_probes_and_persistent(comm: Any) -> list[tuple[str, Any, Any]]:
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    results = []
    comm.Isend(data(r, 5), dest=right, tag=7)
    status = MPI.Status()
    comm.Probe(source=left, tag=7, status=status)
    n = status.Get_count(MPI.DOUBLE)
    got = np.zeros(n)
    comm.Recv(got, source=status.Get_source(), tag=7)
    results.append(("Probe sizes the receive", (n, got), (5, data(left, 5))))
    send = comm.Isend(data(r, 2), dest=right, tag=8)
    message = comm.Mprobe(source=MPI.ANY_SOURCE, tag=8, status=status)
    got = np.zeros(2)
    message.Recv(got)
    send.Wait()
    results.append(("Mprobe + Message.Recv", (status.Get_source(), got), (left, data(left, 2))))
    comm.Barrier()
    results.append(("Iprobe with nothing sent", comm.Iprobe(source=left, tag=99), False))
    results.append(("Improbe with nothing sent", comm.Improbe(source=left, tag=99), None))
    out = np.zeros(3)
    sends = comm.Send_init(np.zeros(3), dest=right, tag=4)
    recvs = comm.Recv_init(out, source=left, tag=4)
    for round_ in range(2):
        sends_buf = data(r + round_, 3)
        sends = comm.Send_init(sends_buf, dest=right, tag=4)
        MPI.Prequest.Startall([recvs, sends])
        MPI.Request.Waitall([recvs, sends])
        results.append((f"persistent round {round_}", out.copy(), data(left + round_, 3)))
    recvs.Free()
    pending = comm.Irecv(np.zeros(1), source=left, tag=42)
    pending.Cancel()
    status = MPI.Status()
    pending.Wait(status)
    results.append(("Cancel", status.Is_cancelled(), True))
    comm.Barrier()
    return results


@case
def case_objects_p2p(comm: Any) -> list[tuple[str, Any, Any]]:
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    results = []
    payload = {"from": r, "data": list(range(r + 2))}
    expected = {"from": left, "data": list(range(left + 2))}
    request = comm.isend(payload, dest=right, tag=11)
    status = MPI.Status()
    results.append(("isend/recv", comm.recv(source=left, tag=11, status=status), expected))
    request.wait()
    results.append(("status source", status.Get_source(), left))
    request = comm.irecv(source=left, tag=12)
    comm.send(payload, dest=right, tag=12)
    results.append(("irecv.wait", request.wait(), expected))
    results.append(("sendrecv", comm.sendrecv(payload, dest=right, sendtag=13, source=left,
                                              recvtag=13), expected))
    request = comm.issend(payload, dest=right, tag=14)
    comm.probe(source=left, tag=14)
    message = comm.mprobe(source=left, tag=14)
    results.append(("mprobe + Message.recv", message.recv(), expected))
    request.wait()
    request = comm.irecv(source=left, tag=15)
    comm.ssend(payload, dest=right, tag=15)
    flag, obj = request.test()
    while not flag:
        flag, obj = request.test()
    results.append(("irecv.test", (obj, bool(request)), (expected, False)))
    return results


@case
def case_matched_message_handles(comm: Any) -> list[tuple[str, Any, Any]]:
    """mpi4py's handle semantics for matched messages: ``Message(m)`` is another handle,
    receiving nulls the handle received through, ``MESSAGE_NO_PROC`` (a matched probe of
    PROC_NULL) receives nothing and, being predefined, stays itself."""
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    noproc = MPI.MESSAGE_NO_PROC
    out = data(-1, 2)
    status = MPI.Status()
    noproc.Recv(out, status)
    results = [
        ("NO_PROC is not NULL", (bool(noproc), noproc != MPI.MESSAGE_NULL, bool(MPI.Message())),
         (True, True, False)),
        ("NO_PROC receives nothing", (status.Get_source(), status.Get_count(MPI.DOUBLE),
                                      list(out), bool(noproc)),
         (MPI.PROC_NULL, 0, list(data(-1, 2)), True)),
        ("Mprobe(PROC_NULL)", comm.Mprobe(MPI.PROC_NULL) == noproc, True),
        ("Improbe(PROC_NULL)", comm.improbe(MPI.PROC_NULL) == noproc, True),
    ]
    copy = MPI.Message(noproc)
    request = copy.irecv()
    results.append(("a copy of NO_PROC is nulled by its receive",
                    (copy == MPI.MESSAGE_NULL, request != MPI.REQUEST_NULL, request.wait(),
                     request == MPI.REQUEST_NULL), (True, True, None, True)))
    send = comm.Isend(data(r, 3), dest=right, tag=21)
    message = MPI.Message.Probe(comm, left, 21)
    other = MPI.Message(message)
    got = np.zeros(3)
    message.Recv(got)
    send.Wait()
    results.append(("Message.Probe, a second handle", (list(got), bool(message), bool(other),
                                                       other == message),
                    (list(data(left, 3)), False, True, False)))
    try:
        other.Recv(got)
        results.append(("a second receive of one message", "no error", "MPI.Exception"))
    except MPI.Exception as exc:
        results.append(("a second receive of one message", "was received already" in str(exc),
                        True))
    comm.Barrier()
    results.append(("Message.iprobe with nothing sent", MPI.Message.iprobe(comm, left, 22),
                    None))
    return results


@case
def case_errors(comm: Any) -> list[tuple[str, Any, Any]]:
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    results = []
    comm.Isend(data(r, 8), dest=right, tag=21)
    try:
        comm.Recv(np.zeros(2), source=left, tag=21)
        results.append(("truncation raises", None, "ERR_TRUNCATE"))
    except MPI.Exception as exc:
        results.append(("truncation class", exc.Get_error_class(), MPI.ERR_TRUNCATE))
        results.append(("names both sizes", "64" in str(exc) and "16" in str(exc), True))
    for call, expected_class in (
            (lambda: comm.Bcast(np.zeros(2), root=p), MPI.ERR_ROOT),
            (lambda: comm.Send(np.zeros(1), dest=p + 1), MPI.ERR_RANK),
            (lambda: comm.Recv(np.zeros(1), source=left, tag=-5), MPI.ERR_TAG),
            (lambda: comm.Allreduce(np.zeros(2), np.zeros(3)), MPI.ERR_BUFFER)):
        try:
            call()
            results.append(("raises", None, expected_class))
        except MPI.Exception as exc:
            results.append((repr(exc), exc.Get_error_class(), expected_class))
    comm.Barrier()
    return results


@case
def case_groups_and_new_comms(comm: Any) -> list[tuple[str, Any, Any]]:
    p, r = comm.size, comm.rank
    world = comm.Get_group()
    evens = world.Range_incl([(0, p - 1, 2)])
    odds = world.Excl(list(range(0, p, 2)))
    results = [
        ("Union", MPI.Group.Union(odds, evens).Get_size(), p),
        ("Intersection", MPI.Group.Intersection(evens, odds).Get_size(), 0),
        ("Difference", MPI.Group.Difference(world, odds).Get_size(), len(range(0, p, 2))),
        ("Translate_ranks", MPI.Group.Translate_ranks(evens, list(range(evens.Get_size())),
                                                      world), list(range(0, p, 2))),
        ("Group rank", evens.Get_rank(), r // 2 if r % 2 == 0 else MPI.UNDEFINED),
    ]
    if r % 2 == 0:  # collective over the even ranks only
        sub = comm.Create_group(evens, tag=3)
        results.append(("Create_group", (sub.Get_size(), sub.allreduce(r)),
                        (len(range(0, p, 2)), sum(range(0, p, 2)))))
        sub.Free()
    new, request = comm.Idup()
    request.Wait()
    results.append(("Idup", (new.Get_size(), new.allreduce(1), comm.Compare(new)),
                    (p, p, MPI.CONGRUENT)))
    new.Free()
    for _ in range(50):  # communicators come and go
        comm.Dup().Free()
    try:
        comm.Create_intercomm(0, comm, 0)
        results.append(("Create_intercomm", "no error", "NotImplementedError"))
    except NotImplementedError as exc:
        results.append(("Create_intercomm", "intercommunicators" in str(exc), True))
    return results
