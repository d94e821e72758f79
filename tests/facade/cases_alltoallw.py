"""``Alltoallw`` (a count, byte displacement and datatype per peer) in every form, in place,
with ``MPI.BOTTOM`` and absolute addresses, and its bad specs — checked against numpy
indexing of the same buffers (run by `cases.run_cases`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from collops import MPI

from .cases import case, data, forms

SEND, RECEIVED = 40, 80


def _sent_to(sender: int, peer: int) -> np.ndarray:
    """The bytes rank ``sender`` sends rank ``peer``: an even peer gets ``peer + 1`` doubles
    from double ``5 * peer``; an odd one two strided pairs of int32 (a vector type) from
    int32 ``10 * peer`` of the same buffer's bytes."""
    buffer = data(sender, SEND)
    if peer % 2 == 0:
        return buffer[5 * peer:5 * peer + peer + 1].view(np.uint8)
    first = 10 * peer
    return buffer.view(np.int32)[[first, first + 3, first + 4, first + 7]].view(np.uint8)


def _types(p: int) -> tuple[list[Any], list[int], list[int]]:
    """The send side's datatypes, counts and byte displacements, per peer."""
    pairs = MPI.INT32_T.Create_vector(2, 1, 3).Commit()
    types = [MPI.DOUBLE if j % 2 == 0 else pairs for j in range(p)]
    counts = [j + 1 if j % 2 == 0 else 2 for j in range(p)]
    displs = [8 * 5 * j if j % 2 == 0 else 4 * 10 * j for j in range(p)]
    return types, counts, displs


@case
def case_alltoallw(comm: Any) -> list[tuple[str, Any, Any]]:
    p, me = comm.size, comm.rank
    stypes, scounts, sdispls = _types(p)
    # this rank receives what each sender sends it, as doubles (even) or int32 (odd), at
    # byte 8 * (10 * i + 1): the gaps keep their -1
    rtype = MPI.DOUBLE if me % 2 == 0 else MPI.INT32_T
    rcount = me + 1 if me % 2 == 0 else 4
    rdispls = [8 * (10 * i + 1) for i in range(p)]
    want = np.full(RECEIVED, -1.0)
    for i in range(p):
        want.view(np.uint8)[rdispls[i]:rdispls[i] + _sent_to(i, me).size] = _sent_to(i, me)
    results = []
    for label, got in forms(comm, comm.Alltoallw, comm.Ialltoallw, comm.Alltoallw_init,
                            lambda: ([data(me, SEND), (scounts, sdispls), stypes],
                                     [np.full(RECEIVED, -1.0), rcount, rdispls,
                                      [rtype] * p]),
                            lambda bufs: bufs[1][0].view(np.uint8)):
        results.append(("alltoallw " + label, got, want.view(np.uint8)))
    return results


@case
def case_alltoallw_in_place(comm: Any) -> list[tuple[str, Any, Any]]:
    """Block j of the buffer goes to rank j and is replaced by rank j's block for this rank;
    what lies between the blocks stays."""
    p, me = comm.size, comm.rank
    size = 3 * p + 1
    rdispls = [8 * 3 * j for j in range(p)]
    want = data(me, size)
    for j in range(p):
        want[3 * j:3 * j + 2] = data(j, size)[3 * me:3 * me + 2]
    results = []
    for label, got in forms(comm, comm.Alltoallw, comm.Ialltoallw, comm.Alltoallw_init,
                            lambda: (MPI.IN_PLACE, [data(me, size), ([2] * p, rdispls),
                                                    [MPI.DOUBLE] * p]),
                            lambda bufs: bufs[1][0].copy()):
        if label.startswith("persistent start 1"):  # the second start exchanges again
            continue
        results.append(("alltoallw in place " + label, got, want))
    return results


@case
def case_alltoallw_bottom(comm: Any) -> list[tuple[str, Any, Any]]:
    """Absolute addresses: a ``Create_struct`` per peer of ``Get_address`` values, with
    ``MPI.BOTTOM`` as both buffers."""
    p, me = comm.size, comm.rank
    send, received = data(me, 2 * p), np.full(2 * p, -1.0)
    at, to = MPI.Get_address(send), MPI.Get_address(received)
    stypes = [MPI.Datatype.Create_struct([2], [MPI.Aint_add(at, 16 * j)], [MPI.DOUBLE]).Commit()
              for j in range(p)]
    rtypes = [MPI.Datatype.Create_struct([2], [to + 16 * i], [MPI.DOUBLE]).Commit()
              for i in range(p)]
    comm.Alltoallw((MPI.BOTTOM, ([1] * p, [0] * p), stypes),
                   (MPI.BOTTOM, ([1] * p, [0] * p), rtypes))
    want = np.concatenate([data(i, 2 * p)[2 * me:2 * me + 2] for i in range(p)])
    for t in stypes + rtypes:
        t.Free()
    # doubles at addresses off their 8-byte boundaries (4 bytes into byte buffers)
    raw_send = np.zeros(16 * p + 8, np.uint8)
    raw_send[4:4 + 16 * p] = data(me, 2 * p).view(np.uint8)
    raw_received = np.full(16 * p + 8, 255, np.uint8)
    at, to = MPI.Get_address(raw_send) + 4, MPI.Get_address(raw_received) + 4
    stypes = [MPI.Datatype.Create_struct([2], [at + 16 * j], [MPI.DOUBLE]).Commit()
              for j in range(p)]
    rtypes = [MPI.Datatype.Create_struct([2], [to + 16 * i], [MPI.DOUBLE]).Commit()
              for i in range(p)]
    comm.Alltoallw((MPI.BOTTOM, ([1] * p, [0] * p), stypes),
                   (MPI.BOTTOM, ([1] * p, [0] * p), rtypes))
    unaligned = np.full(16 * p + 8, 255, np.uint8)
    unaligned[4:4 + 16 * p] = want.view(np.uint8)
    lower = stypes[0].Get_extent()[0]
    return [("alltoallw BOTTOM", received, want),
            ("alltoallw BOTTOM off element boundaries", raw_received, unaligned),
            ("a struct's lower bound is its first byte's address", lower, at),
            ("Get_address", (MPI.Aint_diff(to + 24, to), MPI.Get_address(MPI.BOTTOM)), (24, 0))]


@case
def case_alltoallw_bad_specs(comm: Any) -> list[tuple[str, Any, Any]]:
    """Bad specs raise on the calling rank before anything is sent, naming the argument."""
    p = comm.size
    good = [np.zeros(p), ([1] * p, [8 * j for j in range(p)]), [MPI.DOUBLE] * p]
    bad = {
        "one datatype short": [np.zeros(p), ([1] * p, [0] * p), [MPI.DOUBLE] * (p - 1)],
        "no datatypes": [np.zeros(p), MPI.DOUBLE],
        "beyond the buffer": [np.zeros(p), ([2] * p, [8 * j for j in range(p)]),
                              [MPI.DOUBLE] * p],
    }
    results = []
    for label, spec in bad.items():
        try:
            comm.Alltoallw(good, spec)
            results.append((label, "no error", "recvbuf named"))
        except MPI.Exception as exc:
            results.append((label, "recvbuf" in str(exc) and "Alltoallw" in str(exc), True))
    comm.Barrier()  # nobody was left waiting
    return results
