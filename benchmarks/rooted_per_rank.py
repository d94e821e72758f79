"""Per-rank mean and median µs of 2-rank large bcast and scatter in `collops bench`'s call shape.

Usage: collops run -n 2 python benchmarks/rooted_per_rank.py   (the pre-redesign tree's
       `collops run` takes the script without ``python``)

Each rank times 600 calls at 1 MiB (200 at 4 MiB) after 50 warm-up calls, each after an
untimed barrier, in `collops.bench.measure.collops_call`'s shape (a bcast root in place,
every rank passing its own array; a scatter's non-roots passing None, ``out=`` given), and
rank 0 prints each rank's mean and median: who waits for whom shows, which the bench's mean
over ranks hides.
"""

import statistics
import time

import numpy as np

import collops

comm = collops.init()
r, p = comm.rank, comm.size
out = []
for coll in ("bcast", "scatter"):
    for size in (1 << 20, 4 << 20):
        cnt = size // 8
        send = np.full(cnt, float(r + 1))
        recv = np.empty(cnt if coll == "bcast" else cnt // p)
        if coll == "bcast":
            def f(send=send, recv=recv):
                return comm.bcast(send, 0, out=send if r == 0 else recv)
        else:
            def f(send=send, recv=recv):
                return comm.scatter(send if r == 0 else None, 0, out=recv)
        n = 600 if size == 1 << 20 else 200
        ts = []
        for _ in range(n + 50):
            comm.barrier()
            t = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t)
        ts = ts[50:]
        out.append((coll, size >> 20, statistics.mean(ts) * 1e6, statistics.median(ts) * 1e6))
every = comm.gather_object(out, 0)
if r == 0:
    for i, (c, s, _, _) in enumerate(out):
        print(f"{c}-{s}M", " ".join(f"r{k}: mean {a[i][2]:.1f} med {a[i][3]:.1f}"
                                    for k, a in enumerate(every)), flush=True)
