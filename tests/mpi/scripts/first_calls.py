"""First ``mpi_native`` calls on two new communicators, begun in opposite orders on the ranks:
``python first_calls.py CYCLES``.

MPI lets ranks begin non-blocking collectives on two communicators in any order. A
communicator's MPI communicators for MPI's own collectives are made by its first
``mpi_native`` call; made by blocking calls there, rank 0 making the first communicator's
while rank 1 made the second's waited for ever. Each cycle, on communicators made by
``dup``, ``idup`` (their ids agreed in opposite orders too) and ``split``:

* even ranks begin ``iallreduce`` on ``a`` then ``ibcast`` on ``b``, odd ranks the reverse,
  and wait in opposite orders as well;
* then a blocking first call: ``allgather`` on a third communicator, made while a non-blocking
  call on ``a`` is in flight;

every result against numpy; then all are freed. Prints ``{"rank": r, "cycles": n,
"wrong": [...], "pools": pools alive at the end}``. ``python first_calls.py CYCLES hier``: the
same with ``hier`` (node-local phases and one among the node leaders), whose node and leader
communicators per slot are made by the first ``hier`` call.

``python first_calls.py idups CYCLES [hier]``: ``idup`` s on three communicators begun and
waited in an order of each rank's own, then each new one's first calls (`idups`). Prints
``{"rank": r, "wrong": [...], "pools": n}``.

``python first_calls.py stalled``: rank 1 makes a new communicator's first (blocking) call
1.5 s late; prints ``{"rank": r, "right": result right?}``.

``python first_calls.py idup_given_up``: see `idup_given_up`.

``python first_calls.py late``: rank 0 begins a first ``iallreduce`` with ``timeout=1`` that
rank 1 never begins; rank 0's wait raises `CollectiveTimeout`, both free the communicator
(rank 0's unfinished MPI communicators left to MPI), and a new one's first calls are right.
Prints ``{"rank": r, "error": [type, message], "after": right?}``.
"""

import json
import sys

import numpy as np

import collops

NATIVE = ("allreduce", "bcast", "allgather")


ALGORITHM = "hier" if "hier" in sys.argv[2:] else "mpi_native"


def native(comm):
    for collective in NATIVE:
        comm.set_algorithm(collective, ALGORITHM)
    return comm


def made(comm, how, i):
    if how == "dup":
        return comm.dup(), comm.dup()
    if how == "split":
        return comm.split(0, -comm.rank), comm.split(i % 2, comm.rank)
    first, second = (comm.idup(), comm.idup())
    return first.wait(), second.wait()


def cycle(comm, how, i, wrong):
    p, r = comm.size, comm.rank
    a, b = (native(c) for c in made(comm, how, i))
    x = np.arange(4, dtype=np.float64) + r + i
    want_sum = sum(np.arange(4, dtype=np.float64) + k + i for k in range(p))
    root = i % b.size
    y = np.full(3, float(i + b.rank), dtype=np.float64)
    want_b = np.full(3, float(i + root))
    if r % 2 == 0:
        ra, rb = a.iallreduce(x), b.ibcast(y, root=root)
        got_a, got_b = ra.wait(), rb.wait()
    else:
        rb, ra = b.ibcast(y, root=root), a.iallreduce(x)
        got_b, got_a = rb.wait(), ra.wait()
    if not np.array_equal(got_a, want_sum):
        wrong.append([how, i, "iallreduce", got_a.tolist()])
    if not np.array_equal(got_b, want_b):
        wrong.append([how, i, "ibcast", got_b.tolist()])
    pending = a.iallreduce(x)
    c = native(comm.dup())
    got_c = c.allgather(np.array([r + i], dtype=np.int64))
    if not np.array_equal(got_c, np.arange(p) + i):
        wrong.append([how, i, "allgather", got_c.tolist()])
    if not np.array_equal(pending.wait(), want_sum):
        wrong.append([how, i, "iallreduce in flight"])
    for d in (a, b, c):
        d.free()


def late(comm):
    import time
    a = native(comm.dup())
    error = [None, ""]
    if comm.rank == 0:
        try:
            a.iallreduce(np.ones(2), timeout=1.0).wait()
        except collops.CollopsError as exc:
            error = [type(exc).__name__, str(exc)]
    else:
        time.sleep(1.5)
    a.timeout = 1.0
    a.free()
    b = native(comm.dup())
    after = b.iallreduce(np.ones(2)).wait().tolist() == [comm.size] * 2
    b.free()
    print(json.dumps({"rank": comm.rank, "error": error, "after": after}), flush=True)


def idups(comm, cycles):
    """``idup`` on three communicators, begun and waited in an order of each rank's own
    (seeded by the rank), then on each new one: a non-blocking call before any blocking one
    (its board not made yet: the agreement goes through the channel), a blocking one (which
    makes the board), a non-blocking one again; the results against numpy."""
    import random
    rng = random.Random(1000 + comm.rank)
    parents = [comm, comm.dup(), comm.dup()]
    p, wrong = comm.size, []
    want = np.arange(3.0) * p + p * (p - 1) / 2
    for i in range(cycles):
        order = [0, 1, 2]
        rng.shuffle(order)
        requests = {k: parents[k].idup() for k in order}
        rng.shuffle(order)
        kids = {k: requests[k].wait() for k in order}
        if len({kid.context for kid in kids.values()}) != 3:
            wrong.append([i, "contexts", [kid.context for kid in kids.values()]])
        for k in range(3):
            kid = native(kids[k])
            x = np.arange(3.0) + comm.rank
            key = (tuple(kid._group), kid.context)
            due = [kid.transport.due(*key), key in kid.transport._boards]
            got = [kid.iallreduce(x).wait(), kid.allreduce(x)]
            due += [kid.transport.due(*key), key in kid.transport._boards]
            got.append(kid.iallreduce(x).wait())
            if not all(np.array_equal(g, want) for g in got):
                wrong.append([i, k, [g.tolist() for g in got]])
            if due != [True, False, False, True]:  # its board made at the first blocking call
                wrong.append([i, k, "due", due])  # (None across nodes)
            kid.free()
    for parent in parents[1:]:
        parent.free()
    return wrong


def stalled(comm):
    """A blocking first call rank 1 makes 1.5 s late (run with ``COLLOPS_STALL_REPORT=0.5``:
    rank 0's report says what it waits for)."""
    import time
    a = native(comm.dup())
    if comm.rank == 1:
        time.sleep(1.5)
    right = a.allreduce(np.ones(2)).tolist() == [comm.size] * 2
    a.free()
    print(json.dumps({"rank": comm.rank, "right": right}), flush=True)


def idup_given_up(comm):
    """A failed ``idup`` (`scenarios.failed_idup`, a 1-second limit): no MPI request of it
    left watched (a finished one would end every later wait of the transport at once) but
    those of the pool its agreement's first call began, still in flight. Prints ``{"rank": r,
    "error": type, "watched": n, "pool": n}``."""
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from tests.comms import scenarios
    error, d = scenarios.failed_idup(comm, 1.0)
    pool = comm.transport._making_pools.get((tuple(d._group), d.context))
    pool_requests = [] if pool is None else pool.requests
    watched = [r for r, _ in comm.transport._watched
               if not any(r is q for q in pool_requests)]
    print(json.dumps({"rank": comm.rank, "error": error, "watched": len(watched),
                      "pool": len(pool_requests)}), flush=True)


def main():
    comm = collops.init()
    if sys.argv[1] == "idup_given_up":
        idup_given_up(comm)
        return
    if sys.argv[1] == "late":
        late(comm)
        return
    if sys.argv[1] == "stalled":
        stalled(comm)
        return
    if sys.argv[1] == "idups":
        wrong = idups(comm, int(sys.argv[2]))
        print(json.dumps({"rank": comm.rank, "wrong": wrong,
                          "pools": len(comm.transport._pools)}), flush=True)
        return
    cycles = int(sys.argv[1])
    wrong = []
    for i in range(cycles):
        for how in ("dup", "idup", "split"):
            cycle(comm, how, i, wrong)
    print(json.dumps({"rank": comm.rank, "cycles": cycles, "wrong": wrong,
                      "pools": len(comm.transport._pools)}), flush=True)


if __name__ == "__main__":
    main()
