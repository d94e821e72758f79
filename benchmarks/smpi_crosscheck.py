"""Cross-check collops' flow model against SimGrid's SMPI on a windowed alltoall.

The same MPI program (`smpi_alltoall_window.c`: every receive posted, then at most W
``MPI_Isend``s in flight per rank, the next issued in order when one completes) runs under
SMPI on a torus cluster, and collops simulates ``alltoall.linear`` with the same orders and
window in ``--model flow`` (and, for reference, the congestion model). Both see the same
destinations: the orders file SMPI reads is written from collops' own `linear_destinations`.

SimGrid's side: a ``TORUS`` or ``FAT_TREE`` cluster of the same shape (``--topology``, a torus
or SimGrid's own fat-tree description, which collops parses too), ``SPLITDUPLEX`` links of
``--bandwidth`` B/s and latency 0, ``network/model:CM02`` (plain max-min sharing, no bandwidth
or latency factors), no cross traffic, no TCP window bound, sends never detached (an
``MPI_Isend`` completes when its data has arrived), computation not simulated. SimGrid numbers
a torus's hosts with dimension 0 fastest, so SimGrid's host i is collops' i-th node in
``column-major`` placement; on a fat tree both number hosts alike. ``--idle`` leaves SimGrid
hosts out of the job (the hostfile skips them) while their routers forward, as collops'
``idle`` nodes. On a torus collops runs with its own tie-break at distance L/2 (``plus``),
SimGrid's (``--net tie_break=simgrid``) or both. collops runs with ``overhead = hop_latency =
0`` and ``gamma = 0``.

Usage (needs ``smpicc``/``smpirun``: ``apt-get install libsimgrid-dev``; not part of
``make test``)::

    .venv/bin/python benchmarks/smpi_crosscheck.py [--topology torus:4x4x4] [--size 65536]
        [--windows 1,2,4,8] [--orders shift,random,plain] [--idle 21] [--tie-break both]
        [--congestion] [--json docs/bench/smpi_crosscheck.json] [--smpi-from RECORD.json]

It prints one line per (order, window): both times, the ratios random/shift and plain/shift
of each simulator, and the wall time of each run; ``--json`` records all of it, with the CPU
seconds of each run (a fairer speed comparison than wall time on a shared machine).
``--smpi-from`` takes SMPI's rows (time, wall and CPU seconds) from a record this script wrote
for the same scenario instead of running SMPI again (a 512-rank run takes half an hour on a
loaded machine); the new record names its source in ``smpi_from``.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from collops.algorithms.alltoall import linear_destinations
from collops.sim import simulate
from collops.sim.flow import parse_maxmin
from collops.topology import NetworkParams, parse_topology, place

HERE = Path(__file__).resolve().parent
PROGRAM = HERE / "smpi_alltoall_window.c"
SMPI_CONFIG = ["--cfg=network/model:CM02", "--cfg=network/crosstraffic:0",
               "--cfg=network/TCP-gamma:0", "--cfg=smpi/send-is-detached-thresh:0",
               "--cfg=smpi/simulate-computation:0", "--log=root.thres:error",
               # one physical copy of every large buffer: 512 ranks would need 32 GiB
               "--cfg=smpi/auto-shared-malloc-thresh:65536"]


def is_fat_tree(spec: str) -> bool:
    """Whether ``spec`` is SimGrid's fat-tree description (``fattree:L;D;U;C``)."""
    return spec.startswith("fattree:") and ";" in spec


def cluster_xml(spec: str, hosts: int, bandwidth: float) -> str:
    """SimGrid platform: one cluster of the spec's shape, latency 0, hosts node-0 … ."""
    if spec.startswith("torus:"):
        kind, parameters = "TORUS", spec[len("torus:"):].replace("x", ",")
    elif is_fat_tree(spec):
        kind, parameters = "FAT_TREE", spec[len("fattree:"):]
    else:
        raise SystemExit(f"--topology {spec}: only torus:AxBxC and fattree:L;D;U;C")
    return ("<?xml version='1.0'?>\n"
            '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
            '<platform version="4.1">\n'
            f'  <cluster id="net" topology="{kind}" topo_parameters="{parameters}"'
            f' prefix="node-" radical="0-{hosts - 1}" suffix="" speed="1Gf"'
            f' bw="{bandwidth:.0f}Bps" lat="0us" sharing_policy="SPLITDUPLEX"'
            ' loopback_bw="1000GBps" loopback_lat="0us"/>\n'
            "</platform>\n")


def simgrid_nodes(topology: Any) -> list[int]:
    """collops node of every SimGrid host: a torus numbered with dimension 0 fastest
    (collops' ``column-major`` placement), a fat tree host for host."""
    nodes = topology.compute_nodes
    if hasattr(topology, "dims"):
        nodes = place(topology, topology.num_compute_nodes, "column-major")
    return [int(n) for n in nodes]


def run_smpi(workdir: Path, binary: Path, p: int, order_file: Path, window: int,
             size: int) -> tuple[float, float, float]:
    """(simulated seconds, wall seconds, CPU seconds) of one SMPI run."""
    cmd = ["smpirun", "-np", str(p), "-platform", str(workdir / "platform.xml"),
           "-hostfile", str(workdir / "hosts.txt"), *SMPI_CONFIG, str(binary),
           str(order_file), str(window), str(size)]
    wall, cpu = time.monotonic(), _children_cpu()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=workdir)
    wall, cpu = time.monotonic() - wall, _children_cpu() - cpu
    match = re.search(r"time_s (\S+)", out.stdout)
    if not match:
        raise RuntimeError(f"no time in SMPI's output:\n{out.stdout}\n{out.stderr}")
    return float(match.group(1)), wall, cpu


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_collops(topology: Any, placement: list[int], order: str, window: int, size: int,
                model: str, seed: int, maxmin_eps: float = 0.0
                ) -> tuple[float, float, float, float]:
    """(simulated seconds, wall seconds, busiest link's bytes, CPU seconds) of one collops
    run (``maxmin_eps``: the flow model's approximate repair)."""
    wall, cpu = time.monotonic(), time.process_time()
    result = simulate("alltoall", "linear", topology, len(placement), size_bytes=size, model=model,
                      params={"order": order, "seed": seed}, window=window, gamma=0.0,
                      placement=placement, maxmin_eps=maxmin_eps if model == "flow" else 0.0)
    return (result.time_s, time.monotonic() - wall, result.max_link_load_bytes,
            time.process_time() - cpu)


def main() -> int:
    """Run every (order, window) under both simulators and print the comparison."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default="torus:4x4x4",
                    help="torus:AxBxC or SimGrid's fat tree fattree:L;D,..;U,..;C,..")
    ap.add_argument("--size", type=int, default=65536, help="bytes per pair")
    ap.add_argument("--windows", default="1,2,4,8", help="0 = all sends posted at once")
    ap.add_argument("--orders", default="shift,random,plain")
    ap.add_argument("--bandwidth", type=float, default=2e9, help="bytes/s per link")
    ap.add_argument("--seed", type=int, default=0, help="seed of order=random")
    ap.add_argument("--idle", default="",
                    help="SimGrid host ids left out of the job (their routers still forward)")
    ap.add_argument("--tie-break", default="both", choices=("plus", "simgrid", "both"),
                    help="torus: collops' tie-break (plus), SimGrid's (simgrid) or both")
    ap.add_argument("--congestion", action="store_true",
                    help="also run the congestion model (lockstep rounds)")
    ap.add_argument("--maxmin", default="exact",
                    help="the flow model's max-min repair: exact, approx or approx:eps=E")
    ap.add_argument("--json", default=None)
    ap.add_argument("--smpi-from", default=None,
                    help="reuse SMPI's rows of this record (same scenario) instead of SMPI")
    args = ap.parse_args()
    eps = parse_maxmin(args.maxmin)
    saved = saved_smpi_rows(args.smpi_from, args) if args.smpi_from else None
    if saved is None and (not shutil.which("smpicc") or not shutil.which("smpirun")):
        print("smpicc/smpirun not found: apt-get install libsimgrid-dev", file=sys.stderr)
        return 2
    windows = [int(w) for w in args.windows.split(",")]
    orders = args.orders.split(",")
    breaks = ["plus", "simgrid"] if args.tie_break == "both" else [args.tie_break]
    if not args.topology.startswith("torus:"):
        breaks = ["plus"]  # a tie-break only exists on a torus
    networks = {name: parse_topology(args.topology, NetworkParams(
        bandwidth=args.bandwidth, hop_latency=0.0, overhead=0.0, tie_break=name))
        for name in breaks}
    topology = networks[breaks[0]]
    idle_hosts = {int(h) for h in args.idle.split(",") if h.strip()}
    host_nodes = simgrid_nodes(topology)
    hosts = [h for h in range(len(host_nodes)) if h not in idle_hosts]
    placement = [host_nodes[h] for h in hosts]
    idle_nodes = [host_nodes[h] for h in sorted(idle_hosts)]
    p = len(hosts)
    rows = []
    with tempfile.TemporaryDirectory(prefix="collops-smpi-") as tmp:
        work = Path(tmp)
        (work / "platform.xml").write_text(cluster_xml(args.topology, len(host_nodes),
                                                       args.bandwidth))
        (work / "hosts.txt").write_text("".join(f"node-{h}\n" for h in hosts))
        binary = work / "alltoall_window"
        if saved is None:
            subprocess.run(["smpicc", "-O2", "-o", str(binary), str(PROGRAM)], check=True,
                           capture_output=True)
        for order in orders:
            order_file = work / f"{order}.txt"
            order_file.write_text("".join(
                " ".join(map(str, linear_destinations(r, p, order, args.seed))) + "\n"
                for r in range(p)))
            for window in windows:
                if saved is None:
                    smpi_s, smpi_wall, smpi_cpu = run_smpi(work, binary, p, order_file,
                                                           window, args.size)
                else:
                    smpi_s, smpi_wall, smpi_cpu = saved[(order, window)]
                row: dict[str, Any] = {"order": order, "window": window, "smpi_s": smpi_s,
                                       "smpi_wall_s": smpi_wall, "smpi_cpu_s": smpi_cpu}
                line = f"{order:>7} W={window:<2} smpi {smpi_s * 1e3:8.3f} ms ({smpi_wall:5.1f} s)"
                for name, network in networks.items():
                    flow_s, flow_wall, max_load, flow_cpu = run_collops(
                        network, placement, order, window, args.size, "flow", args.seed, eps)
                    row[f"flow_{name}_s"] = flow_s
                    row[f"flow_{name}_wall_s"] = flow_wall
                    row[f"flow_{name}_cpu_s"] = flow_cpu
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
        record = {"benchmark": "smpi_crosscheck", "topology": args.topology, "ranks": p,
                  "idle_nodes": idle_nodes, "size": args.size, "bandwidth": args.bandwidth,
                  "smpi_config": SMPI_CONFIG, "smpi_from": args.smpi_from,
                  "maxmin": args.maxmin, "rows": rows}
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    return 0


def saved_smpi_rows(path: str, args: argparse.Namespace) -> dict[tuple[str, int],
                                                                   tuple[float, float, float]]:
    """SMPI's (simulated, wall, CPU seconds) per (order, window) from a record of this script,
    which must describe the same scenario."""
    record = json.loads(Path(path).read_text())
    for key, wanted in (("topology", args.topology), ("size", args.size),
                        ("bandwidth", args.bandwidth), ("smpi_config", _timed(SMPI_CONFIG))):
        found = record.get(key)
        if key == "smpi_config" and isinstance(found, list):
            found = _timed(found)
        if found != wanted:
            raise SystemExit(f"--smpi-from {path}: its {key} is {record.get(key)!r}, "
                             f"not {wanted!r}")
    rows = {(str(r["order"]), int(r["window"])): (float(r["smpi_s"]), float(r["smpi_wall_s"]),
                                                  float(r.get("smpi_cpu_s", "nan")))
            for r in record["rows"]}
    wanted_cells = {(o, int(w)) for o in args.orders.split(",") for w in args.windows.split(",")}
    missing = sorted(wanted_cells - set(rows))
    if missing:
        raise SystemExit(f"--smpi-from {path}: no SMPI run of (order, window) {missing}")
    return rows


def _timed(config: list[str]) -> list[str]:
    """SMPI's options that decide simulated times (shared malloc only saves memory)."""
    return [c for c in config if not c.startswith("--cfg=smpi/auto-shared-malloc")]


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
