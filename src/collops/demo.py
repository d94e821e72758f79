"""``collops demo``: every collective, the seeds' algorithms first, verified against numpy.

Each rank can rebuild every rank's input (they are seeded by rank), so each checks its own
result against numpy's answer computed locally, and rank 0 prints one row per call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .runtime import Comm, spawn

#: (collective, algorithm or None for automatic selection, what the row demonstrates)
PLAN: list[tuple[str, str | None, str]] = [
    ("allgather", "alltoallv", "seed 000: allgather as one alltoallv, one segment"),
    ("allgatherv", "alltoallv", "seed 000: allgatherv the same way, uneven counts"),
    ("alltoallv", "random_chunked", "seed 000: random order, chunks, pruning"),
    ("alltoall", "random_chunked", "seed 000 on equal counts"),
    ("gather", "or_combine", "seed 002: gather as a bitwise-OR reduction"),
    ("reduce", "nary_tree", "n-ary tree reduction"),
    ("barrier", None, ""), ("bcast", None, ""), ("scatter", None, ""), ("scatterv", None, ""),
    ("gatherv", None, ""), ("allreduce", None, ""), ("reduce_scatter", None, ""),
    ("reduce_scatter_block", None, ""), ("scan", None, ""), ("exscan", None, ""),
]


def _input(rank: int, count: int) -> np.ndarray:
    return np.random.default_rng(rank).integers(-1000, 1000, count).astype(np.float64)


def _vcount(rank: int, count: int) -> int:
    return count // 2 + (rank * 37) % (count // 2 + 1)


def _one(comm: Comm, collective: str, algorithm: str | None, count: int) -> tuple[Any, Any, int]:
    """Perform one call; returns (result, expected, bytes per rank)."""
    p, r = comm.size, comm.rank
    kw: dict[str, Any] = {"algorithm": algorithm} if algorithm else {}
    xs = [_input(i, count) for i in range(p)]
    x = xs[r]
    nbytes = x.nbytes
    if collective == "barrier":
        comm.barrier(**kw)
        return 0, 0, 0
    if collective == "bcast":
        return comm.bcast(x if r == 0 else None, **kw), xs[0], nbytes
    if collective == "scatter":
        whole = np.concatenate(xs)
        return comm.scatter(whole if r == 0 else None, **kw), xs[r], nbytes
    if collective == "scatterv":
        counts = [_vcount(i, count) for i in range(p)]
        whole = np.concatenate([xs[i][: counts[i]] for i in range(p)])
        got = comm.scatterv(whole if r == 0 else None, counts if r == 0 else None, **kw)
        return got, xs[r][: counts[r]], nbytes
    if collective in ("gather", "gatherv"):
        counts = [count if collective == "gather" else _vcount(i, count) for i in range(p)]
        mine = x[: counts[r]]
        got = getattr(comm, collective)(mine, 0, **kw)
        want = np.concatenate([xs[i][: counts[i]] for i in range(p)]) if r == 0 else None
        return got, want, mine.nbytes
    if collective in ("allgather", "allgatherv"):
        counts = [count if collective == "allgather" else _vcount(i, count) for i in range(p)]
        got = getattr(comm, collective)(x[: counts[r]], **kw)
        return got, np.concatenate([xs[i][: counts[i]] for i in range(p)]), nbytes
    if collective == "alltoall":
        use = x[: count - count % p]
        want = np.concatenate([xs[j][: count - count % p].reshape(p, -1)[r] for j in range(p)])
        return comm.alltoall(use, **kw), want, use.nbytes
    if collective == "alltoallv":
        def counts_of(src: int) -> list[int]:
            return [(src + 2 * j) % 5 * (count // (5 * p) + 1) for j in range(p)]
        sc = counts_of(r)
        data = np.resize(x, sum(sc))
        rc = [counts_of(j)[r] for j in range(p)]
        parts = []
        for j in range(p):
            cj = counts_of(j)
            src = np.resize(xs[j], sum(cj))
            parts.append(src[sum(cj[:r]): sum(cj[:r]) + cj[r]])
        return comm.alltoallv(data, sc, recvcounts=rc, **kw), np.concatenate(parts), data.nbytes
    total = np.sum(xs, axis=0)
    if collective == "reduce":
        return comm.reduce(x, "sum", 0, **kw), total if r == 0 else None, nbytes
    if collective == "allreduce":
        return comm.allreduce(x, "sum", **kw), total, nbytes
    if collective in ("reduce_scatter", "reduce_scatter_block"):
        usable = count - count % p
        got = getattr(comm, collective)(np.stack(xs)[r, :usable], "sum", **kw)
        return got, total[:usable].reshape(p, -1)[r], usable * 8
    if collective == "scan":
        return comm.scan(x, "sum", **kw), np.sum(xs[: r + 1], axis=0), nbytes
    if collective == "exscan":
        want = np.sum(xs[:r], axis=0) if r else None
        return comm.exscan(x, "sum", **kw), want, nbytes
    raise ValueError(collective)


def rank_report(comm: Comm, count: int) -> list[tuple[str, str, int, int, bool, float]]:
    """Run every call of the plan on this rank; rank 0 gets the table rows."""
    rows = []
    for collective, algorithm, _ in PLAN:
        comm.barrier()
        start = time.perf_counter()
        got, want, nbytes = _one(comm, collective, algorithm, count)
        elapsed = time.perf_counter() - start
        used = comm.last_algorithm or "-"
        ok = _same(got, want)
        oks = comm.allgather_object((ok, elapsed))
        if comm.rank == 0:
            rows.append((collective, used, comm.size, nbytes,
                         all(o for o, _ in oks), max(t for _, t in oks)))
    return rows


def _same(got: Any, want: Any) -> bool:
    if want is None or got is None:
        return want is None and got is None
    return bool(np.array_equal(np.asarray(got).reshape(-1), np.asarray(want).reshape(-1)))


def print_report(rows: list[tuple[str, str, int, int, bool, float]], nprocs: int,
                 transport: str, count: int, out: Callable[[str], None] = print) -> bool:
    """Print the demo's table; True when every result equals numpy's."""
    out(f"collops demo: {nprocs} ranks over '{transport}', {count} float64 per rank\n")
    out(f"{'collective':<22}{'algorithm':<20}{'ranks':>6}{'bytes':>10}  {'verified':<9}"
        f"{'time':>10}")
    for collective, algorithm, p, nbytes, ok, t in rows:
        out(f"{collective:<22}{algorithm:<20}{p:>6}{nbytes:>10}  {'yes' if ok else 'NO':<9}"
            f"{t * 1e3:>8.2f}ms")
    good = all(r[4] for r in rows)
    out("\nall results equal numpy's" if good else "\nSOME RESULTS DIFFER FROM NUMPY")
    return good


def program_main(comm: Comm, count: int = 1000) -> int:
    """The demo as a program's main (``collops run -n 4 examples/collectives.py``)."""
    rows = rank_report(comm, count)
    good = print_report(rows, comm.size, comm.transport_name, count) if comm.rank == 0 else True
    return 0 if comm.bcast_object(good) else 1


def run_demo(nprocs: int = 4, transport: str = "inproc", count: int = 1000,
             out: Callable[[str], None] = print) -> int:
    """Run the demo on ``nprocs`` ranks in this process and print the table; 0 when verified."""
    results = spawn(rank_report, nprocs, count, transport=transport, timeout=300)
    return 0 if print_report(results[0], nprocs, transport, count, out) else 1
