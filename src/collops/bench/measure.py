"""Measuring one collective the way the OSU micro-benchmarks do, and the bandwidth figures.

Each iteration is timed on its own, with an untimed barrier before it, after a few warm-up
iterations. A rank's latency is the mean of its iterations; the reported ``avg``, ``min`` and
``max`` are over ranks.

``size`` is the bytes each rank contributes: its send buffer (for ``alltoall`` the whole
buffer, for ``allgather`` its own block, for ``reduce_scatter`` its whole input vector).
Algorithm bandwidth is ``S / t`` with ``S`` as nccl-tests defines it (the total bytes a rank
receives for allgather, the buffer size otherwise); bus bandwidth is ``algbw × factor``:
``2(n−1)/n`` for allreduce, ``(n−1)/n`` for allgather, alltoall and reduce_scatter, ``1`` for
bcast, reduce, gather and scatter — so figures compare across sizes and rank counts.

The same functions drive both sides: `collops_call` (and ``mpi_worker.mpi_call``) wrap a
collops call (an mpi4py call) on preallocated numpy buffers, so neither side pays for
allocation inside the timed region.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

#: array collectives (each row one size), their v-forms with counts given, and the object
#: forms (one row: a small object, as mpi4py's lowercase methods are mostly called with)
ARRAYS = ("barrier", "bcast", "allreduce", "reduce", "allgather", "alltoall", "gather",
          "scatter", "reduce_scatter", "scan", "exscan")
VECTORS = ("allgatherv", "gatherv", "scatterv", "alltoallv")
OBJECTS = ("allreduce_object", "reduce_object", "bcast_object", "gather_object",
           "allgather_object", "scatter_object", "alltoall_object", "scan_object",
           "exscan_object")  # their arguments: `OBJECT_CALLS`
#: point-to-point rows: ``pingpong`` between ranks 0 and 1 (latency = half a round trip)
POINT_TO_POINT = ("pingpong",)
COLLECTIVES = ARRAYS + VECTORS + OBJECTS + POINT_TO_POINT

#: the registry's name of a benchmarked collective, where the two differ
REGISTRY_NAME = {"reduce_scatter": "reduce_scatter_block"}

#: nccl-tests' bus-bandwidth factors, as functions of the number of ranks
BUS_FACTOR: dict[str, Callable[[int], float]] = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
}


def bus_bandwidth_factor(collective: str, n: int) -> float:
    """nccl-tests' factor turning algorithm bandwidth into bus bandwidth."""
    return BUS_FACTOR.get(collective, lambda _n: 1.0)(n)


def data_size(collective: str, size: int, n: int) -> int:
    """nccl-tests' ``S`` for a call where each rank contributes ``size`` bytes."""
    return size * n if collective in ("allgather", "allgatherv") else size


@dataclass(frozen=True)
class Record:
    """One measurement: a (collective, algorithm, nprocs, size) row of the JSON report."""

    collective: str
    algorithm: str
    nprocs: int
    size: int
    latency_us: float
    min_us: float
    max_us: float
    algbw_GBps: float
    busbw_GBps: float
    mpi_latency_us: float | None = None
    ratio: float | None = None
    #: what collops ran over: "shm", "inproc" or "mpi"
    transport: str | None = None
    #: Open MPI's latency for the same row (``--compare openmpi``) and collops' time over it
    openmpi_latency_us: float | None = None
    openmpi_ratio: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object (None fields kept as null)."""
        return asdict(self)


def pingpong_rounds(size: int) -> int:
    """Round trips one timed ping-pong iteration makes (OSU's latency test times a loop of
    them, so a barrier's skew does not weigh on a few microseconds)."""
    return 50 if size <= 8192 else (5 if size <= 1 << 20 else 2)


def time_scale(collective: str, size: int) -> float:
    """What one timed call is of the reported latency: a ping-pong iteration makes
    `pingpong_rounds` round trips, each two one-way latencies."""
    return 1.0 / (2 * pingpong_rounds(size)) if collective == "pingpong" else 1.0


def pingpong(rank: int, rounds: int, send: Callable[[], Any],
             recv: Callable[[], Any]) -> Callable[[], Any]:
    """One timed ping-pong iteration between ranks 0 and 1 (other ranks do nothing)."""
    if rank > 1:
        return lambda: None
    first, then = (send, recv) if rank == 0 else (recv, send)

    def rounds_of_two() -> None:
        for _ in range(rounds):
            first()
            then()
    return rounds_of_two


def element_count(collective: str, size: int, n: int) -> int:
    """float64 elements each rank's send buffer holds for ``size`` bytes (rounded).

    Collectives that split the buffer among the ranks get at least one element per rank, so
    an 8-byte row moves 8 bytes to each peer rather than nothing.
    """
    count = max(size // 8, 0)
    if collective in ("alltoall", "reduce_scatter", "scatter", "scatterv", "alltoallv"):
        count = max(count // n, 1 if size else 0) * n
    return count


#: the alignment of the buffers `buffers` gives
PAGE = 4096


def page_aligned(count: int) -> np.ndarray:
    """``count`` float64 elements starting on a page boundary, as OSU's benchmarks align
    theirs: where the allocator happened to put a row's buffers (heap or mmap, at page offsets
    that differ between runs and programs) then decides nothing of the row's time."""
    raw = np.empty(count + PAGE // 8, np.float64)
    skip = (-raw.ctypes.data % PAGE) // 8
    return raw[skip: skip + count]


def buffers(collective: str, size: int, n: int, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """Preallocated, page-aligned (send, receive) float64 buffers for one collective call
    (the same for collops and for MPI's worker)."""
    count = element_count(collective, size, n)
    send = page_aligned(count)
    send[...] = float(rank + 1)
    if collective in ("allgather", "allgatherv"):
        recv = page_aligned(count * n)
    elif collective in ("gather", "gatherv"):
        recv = page_aligned(count * n if rank == 0 else 0)
    elif collective in ("scatter", "reduce_scatter", "scatterv"):
        recv = page_aligned(count // n if n else 0)
    else:
        recv = page_aligned(count)
    return send, recv


def time_iterations(call: Callable[[], Any], barrier: Callable[[], Any], iterations: int,
                    warmup: int) -> float:
    """Mean seconds of ``call`` over ``iterations``, each after an untimed barrier."""
    for _ in range(warmup):
        barrier()
        call()
    total = 0.0
    clock = time.perf_counter
    for _ in range(iterations):
        barrier()
        start = clock()
        call()
        total += clock() - start
    return total / max(iterations, 1)


def time_row(call: Callable[[], Any], barrier: Callable[[], Any], size: int,
             requested: int | None) -> float:
    """Mean seconds of ``call`` at ``size`` bytes, OSU's iteration and warm-up counts."""
    n_iter = iterations_for(size, requested)
    return time_iterations(call, barrier, n_iter, max(10, n_iter // 10))


def row_sizes(collective: str, sizes: list[int]) -> list[int]:
    """The sizes measured for ``collective`` (barrier moves no data and an object form moves
    one small object: one row, size 0)."""
    return [0] if collective == "barrier" or collective in OBJECTS else sizes


def iterations_for(size: int, requested: int | None) -> int:
    """Iterations for a size (fewer for large messages, as OSU does)."""
    if requested:
        return requested
    return 1000 if size <= 8192 else (200 if size <= 1 << 20 else 20)


def collops_call(comm: Any, collective: str, send: np.ndarray, recv: np.ndarray,
                 algorithm: str | None) -> Callable[[], Any]:
    """A zero-argument closure performing one collops call into ``recv``, naming
    ``algorithm`` (None: the selection's) as a keyword of its own: an ``**`` unpacking in
    every call cost collops 0.1-0.2 µs a call that MPI's call did not pay."""
    c = collective
    if c == "barrier":  # the method itself, as the MPI side times ``comm.Barrier``
        return comm.barrier if not algorithm else lambda: comm.barrier(algorithm=algorithm)
    if c == "bcast":  # in place at the root, as MPI_Bcast and OSU's benchmark are
        return lambda: comm.bcast(send, 0, out=send if comm.rank == 0 else recv,
                                  algorithm=algorithm)
    if c == "allreduce":
        return lambda: comm.allreduce(send, "sum", out=recv, algorithm=algorithm)
    if c == "reduce":
        return lambda: comm.reduce(send, "sum", 0, out=recv if comm.rank == 0 else None,
                                   algorithm=algorithm)
    if c == "allgather":
        return lambda: comm.allgather(send, out=recv, algorithm=algorithm)
    if c == "alltoall":
        return lambda: comm.alltoall(send, out=recv, algorithm=algorithm)
    if c == "gather":
        return lambda: comm.gather(send, 0, out=recv if comm.rank == 0 else None,
                                   algorithm=algorithm)
    if c == "scatter":
        return lambda: comm.scatter(send if comm.rank == 0 else None, 0, out=recv,
                                    algorithm=algorithm)
    if c == "reduce_scatter":
        return lambda: comm.reduce_scatter_block(send, "sum", out=recv, algorithm=algorithm)
    if c == "scan":
        return lambda: comm.scan(send, "sum", out=recv, algorithm=algorithm)
    if c == "exscan":
        return lambda: comm.exscan(send, "sum", out=recv, algorithm=algorithm)
    if c in VECTORS:
        return _vector_call(comm, c, send, recv, algorithm)
    if c in OBJECTS:
        return object_call(comm, c)
    if c == "pingpong":
        peer = 1 - comm.rank if comm.rank < 2 else 0
        return pingpong(comm.rank, pingpong_rounds(send.nbytes),
                        lambda: comm.send(send, peer), lambda: comm.recv(recv, source=peer))
    raise ValueError(f"no benchmark for {collective!r}")


def _vector_call(comm: Any, c: str, send: np.ndarray, recv: np.ndarray,
                 algorithm: str | None) -> Callable[[], Any]:
    """A v-collective with its counts given (nothing exchanged first), as MPI's are."""
    p = comm.size
    if c == "allgatherv":
        return lambda: comm.allgatherv(send, [len(send)] * p, out=recv, algorithm=algorithm)
    if c == "gatherv":
        return lambda: comm.gatherv(send, 0, [len(send)] * p,
                                    out=recv if comm.rank == 0 else None, algorithm=algorithm)
    if c == "scatterv":
        return lambda: comm.scatterv(send if comm.rank == 0 else None, [len(recv)] * p, 0,
                                     out=recv, algorithm=algorithm)
    block = len(send) // p
    return lambda: comm.alltoallv(send, [block] * p, recvcounts=[block] * p, out=recv,
                                  algorithm=algorithm)


#: each object form: mpi4py's lowercase method doing the same, and the arguments both take on
#: rank ``r`` of ``p`` (small objects, as such calls mostly carry)
OBJECT_CALLS: dict[str, tuple[str, Callable[[int, int], tuple[Any, ...]]]] = {
    "allreduce_object": ("allreduce", lambda r, p: (1,)),
    "reduce_object": ("reduce", lambda r, p: (1, operator.add, 0)),
    "bcast_object": ("bcast", lambda r, p: ({"a": 1} if r == 0 else None, 0)),
    "gather_object": ("gather", lambda r, p: (r, 0)),
    "allgather_object": ("allgather", lambda r, p: (r,)),
    "scatter_object": ("scatter", lambda r, p: (list(range(p)) if r == 0 else None, 0)),
    "alltoall_object": ("alltoall", lambda r, p: (list(range(p)),)),
    "scan_object": ("scan", lambda r, p: (1,)),
    "exscan_object": ("exscan", lambda r, p: (1,)),
}


def object_call(comm: Any, c: str, method: str | None = None) -> Callable[[], Any]:
    """A zero-argument closure calling object form ``c`` (or, given, the communicator's
    ``method`` — mpi4py's counterpart) with `OBJECT_CALLS`' arguments."""
    call = getattr(comm, method or c)
    args = OBJECT_CALLS[c][1](comm.rank, comm.size)
    return lambda: call(*args)


def measure_collops(comm: Any, collectives: list[str], sizes: list[int],
                    algorithm: str | None, iterations: int | None) -> list[dict[str, Any]]:
    """Run the benchmark on this rank; rank 0 returns the rows (mean latency per rank)."""
    rows = []
    for collective in collectives:
        for size in row_sizes(collective, sizes):
            send, recv = buffers(collective, size, comm.size, comm.rank)
            call = collops_call(comm, collective, send, recv, algorithm)
            mean = (time_row(call, comm.barrier, size, iterations)
                    * time_scale(collective, send.nbytes))
            used = comm.last_algorithm if collective != "barrier" else (algorithm or "auto")
            if collective in POINT_TO_POINT:
                used = "p2p"
            if collective == "barrier":
                comm.barrier(**({"algorithm": algorithm} if algorithm else {}))
                used = comm.last_algorithm
            means = comm.allgather(np.array([mean]))
            rows.append({"collective": collective, "algorithm": used, "size": size,
                         "means": means.tolist()})
    return rows


def summarise(row: dict[str, Any], nprocs: int, mpi_means: list[float] | None,
              transport: str | None = None,
              openmpi_means: list[float] | None = None) -> Record:
    """A `Record` from per-rank mean latencies (and MPI's, when compared)."""
    means = row["means"]
    avg = float(np.mean(means))
    s = data_size(row["collective"], row["size"], nprocs)
    algbw = s / avg / 1e9 if avg > 0 and s else 0.0
    busbw = algbw * bus_bandwidth_factor(row["collective"], nprocs)
    mpi = float(np.mean(mpi_means)) if mpi_means else None
    ompi = float(np.mean(openmpi_means)) if openmpi_means else None
    return Record(row["collective"], row["algorithm"], nprocs, row["size"], avg * 1e6,
                  min(means) * 1e6, max(means) * 1e6, algbw, busbw,
                  None if mpi is None else mpi * 1e6,
                  None if mpi is None or mpi == 0 else avg / mpi, transport,
                  None if ompi is None else ompi * 1e6,
                  None if ompi is None or ompi == 0 else avg / ompi)
