"""`collops sim --algorithm auto` against every eligible algorithm, on the issue's scenarios.

For each scenario (collective, topology, bytes per rank or pair, model) every registered
algorithm that can run on the network is simulated on its own, then selection picks
(`collops.sim.auto`, the same engine as ``--algorithm auto``); the table gives each time, the
pick, and the pick's time over the best. Not part of ``make test`` (512-rank runs take
minutes); `tests/sim/test_auto_selection.py` checks the same property on small networks.

Usage::

    .venv/bin/python benchmarks/auto_selection.py [--model congestion]
        [--scenario alltoall,torus:8x8x8,64K ...] [--json docs/bench/auto-selection.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from datetime import date

from collops.algorithms import algorithms
from collops.sim import simulate
from collops.sim.api import call_specs, parse_size
from collops.sim.auto import choose, network_for
from collops.topology import parse_topology

DEFAULT_SCENARIOS = ["alltoall,torus:8x8x8,64K", "alltoall,fattree:2;8,8;1,8;1,1,64K",
                     "allgather,torus:4x4x4,64K"]


def run(collective: str, topology: str, size: int, model: str) -> dict:
    """Every eligible algorithm's time, then selection's pick, for one scenario."""
    topo = parse_topology(topology)
    nranks = topo.num_compute_nodes
    spec = call_specs(collective, nranks, size)[0]
    names = [a.name for a in algorithms(collective)
             if a.native is None and not a.needs and a.eligible(spec)]
    times, walls = {}, {}
    for name in names:
        wall = time.monotonic()
        times[name] = simulate(collective, name, topo, nranks, size, model=model).time_s
        walls[name] = time.monotonic() - wall
        print(f"  {name:<20} {times[name] * 1e3:10.3f} ms  ({walls[name]:.1f} s)", flush=True)
    wall = time.monotonic()
    picked = choose(collective, size, network_for(topo, nranks, model))
    best = min(times, key=times.__getitem__)
    return {"collective": collective, "topology": topology, "ranks": nranks, "size": size,
            "model": model, "times_s": times, "wall_s": walls, "auto": picked.algorithm,
            "auto_wall_s": time.monotonic() - wall, "best": best,
            "auto_over_best": times[picked.algorithm] / times[best]}


def main() -> None:
    """Run the scenarios and print (and optionally record) the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="congestion")
    parser.add_argument("--scenario", action="append", default=None,
                        help="COLLECTIVE,TOPOLOGY,SIZE (repeatable; topology may hold commas "
                             "only as in fattree:…;…)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    records = []
    for text in args.scenario or DEFAULT_SCENARIOS:
        collective, rest = text.split(",", 1)
        topology, size = rest.rsplit(",", 1)
        print(f"{collective} {parse_size(size)} B on {topology}, {args.model} model", flush=True)
        record = run(collective, topology, parse_size(size), args.model)
        print(f"  auto picks {record['auto']}: {record['auto_over_best']:.3f}x the best "
              f"({record['best']})", flush=True)
        records.append(record)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": str(date.today()), "machine": platform.node(),
                       "command": "benchmarks/auto_selection.py", "records": records}, f,
                      indent=1)


if __name__ == "__main__":
    main()
