"""`collops bench` with a tuning file in force against the built-in table, alternating.

Usage: .venv/bin/python benchmarks/tune_bench_check.py FILE -n 2 [--rounds 5]
           [--iterations 200] [--json OUT.json] [--collectives C --sizes S]

Issue 21's Must hold: with a `collops tune` file in force (`COLLOPS_TUNING_FILE`), `collops
bench` at the tuned sizes is never slower than with the defaults beyond noise (≤ 1.1×) and
faster where the file changed the choice. The rows are those the file's rules were measured at
(their ``evidence``, as ``collops tune --compare-default`` reads them), or ``--collectives`` ×
``--sizes`` for a file with no rule at these ranks. Each round runs `collops bench` once
without the file and once with it, which goes first alternating, so both sides see the
machine in the same minute; per row: the medians of the rounds, the fastest, and the median of
the rounds' tuned / default ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from collops.tune.jobs import job_rows_of_file
from collops.tune.verify import rows_of_file

#: tuned / default a row may reach (the issue's bound: noise)
BOUND = 1.1
#: rows of the tuner that `collops bench` has no row for
NOT_BENCH = {"burst"}


def bench(ranks: int, collectives: list[str], sizes: list[int], iterations: int,
          tuning: str) -> dict[tuple[str, int], tuple[str, float]]:
    """One `collops bench` run with ``tuning`` in force ("": none): per row, its algorithm
    and µs per call."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.json"
        subprocess.run([sys.executable, "-m", "collops", "bench", "-n", str(ranks),
                        "--collectives", ",".join(collectives),
                        "--sizes", ",".join(map(str, sizes)), "--iterations",
                        str(iterations), "--json", str(out)],
                       env={**os.environ, "COLLOPS_TUNING_FILE": tuning}, check=True,
                       stdout=subprocess.DEVNULL)
        return {(r["collective"], r["size"]): (r["algorithm"], r["latency_us"])
                for r in json.loads(out.read_text())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("-n", "--nprocs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--collectives", default="", help="rows for a file without rules here")
    ap.add_argument("--sizes", default="", help="bytes per rank, with --collectives")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    path = str(Path(args.file).resolve())
    rows = [r for r in rows_of_file(path, args.nprocs) + job_rows_of_file(path, args.nprocs)
            if r[0] not in NOT_BENCH]
    ruled = set(rows)  # every row of a rule: the file changes something there
    if not rows and args.collectives:
        rows = [(c, int(s)) for c in args.collectives.split(",") for s in args.sizes.split(",")]
    if not rows:
        print(f"{path}: no rule for {args.nprocs} ranks: collops bench runs the built-in table")
        return
    collectives = sorted({c for c, _ in rows})
    sizes = sorted({s for _, s in rows})
    load = [os.getloadavg()[0]]
    times: dict[str, list[dict[tuple[str, int], tuple[str, float]]]] = {"default": [],
                                                                         "tuned": []}
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for number in range(args.rounds):
        sides = [("default", ""), ("tuned", path)][:: 1 if number % 2 == 0 else -1]
        for side, tuning in sides:
            times[side].append(bench(args.nprocs, collectives, sizes, args.iterations,
                                     tuning))
        load.append(os.getloadavg()[0])
    found = []
    print(f"{'row':<22} {'default':>24} {'tuned':>24}  median ratio  fastest  verdict")
    for row in rows:
        d = [run[row][1] for run in times["default"]]
        t = [run[row][1] for run in times["tuned"]]
        ratios = [a / b for a, b in zip(t, d, strict=True)]
        algorithms = (times["default"][0][row][0], times["tuned"][0][row][0])
        ratio = float(np.median(ratios))
        changed = row in ruled
        ok = ratio <= BOUND and (not changed or ratio < 1)
        print(f"{row[0] + ' ' + str(row[1]) + ' B':<22} "
              f"{f'{np.median(d):.1f} µs ({algorithms[0]})':>24} "
              f"{f'{np.median(t):.1f} µs ({algorithms[1]})':>24}  {ratio:>12.2f}  "
              f"{min(t) / min(d):>7.2f}  {'holds' if ok else 'does not hold'}")
        found.append({"collective": row[0], "size": row[1], "default_algorithm": algorithms[0],
                      "tuned_algorithm": algorithms[1], "changed": changed,
                      "default_us": [round(x, 3) for x in d],
                      "tuned_us": [round(x, 3) for x in t],
                      "median_ratio": round(ratio, 3), "holds": ok})
    print(f"load average {min(load):.1f}-{max(load):.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"file": path, "ranks": args.nprocs, "date": started,
             "command": " ".join(["python", *sys.argv]), "loadavg": load, "rows": found},
            indent=1) + "\n")


if __name__ == "__main__":
    main()
