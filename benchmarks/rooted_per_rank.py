"""Per-rank mean and median µs of rooted calls in `collops bench`'s call shape.

Usage: collops run -n N python benchmarks/rooted_per_rank.py [--collectives bcast,scatter]
       [--sizes 1M,4M] [--calls 600]   (the pre-redesign tree's `collops run` takes the
       script without ``python``)

Each rank times ``--calls`` calls of each collective and size (a third as many from 4 MiB on)
after 50 warm-up calls, each after an untimed barrier, in
`collops.bench.measure.collops_call`'s shape (a bcast root in place, every rank passing its
own array; a scatter's non-roots passing None, a gather's or reduce's non-roots no ``out=``,
``out=`` given elsewhere), and rank 0 prints each rank's mean and median: who waits for whom
shows, which the bench's mean over ranks hides.
"""

import argparse
import statistics
import time

import numpy as np

import collops
from collops.bench.cli import parse_size

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--collectives", default="bcast,scatter")
parser.add_argument("--sizes", default="1M,4M")
parser.add_argument("--calls", type=int, default=600)
args = parser.parse_args()

comm = collops.init()
r, p = comm.rank, comm.size


def call_of(coll: str, size: int):
    """The timed call of ``coll`` with ``size`` bytes per rank."""
    cnt = max(1, size // 8)
    send = np.full(cnt * (p if coll == "scatter" else 1), float(r + 1))
    recv = np.empty(cnt * (p if coll == "gather" else 1))
    if coll == "bcast":
        return lambda: comm.bcast(send, 0, out=send if r == 0 else recv)
    if coll == "scatter":
        return lambda: comm.scatter(send if r == 0 else None, 0, out=recv)
    if coll == "gather":
        return lambda: comm.gather(send, 0, out=recv if r == 0 else None)
    return lambda: comm.reduce(send, root=0, out=recv if r == 0 else None)


out = []
for coll in args.collectives.split(","):
    for size in map(parse_size, args.sizes.split(",")):
        f = call_of(coll, size)
        n = args.calls if size < 4 << 20 else max(1, args.calls // 3)
        ts = []
        for _ in range(n + 50):
            comm.barrier()
            t = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t)
        ts = ts[50:]
        out.append((coll, size, statistics.mean(ts) * 1e6, statistics.median(ts) * 1e6))
every = comm.gather_object(out, 0)
if r == 0:
    for i, (c, s, _, _) in enumerate(out):
        print(f"{c}-{s}B", " ".join(f"r{k}: mean {a[i][2]:.2f} med {a[i][3]:.2f}"
                                    for k, a in enumerate(every)), flush=True)
