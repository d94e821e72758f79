"""Active-message latency on endpoints: one-way 8 B `send`, an 8 B AM broadcast, an idle
`advance()`.

Usage: python benchmarks/am_latency.py [--transport inproc,shm] [--iterations N]
                                        [--tasks 2] [--json docs/bench/am-latency.json]

One-way send: task 0 sends 8 B to task 1's dispatch, whose dispatch answers with an 8 B
`send_immediate`; half the round trip, as OSU's osu_latency. AM broadcast: task 0 posts an
8 B `ambroadcast` through its endpoint and waits for it (every peer's dispatch ran and
reported), the peers advance until they have seen it. Both sides wait as the documented
loop does (``if not ctx.advance(): client.wait_for_activity(…)``). Medians of the timed
iterations after a warm-up; the load average is recorded beside them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

import collops
from collops.endpoints import Client, Xfer

PING, PONG = 1, 2


def _idle_advance_seconds(ctx: Any, iterations: int) -> float:
    """Median seconds of one `advance()` with nothing to do."""
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        ctx.advance()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _ping_pong(client: Client, ctx: Any, iterations: int, warmup: int,
               progress_thread: bool) -> list[float]:
    """Round-trip seconds of 8 B active messages between tasks 0 and 1 (on task 0); with
    ``progress_thread``, task 1 answers from its context's progress thread."""
    arrived = [0]
    payload = np.ones(1, np.float64)
    peer = client.endpoint(1 - client.task)
    answered = threading.Event()

    def ping(header: bytes, data: Any, origin: Any, recv: Any) -> None:
        ctx.send_immediate(origin, PONG, b"", data)
        arrived[0] += 1
        if arrived[0] == warmup + iterations:
            answered.set()

    ctx.set_dispatch(PING, ping)
    ctx.set_dispatch(PONG, lambda h, d, o, r: arrived.__setitem__(0, arrived[0] + 1))
    client.comm.barrier()
    rounds = []
    if client.task == 1 and progress_thread:
        ctx.start_progress_thread()
        answered.wait()
        ctx.stop_progress_thread()
    if client.task == 0:
        for i in range(warmup + iterations):
            start = time.perf_counter()
            ctx.send(peer, PING, b"", payload)
            while arrived[0] <= i:
                if not ctx.advance():
                    client.wait_for_activity(0.001)
            rounds.append(time.perf_counter() - start)
        done = client.comm.ibarrier()
    else:
        done = client.comm.ibarrier()
    while not done.test() or client.pending():
        if not ctx.advance():
            client.wait_for_activity(0.001)
    return rounds[warmup:]


def _am_broadcast(client: Client, iterations: int, warmup: int) -> list[float]:
    """Seconds per 8 B ambroadcast at the root (task 0), until every peer reported."""
    geometry = client.geometry()
    ctx = client.contexts[0]
    seen = [0]
    ctx.endpoint.register_dispatch("ambroadcast", 5,
                                   lambda d, i: seen.__setitem__(0, seen[0] + 1))
    client.comm.barrier()
    times = []
    total = warmup + iterations
    if client.task == 0:
        for _ in range(total):
            start = time.perf_counter()
            geometry.post(Xfer("ambroadcast", None, np.ones(1), 5), via=ctx.endpoint).wait()
            times.append(time.perf_counter() - start)
    while (client.task and seen[0] < total) or client.pending():
        if not ctx.advance():
            client.wait_for_activity(0.001)
    client.comm.barrier()
    return times[warmup:]


def _task(comm: collops.Comm, iterations: int, progress_thread: bool) -> dict[str, float]:
    client = Client("am-latency", comm)
    ctx = client.create_contexts(1)[0]
    warmup = max(10, iterations // 10)
    idle = _idle_advance_seconds(ctx, 2000)
    rounds = _ping_pong(client, ctx, iterations, warmup, progress_thread) if comm.size >= 2 else []
    bcast = _am_broadcast(client, iterations, warmup)
    client.close()
    if comm.rank:
        return {}
    return {"send_8B_one_way_us": statistics.median(rounds) / 2 * 1e6 if rounds else 0.0,
            "ambroadcast_8B_us": statistics.median(bcast) * 1e6,
            "idle_advance_us": idle * 1e6}


def main() -> None:
    """Print (and optionally save) the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--transport", default="inproc,shm")
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--progress-thread", action="store_true",
                        help="task 1 answers pings from a progress thread")
    parser.add_argument("--json", help="write the record here")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for transport in args.transport.split(","):
        load = Path("/proc/loadavg").read_text().split()[:3]
        result = collops.spawn(_task, args.tasks, args.iterations, args.progress_thread,
                               transport=transport,
                               timeout=600)[0]
        rows.append({"transport": transport, "tasks": args.tasks, "loadavg": load, **result})
        print(f"{transport:7} {args.tasks} tasks  send 8 B one way "
              f"{result['send_8B_one_way_us']:8.2f} µs  ambroadcast 8 B "
              f"{result['ambroadcast_8B_us']:8.2f} µs  idle advance "
              f"{result['idle_advance_us']:6.2f} µs  (load {' '.join(load)})")
    if args.json:
        command = (f"python benchmarks/am_latency.py --transport {args.transport} "
                   f"--iterations {args.iterations} --tasks {args.tasks}"
                   + (" --progress-thread" if args.progress_thread else ""))
        record = {"command": command, "rows": rows}
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
