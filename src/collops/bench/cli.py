"""``collops bench``: OSU-style latency and bandwidth, optionally side by side with MPI.

Started on its own, it launches its ranks (``-n``, over shared memory or threads) and, for
``--compare mpi``, a separate ``mpiexec`` job timing mpi4py's collectives. Started by an MPI
launcher (``mpiexec -n 4 collops bench …``, where `collops.init` picks the MPI transport), it
measures in place on the job's own ranks: collops over MPI, and for ``--compare mpi`` MPI's
own collectives in the same processes, row by row in turn; rank 0 prints the table and writes
the JSON, the other ranks print nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from ..errors import TransportError, UnknownAlgorithm
from ..transport.placement import BIND_POLICIES
from .measure import (
    COLLECTIVES,
    REGISTRY_NAME,
    Record,
    measure_collops,
    row_sizes,
    summarise,
)

if TYPE_CHECKING:
    from ..runtime import Comm

#: ranks ``collops bench`` launches when not started by an MPI launcher and not told ``-n``
DEFAULT_NPROCS = 2

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20,
          "MB": 1 << 20, "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}


def parse_size(text: str) -> int:
    """``"64K"`` → 65536 (K, M, G are powers of 1024)."""
    t = text.strip().upper()
    digits = t.rstrip("KMGIB")
    unit = t[len(digits):]
    if not digits.isdigit() or unit not in _UNITS:
        raise ValueError(f"not a size: {text!r} (use e.g. 8, 1K, 64K, 1M)")
    return int(digits) * _UNITS[unit]


def _bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--nprocs", type=int, default=None,
                   help=f"ranks (processes) to launch (default {DEFAULT_NPROCS}); under "
                   "mpiexec, the job's ranks are measured")
    p.add_argument("--collectives", default="allgather,alltoall,allreduce,bcast,reduce,barrier",
                   help=f"comma-separated, from: {', '.join(COLLECTIVES)}")
    p.add_argument("--sizes", default="8,1K,64K,1M", help="bytes per rank, e.g. 8,1K,64K,1M,16M")
    p.add_argument("--algorithm", default=None, help="force one algorithm (default: automatic)")
    p.add_argument("--iterations", type=int, default=0, help="timed iterations per size")
    p.add_argument("--compare", choices=["mpi"], default=None,
                   help="also measure MPI (mpi4py) in the same invocation")
    p.add_argument("--json", default=None, help="write the records to this file")
    p.add_argument("--bind-to", choices=BIND_POLICIES, default="auto",
                   help="pin collops's ranks to CPUs as collops run --bind-to does (MPI's "
                   "ranks keep mpiexec's own placement)")
    p.add_argument("--transport", default=None, choices=["shm", "inproc", "mpi"],
                   help="what collops runs over (default: mpi when started by mpiexec, else "
                   "shm); mpi needs mpiexec, and under mpiexec only mpi is possible")


def _mpiexec() -> str | None:
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.path.exists(here) else shutil.which("mpiexec")


def measure_mpi(nprocs: int, collectives: list[str], sizes: list[int],
                iterations: int) -> list[dict[str, Any]]:
    """Run the MPI side under mpiexec; the per-rank mean latencies per row."""
    mpiexec = _mpiexec()
    if mpiexec is None:
        raise RuntimeError("--compare mpi needs mpiexec: pip install 'collops[mpi]'")
    cmd = [mpiexec, "-n", str(nprocs), sys.executable, "-m", "collops.bench.mpi_worker",
           "--collectives", ",".join(collectives), "--sizes", ",".join(map(str, sizes)),
           "--iterations", str(iterations)]
    env = dict(os.environ)
    for name in ("COLLOPS_JOB", "COLLOPS_SHM_FD", "COLLOPS_RANK", "COLLOPS_SIZE",
                 "COLLOPS_TRANSPORT"):
        env.pop(name, None)
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"mpiexec failed ({out.returncode}): {out.stderr.strip()[-2000:]}")
    rows: list[dict[str, Any]] = json.loads(out.stdout.strip().splitlines()[-1])
    return rows


def run_bench(nprocs: int, collectives: list[str], sizes: list[int], algorithm: str | None,
              iterations: int, compare: str | None, transport: str = "shm",
              bind_to: str = "auto") -> list[Record]:
    """Measure collops (and MPI when ``compare == "mpi"``); one record per row."""
    from ..runtime import spawn

    rows = spawn(measure_collops, nprocs, collectives, sizes, algorithm, iterations or None,
                 transport=transport, timeout=3600, bind_to=bind_to)[0]
    mpi_rows: dict[tuple[str, int], list[float]] = {}
    if compare == "mpi":
        for r in measure_mpi(nprocs, collectives, sizes, iterations):
            mpi_rows[(r["collective"], r["size"])] = r["means"]
    return [summarise(row, nprocs, mpi_rows.get((row["collective"], row["size"])), transport)
            for row in rows]


def mpi_world() -> Comm | None:
    """The MPI world when this process was started by an MPI launcher, else None.

    `collops.init` decides; it is not called at all when no launcher's environment variables
    are set, so a plain ``collops bench`` makes no world of its own.
    """
    from ..runtime.world import init, started_by_mpi_launcher

    if not started_by_mpi_launcher():
        return None
    world = init()
    return world if world.transport_name == "mpi" else None


def run_bench_in_place(comm: Comm, collectives: list[str], sizes: list[int],
                       algorithm: str | None, iterations: int,
                       compare: str | None) -> list[Record]:
    """Measure on the ranks of ``comm`` (collops over MPI); rank 0 returns the records.

    Every rank must call it. With ``compare == "mpi"`` each row is followed by the same
    measurement of MPI's own collective (mpi4py, on a duplicate of the transport's MPI
    communicator), so both sides see the same processes and the same moment of the machine.
    """
    mpi_comm: Any = None
    MPI: Any = None
    if compare == "mpi":
        from mpi4py import MPI

        from .mpi_worker import measure_mpi_collectives

        mpi_comm = comm.transport.comm.Dup()  # type: ignore[attr-defined]
    records = []
    try:
        for collective in collectives:
            for size in row_sizes(collective, sizes):
                row = measure_collops(comm, [collective], [size], algorithm,
                                      iterations or None)[0]
                mpi_means = None
                if mpi_comm is not None:
                    mpi_means = measure_mpi_collectives(mpi_comm, MPI, [collective], [size],
                                                        iterations or None)[0]["means"]
                if comm.rank == 0:
                    records.append(summarise(row, comm.size, mpi_means, "mpi"))
    finally:
        if mpi_comm is not None:
            mpi_comm.Free()
    return records


def algorithm_problem(name: str, collectives: list[str], transport: str) -> str | None:
    """Why algorithm ``name`` cannot be forced on all of ``collectives`` over ``transport``
    (None if it can)."""
    from ..algorithms.registry import get_algorithm

    for collective in collectives:
        try:
            algorithm = get_algorithm(REGISTRY_NAME.get(collective, collective), name)
        except UnknownAlgorithm as exc:
            return str(exc)
        if algorithm.transports and transport not in algorithm.transports:
            hint = " (started by mpiexec, collops bench measures over mpi)" if (
                "mpi" in algorithm.transports) else ""
            return (f"{algorithm.collective}[{name}] runs only over "
                    f"{', '.join(algorithm.transports)}, not {transport}{hint}")
    return None


def format_records(records: list[Record]) -> str:
    """The records as an aligned text table."""
    head = (f"{'collective':<15}{'algorithm':<20}{'n':>3}{'size':>10}{'avg µs':>10}"
            f"{'min µs':>10}{'max µs':>10}{'algbw GB/s':>12}{'busbw GB/s':>12}")
    compared = any(r.mpi_latency_us is not None for r in records)
    if compared:
        head += f"{'MPI µs':>10}{'ratio':>8}"
    lines = [head]
    for r in records:
        line = (f"{r.collective:<15}{r.algorithm:<20}{r.nprocs:>3}{r.size:>10}"
                f"{r.latency_us:>10.2f}{r.min_us:>10.2f}{r.max_us:>10.2f}"
                f"{r.algbw_GBps:>12.3f}{r.busbw_GBps:>12.3f}")
        if compared and r.mpi_latency_us is not None and r.ratio is not None:
            line += f"{r.mpi_latency_us:>10.2f}{r.ratio:>8.2f}"
        lines.append(line)
    return "\n".join(lines)


def cmd_bench(args: argparse.Namespace) -> int:
    """OSU-style latency/bandwidth per size; --compare mpi adds MPI's figures and the ratio."""
    try:
        world = mpi_world()
    except TransportError as exc:
        print(f"collops bench: {exc}", file=sys.stderr)
        return 2
    speaks = world is None or world.rank == 0

    def fail(message: str) -> int:
        if speaks:
            print(f"collops bench: {message}", file=sys.stderr)
        return 2

    try:
        sizes = [parse_size(s) for s in args.sizes.split(",") if s]
    except ValueError as exc:
        return fail(str(exc))
    collectives = [c for c in args.collectives.split(",") if c]
    unknown = [c for c in collectives if c not in COLLECTIVES]
    if unknown:
        return fail(f"unknown collective {unknown[0]!r} (one of {', '.join(COLLECTIVES)})")
    if args.algorithm:
        transport = "mpi" if world is not None else args.transport or "shm"
        problem = algorithm_problem(args.algorithm, collectives, transport)
        if problem is not None:
            return fail(problem)
    if world is not None:
        if args.transport not in (None, "mpi"):
            return fail(f"--transport {args.transport}: started by an MPI launcher, collops "
                        "bench measures the job's ranks over mpi; run it without mpiexec "
                        "to launch its own ranks")
        if args.nprocs is not None and args.nprocs != world.size and speaks:
            print(f"collops bench: -n {args.nprocs} ignored: measuring the {world.size} "
                  "ranks mpiexec started", file=sys.stderr)
        records = run_bench_in_place(world, collectives, sizes, args.algorithm,
                                     args.iterations, args.compare)
    elif args.transport == "mpi":
        return fail("--transport mpi: start it with mpiexec, e.g. "
                    "mpiexec -n 2 collops bench ...")
    else:
        try:
            records = run_bench(args.nprocs or DEFAULT_NPROCS, collectives, sizes,
                                args.algorithm, args.iterations, args.compare,
                                args.transport or "shm", args.bind_to)
        except RuntimeError as exc:
            return fail(str(exc))
    if not speaks:
        return 0
    print(format_records(records))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([r.to_json() for r in records], f, indent=1)
    return 0


#: the subcommand this module adds to ``collops``: name, argument set-up, handler
COMMAND = ("bench", _bench_args, cmd_bench)
