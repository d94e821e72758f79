"""Point-to-point on MPI's own point-to-point: ``python p2p_mapping.py SCENARIO``.

* ``mapping`` (2+ ranks): on the world, on a split and on dups, a collops message is one MPI
  message on the communicator's own MPI communicator with the user's tag (mpi4py's probe sees
  the tag and the size), a tag past MPI's TAG_UB is an error naming it, and 40 dup-send-free
  cycles work; a blocking receive into a buffer (MPI's receive at once) never takes a message
  before a receive posted earlier, takes a large one's payload into the buffer, and gets one
  that comes only after its spin. Each rank prints ``{"rank": r, "checks": {...}}`` (or
  ``"error"``).
* ``dies`` (2 ranks, ``mpiexec -disable-auto-cleanup``): rank 1 leaves (``os._exit``) while
  rank 0 waits in ``recv(source=1)``; rank 0 prints the error and the seconds it took.
"""

import json
import os
import sys
import time
import traceback

import numpy as np
from mpi4py import MPI

import collops
from collops.mpi.p2p import HEADER_BYTES


def mapping(world):
    checks = {}
    sub = world.split(world.rank % 2)
    for name, comm in (("world", world), ("split", sub)):
        link = comm._channel().link  # an MpiChannel's: the communicator's own MPI one
        checks[f"{name}_group"] = link.mc.Get_size() == comm.size
        if comm.size < 2:
            continue
        if comm.rank == 0:
            comm.send(np.arange(5.0) + comm.size, 1, tag=77)
        elif comm.rank == 1:
            status = MPI.Status()
            link.mc.Probe(0, MPI.ANY_TAG, status)  # mpi4py sees collops' message as is
            checks[f"{name}_tag"] = status.Get_tag() == 77
            checks[f"{name}_bytes"] = status.Get_count(MPI.BYTE) == HEADER_BYTES + 40
            data, got = comm.recv(source=0, tag=77)
            checks[f"{name}_data"] = (np.array_equal(data, np.arange(5.0) + comm.size)
                                      and got.source == 0 and got.tag == 77)
        comm.barrier()
    try:
        world.send(np.ones(1), (world.rank + 1) % world.size, tag=1 << 30)
        checks["tag_ub"] = False
    except collops.ArgumentError as exc:
        checks["tag_ub"] = "TAG_UB" in str(exc) and str(1 << 30) in str(exc)
    right, left = (world.rank + 1) % world.size, (world.rank - 1) % world.size
    ok = True
    for i in range(40):
        with world.dup() as dup:
            data, status = dup.sendrecv(np.array([i, world.rank]), right, sendtag=i,
                                        source=left, recvtag=collops.ANY_TAG)
            ok &= data.tolist() == [i, left] and status.tag == i
    checks["dup_free"] = ok and len(world.transport._links) <= 3
    if world.rank < 2:
        checks["blocking_order"] = blocking_receives(world)
    return {"checks": checks}


def blocking_receives(world):
    """Rank 0 sends 1, 2, 3, a large message and, late, 4 (tag 9); rank 1 posts a receive,
    then receives into buffers: whether each message went where MPI's order says."""
    big = np.arange(70_000.0)
    if world.rank == 0:
        for value in (1.0, 2.0, 3.0):
            world.send(np.full(2, value), 1, tag=9)
        request = world.isend(big, 1, tag=9)
        time.sleep(0.05)
        world.send(np.full(2, 4.0), 1, tag=9)
        request.wait()
        return True
    early = world.irecv(source=0, tag=9)  # posted first: it takes message 1
    out, big_out = np.empty(2), np.empty(70_000)
    second = world.recv(out, source=0, tag=9)[0].tolist()
    first = early.wait()[0].tolist()
    third = world.recv(out, source=0, tag=9)[0].tolist()
    large, status = world.recv(big_out, source=0, tag=9)
    late = world.recv(out, source=0, tag=9)[0].tolist()
    return (first == [1.0] * 2 and second == [2.0] * 2 and third == [3.0] * 2
            and large is big_out and np.array_equal(big_out, big) and status.nbytes == big.nbytes
            and late == [4.0] * 2)


def dies(world):
    if world.rank == 1:
        time.sleep(0.3)
        os._exit(3)
    start = time.monotonic()
    try:
        world.recv(source=1, tag=5, timeout=30)
        return {"error": None}
    except collops.CollopsError as exc:
        return {"error": type(exc).__name__, "message": str(exc),
                "failed_rank": getattr(exc, "failed_rank", None),
                "seconds": time.monotonic() - start}


def main():
    scenario = sys.argv[1]
    world = collops.init()
    try:
        report = {"mapping": mapping, "dies": dies}[scenario](world)
    except Exception as exc:  # noqa: BLE001 - reported to the test
        report = {"error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"}
    print(json.dumps({"rank": world.rank, **report}), flush=True)


main()
