"""``collops bench``: OSU-style latency and bandwidth, optionally side by side with MPI."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from typing import Any

from ..cli import command
from .measure import COLLECTIVES, Record, measure_collops, summarise

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
    p.add_argument("-n", "--nprocs", type=int, default=2, help="ranks (processes)")
    p.add_argument("--collectives", default="allgather,alltoall,allreduce,bcast,reduce,barrier",
                   help=f"comma-separated, from: {', '.join(COLLECTIVES)}")
    p.add_argument("--sizes", default="8,1K,64K,1M", help="bytes per rank, e.g. 8,1K,64K,1M,16M")
    p.add_argument("--algorithm", default=None, help="force one algorithm (default: automatic)")
    p.add_argument("--iterations", type=int, default=0, help="timed iterations per size")
    p.add_argument("--compare", choices=["mpi"], default=None,
                   help="also measure MPI (mpi4py) in the same invocation")
    p.add_argument("--json", default=None, help="write the records to this file")
    p.add_argument("--transport", default="shm", choices=["shm", "inproc"])


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
    for name in ("COLLOPS_JOB", "COLLOPS_RANK", "COLLOPS_SIZE", "COLLOPS_TRANSPORT"):
        env.pop(name, None)
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"mpiexec failed ({out.returncode}): {out.stderr.strip()[-2000:]}")
    rows: list[dict[str, Any]] = json.loads(out.stdout.strip().splitlines()[-1])
    return rows


def run_bench(nprocs: int, collectives: list[str], sizes: list[int], algorithm: str | None,
              iterations: int, compare: str | None, transport: str = "shm") -> list[Record]:
    """Measure collops (and MPI when ``compare == "mpi"``); one record per row."""
    from ..runtime import spawn

    rows = spawn(measure_collops, nprocs, collectives, sizes, algorithm, iterations or None,
                 transport=transport, timeout=3600)[0]
    mpi_rows: dict[tuple[str, int], list[float]] = {}
    if compare == "mpi":
        for r in measure_mpi(nprocs, collectives, sizes, iterations):
            mpi_rows[(r["collective"], r["size"])] = r["means"]
    return [summarise(row, nprocs, mpi_rows.get((row["collective"], row["size"])))
            for row in rows]


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


@command("bench", _bench_args)
def cmd_bench(args: argparse.Namespace) -> int:
    """OSU-style latency/bandwidth per size; --compare mpi adds MPI's figures and the ratio."""
    try:
        sizes = [parse_size(s) for s in args.sizes.split(",") if s]
    except ValueError as exc:
        print(f"collops bench: {exc}", file=sys.stderr)
        return 2
    collectives = [c for c in args.collectives.split(",") if c]
    unknown = [c for c in collectives if c not in COLLECTIVES]
    if unknown:
        print(f"collops bench: unknown collective {unknown[0]!r} (one of "
              f"{', '.join(COLLECTIVES)})", file=sys.stderr)
        return 2
    try:
        records = run_bench(args.nprocs, collectives, sizes, args.algorithm, args.iterations,
                            args.compare, args.transport)
    except RuntimeError as exc:
        print(f"collops bench: {exc}", file=sys.stderr)
        return 2
    print(format_records(records))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([r.to_json() for r in records], f, indent=1)
    return 0
