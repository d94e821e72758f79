"""What an 8-byte point-to-point message costs in CPU through ``collops.MPI``, apart from waiting.

Usage: collops run -n 2 --mpi4py benchmarks/p2p_call_costs.py [--rounds 300] [--burst 40]
           [--pingpong 20000] [--sizes 8,1M,4M,16M] [--json FILE]
       mpiexec -n 2 python benchmarks/p2p_call_costs.py --own [--profile] [...]

Rank 1 times a burst of ``--burst`` ``comm.Send`` calls while the ring has room (each completes
at once); then rank 0 times as many ``comm.Recv`` calls of messages that have all arrived. The
minimum over ``--rounds`` bursts of the time per call filters out the moments the process was
not running, so the figures hold on a loaded machine (scale them by the empty-loop time it
also prints: ~15 ns a loop iteration on an idle development VM). Then a ping-pong of
``--pingpong`` round trips: half a round trip, the best of five slices; ``--sizes`` adds
a ping-pong of each size (as many bytes moved as the 8-byte one, at least 25 round trips),
half a round trip and its bandwidth. Runs unchanged under
``mpiexec`` with mpi4py (MPICH's figures for the same calls); there ``--own`` also times
collops' own ``comm.send``/``comm.recv`` (MPI's point-to-point underneath) in the same job,
alternating twice with mpi4py's, and ``--profile`` prints instead rank 0's profile of collops'
receives and rank 1's of its sends.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import time
import timeit
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

Calls = tuple[Callable[[Any, int], Any], Callable[[Any, int], Any], Callable[[], Any], int]


def mpi_calls(comm: Any) -> Calls:
    """``send(x, dest)``, ``recv(out, source)``, ``barrier()`` and the rank, of mpi4py's API."""
    return (lambda x, d: comm.Send(x, d, 0), lambda o, s: comm.Recv(o, s, 0), comm.Barrier,
            comm.Get_rank())


def own_calls(comm: Any) -> Calls:
    """The same on a collops communicator."""
    return (lambda x, d: comm.send(x, d, 0), lambda o, s: comm.recv(o, s, 0), comm.barrier,
            comm.rank)


def bursts(calls: Calls, rounds: int, burst: int) -> tuple[list[float], list[float]]:
    """Seconds per send (rank 1) and per receive of an arrived message (rank 0), per burst."""
    send, recv, barrier, rank = calls
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


def pingpong(calls: Calls, round_trips: int, nbytes: int = 8) -> float:
    """Seconds per half round trip of ``nbytes`` between ranks 0 and 1, best of five
    slices."""
    send, recv, barrier, rank = calls
    peer = 1 - rank
    x, out = np.ones(max(1, nbytes // 8)), np.empty(max(1, nbytes // 8))

    def loop(k: int) -> None:
        for _ in range(k):
            if rank == 0:
                send(x, peer)
                recv(out, peer)
            else:
                recv(out, peer)
                send(x, peer)

    loop(min(1000, round_trips))
    best = float("inf")
    for _ in range(5):
        barrier()
        start = time.perf_counter()
        loop(round_trips // 5)
        best = min(best, (time.perf_counter() - start) / (round_trips // 5) / 2)
    return best


def measured(calls: Calls, world: Any, args: argparse.Namespace) -> dict[str, float]:
    """Send, arrived receive and half round trip of one API, in microseconds (on rank 0)."""
    sends, recvs = bursts(calls, args.rounds, args.burst)
    send = world.bcast(min(sends) if world.Get_rank() == 1 else None, root=1)
    half = pingpong(calls, args.pingpong)
    found = {"send_us": send * 1e6, "recv_arrived_us": min(recvs or [0.0]) * 1e6,
             "pingpong_half_round_trip_us": half * 1e6}
    for nbytes in args.sizes:  # larger messages: fewer round trips, as many bytes each
        trips = max(25, min(args.pingpong, args.pingpong * 8 // nbytes))
        trips -= trips % 5
        seconds = pingpong(calls, trips, nbytes)
        found[f"pingpong_{nbytes}B_half_round_trip_us"] = seconds * 1e6
        found[f"pingpong_{nbytes}B_MBps"] = nbytes / seconds / 1e6
    return found


def sizes(text: str) -> list[int]:
    """``8,1M,16M`` as byte counts (K and M are powers of 1024)."""
    scale = {"K": 1 << 10, "M": 1 << 20}
    return [int(part[:-1]) * scale[part[-1].upper()] if part[-1].upper() in scale
            else int(part) for part in text.split(",") if part]


def profiled(calls: Calls, args: argparse.Namespace) -> None:
    """Print each rank's profile of collops' bursts, rank 0 first."""
    profile = cProfile.Profile()
    profile.enable()
    bursts(calls, args.rounds, args.burst)
    profile.disable()
    for rank in range(2):
        calls[2]()
        if calls[3] == rank:
            print(f"-- rank {rank}")
            pstats.Stats(profile).sort_stats("tottime").print_stats(18)


def main() -> None:
    """Measure and print (rank 0), optionally into a JSON file."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--burst", type=int, default=40)
    parser.add_argument("--pingpong", type=int, default=20000)
    parser.add_argument("--sizes", type=sizes, default=[],
                        help="also ping-pong messages of these sizes (e.g. 8,1M,4M,16M)")
    parser.add_argument("--own", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    world = MPI.COMM_WORLD
    if args.own or args.profile:
        import collops

        own = own_calls(collops.init())
        if args.profile:
            profiled(own, args)
            return
        found: dict[str, Any] = {}
        for name in ("mpi4py", "collops", "mpi4py again", "collops again"):
            found[name] = measured(own if name.startswith("collops") else mpi_calls(world),
                                   world, args)
    else:
        found = measured(mpi_calls(world), world, args)
    if world.Get_rank() == 0:
        found["library"] = (MPI.Get_library_version().splitlines()[0]
                            if hasattr(MPI, "Get_library_version") else MPI.__name__)
        found["empty_loop_ns"] = min(timeit.repeat("for i in range(1000): pass", number=1000,
                                                   repeat=5)) * 1e3
        print(json.dumps(found, indent=1))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(found, f, indent=1)


if __name__ == "__main__":
    main()
