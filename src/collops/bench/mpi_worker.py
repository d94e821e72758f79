"""The MPI side of ``collops bench --compare mpi``: the same measurements with mpi4py.

`measure_mpi_collectives` times MPI's own collectives on an mpi4py communicator. ``collops
bench`` started without a launcher runs this module under ``mpiexec`` (it prints one JSON
document on rank 0); started by ``mpiexec`` itself, it calls the function in place, on the
job's own processes.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

import numpy as np

from .measure import (
    OBJECT_CALLS,
    OBJECTS,
    VECTORS,
    buffers,
    object_call,
    pingpong,
    pingpong_rounds,
    row_sizes,
    time_row,
    time_scale,
)


def mpi_call(comm: Any, mpi: Any, collective: str, send: np.ndarray,
             recv: np.ndarray) -> Callable[[], Any]:
    """A zero-argument closure performing the MPI library's own collective."""
    c = collective
    if c == "barrier":
        return comm.Barrier
    if c == "bcast":
        buf = send if comm.rank == 0 else recv
        return lambda: comm.Bcast(buf, 0)
    if c == "allreduce":
        return lambda: comm.Allreduce(send, recv, mpi.SUM)
    if c == "reduce":
        return lambda: comm.Reduce(send, recv if comm.rank == 0 else None, mpi.SUM, 0)
    if c == "allgather":
        return lambda: comm.Allgather(send, recv)
    if c == "alltoall":
        return lambda: comm.Alltoall(send, recv)
    if c == "gather":
        return lambda: comm.Gather(send, recv if comm.rank == 0 else None, 0)
    if c == "scatter":
        return lambda: comm.Scatter(send if comm.rank == 0 else None, recv, 0)
    if c == "reduce_scatter":
        return lambda: comm.Reduce_scatter_block(send, recv, mpi.SUM)
    if c == "scan":
        return lambda: comm.Scan(send, recv, mpi.SUM)
    if c == "exscan":
        return lambda: comm.Exscan(send, recv, mpi.SUM)
    if c in VECTORS:
        return _vector_call(comm, c, send, recv)
    if c in OBJECTS:
        return mpi_object_call(comm, c)
    if c == "pingpong":
        peer = 1 - comm.rank if comm.rank < 2 else 0
        return pingpong(comm.rank, pingpong_rounds(send.nbytes),
                        lambda: comm.Send(send, peer, 0), lambda: comm.Recv(recv, peer, 0))
    raise ValueError(c)


def _vector_call(comm: Any, c: str, send: np.ndarray, recv: np.ndarray) -> Callable[[], Any]:
    p = comm.size
    if c == "allgatherv":
        return lambda: comm.Allgatherv(send, [recv, [len(send)] * p])
    if c == "gatherv":
        return lambda: comm.Gatherv(send, [recv, [len(send)] * p] if comm.rank == 0 else None,
                                    0)
    if c == "scatterv":
        return lambda: comm.Scatterv([send, [len(recv)] * p] if comm.rank == 0 else None,
                                     recv, 0)
    block = len(send) // p
    return lambda: comm.Alltoallv([send, [block] * p], [recv, [block] * p])


def mpi_object_call(comm: Any, c: str) -> Callable[[], Any]:
    """mpi4py's lowercase (pickling) method for an object form, with the same objects."""
    return object_call(comm, c, OBJECT_CALLS[c][0])


def measure_mpi_collectives(comm: Any, mpi: Any, collectives: list[str], sizes: list[int],
                             iterations: int | None) -> list[dict[str, Any]]:
    """Time MPI's own collectives on ``comm``; rank 0 gets the rows (others: means None)."""
    rows = []
    for collective in collectives:
        for size in row_sizes(collective, sizes):
            send, recv = buffers(collective, size, comm.size, comm.rank)
            call = mpi_call(comm, mpi, collective, send, recv)
            mean = (time_row(call, comm.Barrier, size, iterations)
                    * time_scale(collective, send.nbytes))
            means = comm.gather(mean, 0)
            rows.append({"collective": collective, "size": size, "means": means})
    return rows


def main(argv: list[str] | None = None) -> None:
    """Measure under mpiexec and print the per-rank means as JSON on rank 0."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--collectives", required=True)
    parser.add_argument("--sizes", required=True)
    parser.add_argument("--iterations", type=int, default=0)
    args = parser.parse_args(argv)
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rows = measure_mpi_collectives(comm, MPI, args.collectives.split(","),
                                   [int(s) for s in args.sizes.split(",")],
                                   args.iterations or None)
    if comm.rank == 0:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
