"""What an 8-byte point-to-point message costs in CPU under ``mpiexec``: collops' own
``comm.send``/``comm.recv`` (MPI's point-to-point underneath) against mpi4py's ``Send``/``Recv``
in the same job.

Usage: mpiexec -n 2 python benchmarks/p2p_mpi_costs.py [--rounds 300] [--burst 40]
           [--pingpong 20000] [--profile] [--json FILE]

As `p2p_call_costs.py`: rank 1 times a burst of sends (each completes at once), then rank 0
times as many receives of messages that have all arrived; the minimum over ``--rounds``
bursts of the time per call filters out the moments a process was not running. Then a
ping-pong, half a round trip, the best of five slices. ``--profile`` prints rank 0's profile
of collops' receives and rank 1's of its sends instead.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

import collops


def calls(comm: Any, own: bool) -> tuple[Callable[..., Any], Callable[..., Any], Callable[[], Any]]:
    """``send(x, dest)``, ``recv(out, source)`` and ``barrier()`` of collops or mpi4py."""
    if own:
        return (lambda x, d: comm.send(x, d, 0), lambda o, s: comm.recv(o, s, 0), comm.barrier)
    return (lambda x, d: comm.Send(x, d, 0), lambda o, s: comm.Recv(o, s, 0), comm.Barrier)


def bursts(comm: Any, own: bool, rounds: int, burst: int) -> tuple[list[float], list[float]]:
    """Seconds per send (rank 1) and per receive of an arrived message (rank 0), per burst."""
    send, recv, barrier = calls(comm, own)
    rank = comm.rank if own else comm.Get_rank()
    x, out = np.ones(1), np.empty(1)
    sends: list[float] = []
    recvs: list[float] = []
    for _ in range(rounds):
        barrier()
        if rank == 1:
            start = time.perf_counter()
            for _ in range(burst):
                send(x, 0)
            sends.append((time.perf_counter() - start) / burst)
        barrier()
        if rank == 0:
            start = time.perf_counter()
            for _ in range(burst):
                recv(out, 1)
            recvs.append((time.perf_counter() - start) / burst)
    return sends, recvs


def pingpong(comm: Any, own: bool, round_trips: int) -> float:
    """Seconds per half round trip of 8 bytes between ranks 0 and 1, best of five slices."""
    send, recv, barrier = calls(comm, own)
    rank = comm.rank if own else comm.Get_rank()
    peer = 1 - rank
    x, out = np.ones(1), np.empty(1)

    def loop(k: int) -> None:
        for _ in range(k):
            if rank == 0:
                send(x, peer)
                recv(out, peer)
            else:
                recv(out, peer)
                send(x, peer)

    loop(200)
    best = float("inf")
    for _ in range(5):
        barrier()
        start = time.perf_counter()
        loop(round_trips // 5)
        best = min(best, (time.perf_counter() - start) / (round_trips // 5) / 2)
    return best


def main() -> None:
    """Measure both and print (rank 0), optionally into a JSON file."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--burst", type=int, default=40)
    parser.add_argument("--pingpong", type=int, default=20000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    world = MPI.COMM_WORLD
    comm = collops.init()
    if args.profile:
        profile = cProfile.Profile()
        profile.enable()
        bursts(comm, True, args.rounds, args.burst)
        profile.disable()
        for rank in range(2):
            comm.barrier()
            if comm.rank == rank:
                print(f"-- rank {rank}")
                pstats.Stats(profile).sort_stats("tottime").print_stats(18)
        return
    found: dict[str, Any] = {}
    for name, own, c in (("mpi4py", False, world), ("collops", True, comm),
                         ("mpi4py again", False, world), ("collops again", True, comm)):
        sends, recvs = bursts(c, own, args.rounds, args.burst)
        send = world.bcast(min(sends) if world.Get_rank() == 1 else None, root=1)
        half = pingpong(c, own, args.pingpong)
        found[name] = {"send_us": send * 1e6, "recv_arrived_us": min(recvs or [0]) * 1e6,
                       "pingpong_half_round_trip_us": half * 1e6}
    if world.Get_rank() == 0:
        found["library"] = MPI.Get_library_version().splitlines()[0]
        print(json.dumps(found, indent=1))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(found, f, indent=1)


if __name__ == "__main__":
    main()
