"""What an 8-byte point-to-point message costs in CPU through ``collops.MPI``, apart from waiting.

Usage: collops run -n 2 --mpi4py benchmarks/p2p_call_costs.py [--rounds 300] [--burst 40]
           [--pingpong 20000] [--json FILE]

Rank 1 times a burst of ``--burst`` ``comm.Send`` calls while the ring has room (each completes
at once); then rank 0 times as many ``comm.Recv`` calls of messages that have all arrived. The
minimum over ``--rounds`` bursts of the time per call filters out the moments the process was
not running, so the figures hold on a loaded machine (scale them by the empty-loop time it
also prints: ~15 ns a loop iteration on an idle development VM). Then a ping-pong of
``--pingpong`` round trips: half a round trip, the best of five slices. Runs unchanged under
``mpiexec`` with mpi4py (MPICH's figures for the same calls).
"""

from __future__ import annotations

import argparse
import json
import time
import timeit

import numpy as np
from mpi4py import MPI


def bursts(comm: object, rounds: int, burst: int) -> tuple[float, float]:
    """Seconds per Send (on rank 1) and per Recv of an arrived message (on rank 0), minima."""
    rank = comm.Get_rank()  # type: ignore[attr-defined]
    x, out = np.ones(1), np.empty(1)
    sends: list[float] = []
    recvs: list[float] = []

    def timed(times: list[float], call: object, *args: object) -> None:
        start = time.perf_counter()
        for _ in range(burst):
            call(*args)  # type: ignore[operator]
        times.append((time.perf_counter() - start) / burst)

    for _ in range(rounds):
        comm.Barrier()  # type: ignore[attr-defined]
        if rank == 1:
            timed(sends, comm.Send, x, 0, 0)  # type: ignore[attr-defined]
        comm.Barrier()  # type: ignore[attr-defined]
        if rank == 0:
            timed(recvs, comm.Recv, out, 1, 0)  # type: ignore[attr-defined]
    send = comm.bcast(min(sends) if rank == 1 else None, root=1)  # type: ignore[attr-defined]
    return send, min(recvs) if rank == 0 else 0.0


def pingpong(comm: object, round_trips: int) -> float:
    """Seconds per half round trip of 8 bytes between ranks 0 and 1, best of five slices."""
    rank = comm.Get_rank()  # type: ignore[attr-defined]
    peer = 1 - rank
    x, out = np.ones(1), np.empty(1)

    def loop(k: int) -> None:
        for _ in range(k):
            if rank == 0:
                comm.Send(x, peer, 0)  # type: ignore[attr-defined]
                comm.Recv(out, peer, 0)  # type: ignore[attr-defined]
            else:
                comm.Recv(out, peer, 0)  # type: ignore[attr-defined]
                comm.Send(x, peer, 0)  # type: ignore[attr-defined]

    loop(1000)
    best = float("inf")
    for _ in range(5):
        comm.Barrier()  # type: ignore[attr-defined]
        start = time.perf_counter()
        loop(round_trips // 5)
        best = min(best, (time.perf_counter() - start) / (round_trips // 5) / 2)
    return best


def main() -> None:
    """Measure and print (rank 0), optionally into a JSON file."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--burst", type=int, default=40)
    parser.add_argument("--pingpong", type=int, default=20000)
    parser.add_argument("--json")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    send, recv = bursts(comm, args.rounds, args.burst)
    half = pingpong(comm, args.pingpong)
    if comm.Get_rank() == 0:
        loop_ns = min(timeit.repeat("for i in range(1000): pass", number=1000, repeat=5)) * 1e3
        found = {"library": MPI.Get_library_version().splitlines()[0]
                 if hasattr(MPI, "Get_library_version") else MPI.__name__,
                 "send_us": send * 1e6, "recv_arrived_us": recv * 1e6,
                 "pingpong_half_round_trip_us": half * 1e6, "empty_loop_ns": loop_ns}
        print(json.dumps(found, indent=1))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(found, f, indent=1)


if __name__ == "__main__":
    main()
