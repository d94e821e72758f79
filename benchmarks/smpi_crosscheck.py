"""Cross-check collops' flow model against SimGrid's SMPI on a windowed alltoall.

The same MPI program (`smpi_alltoall_window.c`: every receive posted, then at most W
``MPI_Isend``s in flight per rank, the next issued in order when one completes) runs under
SMPI on a torus cluster, and collops simulates ``alltoall.linear`` with the same orders and
window in ``--model flow`` (and, for reference, the congestion model). Both see the same
destinations: the orders file SMPI reads is written from collops' own `linear_destinations`.

SimGrid's side: a ``TORUS`` cluster of the same shape, links of ``--bandwidth`` B/s and
latency 0, ``network/model:CM02`` (plain max-min sharing, no bandwidth or latency factors),
no cross traffic, no TCP window bound, sends never detached (an ``MPI_Isend`` completes when
its data has arrived), computation not simulated. SimGrid numbers a torus with dimension 0
fastest; collops numbers it with the last dimension fastest, so rank i is placed on the
collops node with the same coordinates as SimGrid's host i (``--placement simgrid``,
the default) or on collops node i (``--placement row-major``). collops runs with
``overhead = hop_latency = 0`` and ``gamma = 0``.

Usage (needs ``smpicc``/``smpirun``: ``apt-get install libsimgrid-dev``; not part of
``make test``)::

    .venv/bin/python benchmarks/smpi_crosscheck.py [--shape 4,4,4] [--size 65536]
        [--windows 1,2,4,8] [--orders shift,random,plain] [--json docs/bench/smpi_crosscheck.json]

It prints one line per (order, window): both times, the ratios random/shift and plain/shift
of each simulator, and the wall time of each run; ``--json`` records all of it.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from collops.algorithms.alltoall import linear_destinations
from collops.sim import simulate
from collops.topology import NetworkParams, parse_topology

HERE = Path(__file__).resolve().parent
PROGRAM = HERE / "smpi_alltoall_window.c"
SMPI_CONFIG = ["--cfg=network/model:CM02", "--cfg=network/crosstraffic:0",
               "--cfg=network/TCP-gamma:0", "--cfg=smpi/send-is-detached-thresh:0",
               "--cfg=smpi/simulate-computation:0", "--log=root.thres:error"]


def platform_xml(shape: list[int], bandwidth: float) -> str:
    """SimGrid platform: a torus cluster, latency 0, hosts node-0 … node-(p−1)."""
    p = int(np.prod(shape))
    dims = ",".join(str(d) for d in shape)
    return ("<?xml version='1.0'?>\n"
            '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
            '<platform version="4.1">\n'
            f'  <cluster id="torus" topology="TORUS" topo_parameters="{dims}" prefix="node-"'
            f' radical="0-{p - 1}" suffix="" speed="1Gf" bw="{bandwidth:.0f}Bps" lat="0us"'
            ' loopback_bw="1000GBps" loopback_lat="0us"/>\n'
            "</platform>\n")


def simgrid_placement(shape: list[int]) -> list[int]:
    """collops node of SimGrid host i: same coordinates, SimGrid's dimension 0 fastest."""
    p = int(np.prod(shape))
    ids = np.arange(p)
    coords = []
    for extent in shape:  # SimGrid: coordinate j = (i / prod(shape[:j])) % shape[j]
        coords.append(ids % extent)
        ids = ids // extent
    node = np.zeros(p, dtype=np.int64)
    for j, extent in enumerate(shape):  # collops: the last dimension fastest
        node = node * extent + coords[j]
    return node.tolist()


class SimgridTieBreak:
    """A collops torus whose routes break ties as SimGrid's ``TorusZone`` does.

    Both route dimension by dimension, the shorter way round. At distance exactly L/2 on a
    ring of even length L collops always goes +; SimGrid goes + except from coordinate L/2,
    whence it goes −. Everything but `routes` is the wrapped torus's.
    """

    def __init__(self, torus: Any) -> None:
        self.torus = torus

    def __getattr__(self, name: str) -> Any:
        return getattr(self.torus, name)

    def routes(self, src_nodes: np.ndarray, dst_nodes: np.ndarray,
               excluded: Any = frozenset()) -> tuple[np.ndarray, np.ndarray]:
        """Dimension-order routes with SimGrid's direction rule (no detours)."""
        torus = self.torus
        hops: list[list[tuple[int, int]]] = []
        for s, t in zip(np.asarray(src_nodes).tolist(), np.asarray(dst_nodes).tolist(),
                        strict=True):
            here, target, path = torus.coordinates(s), torus.coordinates(t), []
            for j, length in enumerate(torus.dims):
                mine, goal, half = int(here[j]), int(target[j]), length // 2
                plus = (mine < goal <= mine + half) or (mine > half
                                                        and (mine + half) % length >= goal)
                while int(here[j]) != goal:
                    before = int(torus.node_of(here))
                    here[j] = (here[j] + (1 if plus else -1)) % length
                    path.append((before, int(torus.node_of(here))))
            hops.append(path)
        offsets = np.r_[0, np.cumsum([len(h) for h in hops])].astype(np.int64)
        pairs = np.array([pair for h in hops for pair in h], dtype=np.int64).reshape(-1, 2)
        return offsets, torus.link_id(pairs[:, 0], pairs[:, 1]).astype(np.int64)


def run_smpi(workdir: Path, binary: Path, p: int, order_file: Path, window: int,
             size: int) -> tuple[float, float]:
    """(simulated seconds, wall seconds) of one SMPI run."""
    cmd = ["smpirun", "-np", str(p), "-platform", str(workdir / "platform.xml"),
           "-hostfile", str(workdir / "hosts.txt"), *SMPI_CONFIG, str(binary),
           str(order_file), str(window), str(size)]
    wall = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=workdir)
    wall = time.monotonic() - wall
    match = re.search(r"time_s (\S+)", out.stdout)
    if not match:
        raise RuntimeError(f"no time in SMPI's output:\n{out.stdout}\n{out.stderr}")
    return float(match.group(1)), wall


def run_collops(topology: Any, placement: list[int], order: str, window: int, size: int,
                model: str, seed: int) -> tuple[float, float, float]:
    """(simulated seconds, wall seconds, busiest link's bytes) of one collops run."""
    wall = time.monotonic()
    result = simulate("alltoall", "linear", topology, size_bytes=size, model=model,
                      params={"order": order, "seed": seed}, window=window, gamma=0.0,
                      placement=placement)
    return result.time_s, time.monotonic() - wall, result.max_link_load_bytes


def main() -> int:
    """Run every (order, window) under both simulators and print the comparison."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="4,4,4")
    ap.add_argument("--size", type=int, default=65536, help="bytes per pair")
    ap.add_argument("--windows", default="1,2,4,8", help="0 = all sends posted at once")
    ap.add_argument("--orders", default="shift,random,plain")
    ap.add_argument("--bandwidth", type=float, default=2e9, help="bytes/s per link")
    ap.add_argument("--seed", type=int, default=0, help="seed of order=random")
    ap.add_argument("--placement", default="simgrid", choices=("simgrid", "row-major"))
    ap.add_argument("--tie-break", default="both", choices=("plus", "simgrid", "both"),
                    help="collops' routes (plus), SimGrid's tie-break (simgrid) or both")
    ap.add_argument("--congestion", action="store_true",
                    help="also run the congestion model (lockstep rounds)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if not shutil.which("smpicc") or not shutil.which("smpirun"):
        print("smpicc/smpirun not found: apt-get install libsimgrid-dev", file=sys.stderr)
        return 2
    shape = [int(x) for x in args.shape.split(",")]
    p = int(np.prod(shape))
    windows = [int(w) for w in args.windows.split(",")]
    orders = args.orders.split(",")
    topology = parse_topology("torus:" + "x".join(map(str, shape)),
                              NetworkParams(bandwidth=args.bandwidth, hop_latency=0.0,
                                            overhead=0.0))
    placement = (simgrid_placement(shape) if args.placement == "simgrid"
                 else list(range(p)))
    networks = {"plus": topology, "simgrid": SimgridTieBreak(topology)}
    if args.tie_break != "both":
        networks = {args.tie_break: networks[args.tie_break]}
    rows = []
    with tempfile.TemporaryDirectory(prefix="collops-smpi-") as tmp:
        work = Path(tmp)
        (work / "platform.xml").write_text(platform_xml(shape, args.bandwidth))
        (work / "hosts.txt").write_text("".join(f"node-{i}\n" for i in range(p)))
        binary = work / "alltoall_window"
        subprocess.run(["smpicc", "-O2", "-o", str(binary), str(PROGRAM)], check=True,
                       capture_output=True)
        for order in orders:
            order_file = work / f"{order}.txt"
            order_file.write_text("".join(
                " ".join(map(str, linear_destinations(r, p, order, args.seed))) + "\n"
                for r in range(p)))
            for window in windows:
                smpi_s, smpi_wall = run_smpi(work, binary, p, order_file, window, args.size)
                row: dict[str, Any] = {"order": order, "window": window, "smpi_s": smpi_s,
                                       "smpi_wall_s": smpi_wall}
                line = f"{order:>7} W={window:<2} smpi {smpi_s * 1e3:8.3f} ms ({smpi_wall:5.1f} s)"
                for name, network in networks.items():
                    flow_s, flow_wall, max_load = run_collops(network, placement, order, window,
                                                              args.size, "flow", args.seed)
                    row[f"flow_{name}_s"] = flow_s
                    row[f"flow_{name}_wall_s"] = flow_wall
                    row[f"closed_form_{name}_s"] = max_load / args.bandwidth
                    line += (f"  flow[{name}] {flow_s * 1e3:8.3f} ms ({flow_wall:5.1f} s,"
                             f" {flow_s / smpi_s:5.3f}×)")
                    if args.congestion:
                        row[f"congestion_{name}_s"] = run_collops(
                            network, placement, order, window, args.size, "congestion",
                            args.seed)[0]
                rows.append(row)
                print(line, flush=True)
    for name in networks:
        print(f"\nratios, collops routes with tie-break {name}:")
        print(ratio_table(rows, windows, f"flow_{name}_s"))
    if args.json:
        record = {"benchmark": "smpi_crosscheck", "shape": shape, "size": args.size,
                  "bandwidth": args.bandwidth, "placement": args.placement,
                  "smpi_config": SMPI_CONFIG, "rows": rows}
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    return 0


def ratio_table(rows: list[dict[str, Any]], windows: list[int], flow_key: str) -> str:
    """random/shift and plain/shift per window, for both simulators."""
    by = {(r["order"], r["window"]): r for r in rows}
    lines = [f"{'window':>6} {'ratio':>13} {'smpi':>7} {'flow':>7} {'flow/smpi':>9}"]
    for window in windows:
        base = by.get(("shift", window))
        if base is None:
            continue
        for order in ("random", "plain"):
            row = by.get((order, window))
            if row is None:
                continue
            smpi = float(row["smpi_s"]) / float(base["smpi_s"])
            flow = float(row[flow_key]) / float(base[flow_key])
            lines.append(f"{window:>6} {order + '/shift':>13} {smpi:7.3f} {flow:7.3f} "
                         f"{flow / smpi:9.3f}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
