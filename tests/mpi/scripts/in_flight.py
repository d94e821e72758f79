"""Many non-blocking collectives in flight at once, waited in every order, under mpiexec.

``python in_flight.py ALGORITHM SEED``: each round starts a mix of non-blocking collectives
on one communicator — large and small broadcasts (an envelope phase, then the data), gathers
and alltoalls whose counts are exchanged first, reductions, a scan, a barrier: more calls than
the MPI transport has MPI communicators per collops one — and then waits for them last-first,
in a random order that differs between ranks, or by polling ``test()`` in a random order —
after a blocking call made while they are all in flight. With
ALGORITHM ``mpi_native`` every call is MPI's own collective; ``auto`` lets selection choose;
``mixed`` alternates MPI's own with collops schedules, so a call may run a schedule phase
before MPI's own. Every result is checked against numpy on every rank; each call has a 20 s
timeout, so a deadlock shows as `CollectiveTimeout`, not a hang.

Each rank prints ``{"rank": r, "checked": n, "calls": k, "failures": [...]}`` or
``{"rank": r, "error": "...", "message": "..."}``.
"""

import json
import random
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import collops  # noqa: E402

TIMEOUT = 20.0
BIG = 20_000  # float64 items of a large broadcast: the data goes in a phase of its own


def data(rank, i, n, dtype=np.float64):
    """What rank ``rank`` contributes to call ``i`` (every rank can compute every rank's)."""
    return (np.arange(n) % 97 + 1000 * rank + 7 * i).astype(dtype)


def calls(comm, round_no, algorithm):
    """[(name, request, expected)] for one round, started in the same order on every rank."""
    me, p = comm.rank, comm.size
    out = []

    def alg(i, schedule):
        if algorithm == "auto":
            return {}
        if algorithm == "mpi_native" or i % 2 == 0:
            return {"algorithm": "mpi_native"}
        return {"algorithm": schedule}

    for k in range(2):
        i = 10 * k + 100 * round_no
        root = (i // 10) % p
        x = data(root, i, BIG)
        out.append((f"bcast big #{i}", comm.ibcast(x if me == root else None, root,
                                                   timeout=TIMEOUT, **alg(k, "binomial")), x))
        i += 1
        x = data(root, i, 3, np.int32)
        out.append((f"bcast small #{i}", comm.ibcast(x if me == root else None, root,
                                                     timeout=TIMEOUT, **alg(k + 1, "linear")), x))
        i += 1
        total = sum(data(r, i, 5000) for r in range(p))
        out.append((f"allreduce #{i}", comm.iallreduce(data(me, i, 5000), timeout=TIMEOUT,
                                                       **alg(k, "ring")), total))
        i += 1
        counts = [r + 1 + k for r in range(p)]
        whole = np.concatenate([data(r, i, counts[r]) for r in range(p)])
        got = comm.igatherv(data(me, i, counts[me]), root=root, timeout=TIMEOUT,
                            **alg(k + 1, "binomial"))
        out.append((f"gatherv #{i}", got, whole if me == root else None))
        i += 1
        counts = [2 * r + k for r in range(p)]
        whole = data(root, i, sum(counts))
        start = sum(counts[:me])
        out.append((f"scatterv #{i}", comm.iscatterv(whole if me == root else None, counts, root,
                                                     timeout=TIMEOUT, **alg(k, "linear")),
                    whole[start: start + counts[me]]))
        i += 1
        send = [(s + 2 * d + k) % 4 + 1 for s in range(p) for d in range(p)]  # s -> d counts
        mine = send[me * p: (me + 1) * p]
        x = data(me, i, sum(mine))
        parts = []
        for s in range(p):
            theirs = send[s * p: (s + 1) * p]
            offset = sum(theirs[:me])
            parts.append(data(s, i, sum(theirs))[offset: offset + theirs[me]])
        out.append((f"alltoallv #{i}", comm.ialltoallv(x, mine, timeout=TIMEOUT,
                                                       **alg(k + 1, "pairwise")),
                    np.concatenate(parts)))
        i += 1
        total = sum(data(r, i, 3000) for r in range(p))
        out.append((f"reduce #{i}", comm.ireduce(data(me, i, 3000), root=root, timeout=TIMEOUT,
                                                 **alg(k, "binomial")),
                    total if me == root else None))
        i += 1
        out.append((f"scan #{i}", comm.iscan(data(me, i, 100), timeout=TIMEOUT,
                                             **alg(k + 1, "linear")),
                    sum(data(r, i, 100) for r in range(me + 1))))
        i += 1
        out.append((f"allgather #{i}", comm.iallgather(data(me, i, 700), timeout=TIMEOUT,
                                                       **alg(k, "ring")),
                    np.concatenate([data(r, i, 700) for r in range(p)])))
        i += 1
        out.append((f"barrier #{i}", comm.ibarrier(timeout=TIMEOUT, **alg(k + 1, "tree")),
                    None))
    return out


def check(name, got, expected, failures):
    if expected is None:
        if got is not None:
            failures.append(f"{name}: expected None, got {type(got).__name__}")
        return
    try:
        np.testing.assert_array_equal(np.asarray(got), expected)
    except AssertionError as exc:
        failures.append(f"{name}: {str(exc)[:300]}")


def main():
    algorithm, seed = sys.argv[1], int(sys.argv[2])
    comm = collops.init()
    me = comm.rank
    rng = random.Random(seed * 1000 + me)  # a different order on every rank
    failures, checked, started = [], 0, 0
    for round_no, order in enumerate(["reverse", "random", "test-random", "reverse"]):
        work = calls(comm, round_no, algorithm)
        started += len(work)
        # a blocking call while all of them are in flight (it shares an MPI communicator with
        # some, which it must drive to completion first)
        x = data(me, 50 + round_no, 1000)
        check(f"round {round_no} blocking allreduce",
              comm.allreduce(x, timeout=TIMEOUT, **({} if algorithm == "auto" else
                                                    {"algorithm": "mpi_native"})),
              sum(data(r, 50 + round_no, 1000) for r in range(comm.size)), failures)
        checked += 1
        indices = list(range(len(work)))
        if order == "reverse":
            indices.reverse()
        else:
            rng.shuffle(indices)
        if order == "test-random":
            left = indices
            while left:
                left = [i for i in left if not work[i][1].test()]
                rng.shuffle(left)
        for i in indices:
            name, request, expected = work[i]
            check(f"round {round_no} ({order}) {name}", request.wait(), expected, failures)
            checked += 1
    print(json.dumps({"rank": me, "checked": checked, "calls": started,
                      "failures": failures}), flush=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:  # reported, then the job ends normally for the test to read
        print(json.dumps({"rank": MPI.COMM_WORLD.rank, "error": type(exc).__name__,
                          "message": str(exc)[:2000], "traceback": traceback.format_exc()}),
              flush=True)
    MPI.COMM_WORLD.Barrier()
