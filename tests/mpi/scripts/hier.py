"""``hier`` (node-local phases plus one among node leaders) against numpy, under mpiexec with
``COLLOPS_RANKS_PER_NODE`` splitting one machine's ranks into "nodes".

``python hier.py``: every rank runs allreduce (in place too), reduce and bcast from every
root, allgather, barrier and an allreduce with an operator that is not commutative, with
``algorithm="hier"``, blocking and non-blocking, at a few sizes, on the world and on a
sub-communicator of the even ranks, then the odd ones (whose nodes are not contiguous blocks
of its ranks), and checks each result against numpy and that ``hier`` ran it; then an
allreduce on each of 40 communicators made and freed in turn. Each rank prints
``{"rank": r, "nodes": [...], "checked": n, "ran": [...], "cycles": 40, "bound_hier": [calls
bound naming hier, whether any is the compiled mpi_native runner]}``.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import collops  # noqa: E402


def mine(rank, n, i):
    return (np.arange(n) % 11 + 10 * rank + i).astype(np.int64)


ran = set()
FIRST = collops.Op(lambda a, b: a.copy(), commutative=False)


def check(comm):
    me, p, checked = comm.rank, comm.size, 0
    kw = {"algorithm": "hier"}
    for n in (1, 5, 30_000):
        for i, blocking in enumerate((True, False)):
            def run(method, *args, blocking=blocking, **more):
                if blocking:
                    got = getattr(comm, method)(*args, **kw, **more)
                else:
                    got = getattr(comm, "i" + method)(*args, **kw, **more).wait()
                ran.add(comm.last_algorithm)
                return got
            everyone = [mine(r, n, i) for r in range(p)]
            x = everyone[me]
            assert np.array_equal(run("allreduce", x), sum(everyone))
            out = x.copy()
            run("allreduce", out, out=out)
            assert np.array_equal(out, sum(everyone))
            assert np.array_equal(run("allgather", x), np.concatenate(everyone))
            # associative, not commutative: rank order must be kept (the lowest rank's wins)
            assert np.array_equal(run("allreduce", x, op=FIRST), everyone[0])
            for root in range(p):
                got = run("reduce", x, root=root)
                assert np.array_equal(got, sum(everyone)) if me == root else got is None
                got = run("bcast", x if me == root else None, root)
                assert np.array_equal(got, everyone[root])
            run("barrier")
            checked += 5 + 2 * p
    return checked


def main():
    comm = collops.init()
    checked = check(comm)
    interleaved = comm.split(0, key=(comm.rank % 2) * comm.size + comm.rank)
    checked += check(interleaved)
    # communicators that come and go: each dup's pool of MPI communicators, and the node and
    # leader communicators ``hier`` made under it, are freed with it; a later dup's pool
    # (whose objects may take the freed ones' ids) gets its own
    cycles = 0
    for c in range(40):
        with comm.dup() as d:
            everyone = [mine(r, 3, c) for r in range(comm.size)]
            assert np.array_equal(d.allreduce(everyone[d.rank], algorithm="hier"),
                                  sum(everyone))
            cycles += 1
    # repeated blocking calls naming ``hier`` are bound to its runner, never to the
    # compiled one, which would call MPI's one collective instead of the phases
    routes = [comm.bound_route(c, "hier") for c in ("allreduce", "allgather", "reduce",
                                                      "bcast", "barrier")]
    bound = [route for route in routes if route is not None]
    compiled = [route == "compiled" for route in bound]
    print(json.dumps({"rank": comm.rank,
                      "nodes": list(comm.transport.capabilities().node_of_rank),
                      "checked": checked, "ran": sorted(ran), "cycles": cycles,
                      "bound_hier": [len(bound), any(compiled)]}), flush=True)
    MPI.COMM_WORLD.Barrier()


main()
