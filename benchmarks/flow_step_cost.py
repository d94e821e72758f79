"""CPU microseconds per step of the compiled flow model's loop, over a fixed share of a run.

A windowed alltoall at thousands of ranks runs for many minutes; its loop costs about the same
per step throughout, so the cost is measured between two step counts and the run stopped there
(the figures of `docs/simulation.md`'s speed section). The scenario is the SMPI cross-check's:
``linear`` alltoall, 64 KiB per pair, 2 GB/s links, no overhead or hop latency, SimGrid's
tie-break, column-major placement.

    python benchmarks/flow_step_cost.py --topology torus:16x16x16 --order random \\
        --window 1 --from-step 500000 --to-step 1300000
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
import time

import collops.sim.api as api
from collops.model.cli import network_overrides, topology_from_arg
from collops.sim import flow_compiled
from collops.sim.flow import parse_maxmin

NET = "overhead=0,hop_latency=0,tie_break=simgrid"


class _Enough(Exception):
    """Raised from the repair log once the last step to measure has run."""


def main() -> int:
    """Run the scenario until ``--to-step`` and print CPU µs per step since ``--from-step``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default="torus:16x16x8")
    ap.add_argument("--order", default="random", choices=("random", "shift", "plain"))
    ap.add_argument("--window", type=int, default=1)
    ap.add_argument("--from-step", type=int, default=300_000)
    ap.add_argument("--to-step", type=int, default=1_000_000)
    ap.add_argument("--maxmin", default="exact", help="exact, approx or approx:eps=E")
    ap.add_argument("--every", type=int, default=0,
                    help="print a line per this many steps: CPU µs per step and flows re-filled "
                         "per rate update since the last line (0: none)")
    args = ap.parse_args()
    marks: list[tuple[int, float, int, int]] = []  # steps, CPU s, rate updates, re-filled
    shown: list[tuple[int, float, int, int]] = []  # the mark of the last line printed

    def log(done: int, updates: int, refilled: int) -> None:
        marks.append((done, time.process_time(), updates, refilled))
        if not shown:
            shown.append(marks[-1])
        elif args.every and done - shown[-1][0] >= args.every:
            _print_span(f"steps {shown[-1][0]}-{done}", shown[-1], marks[-1], flush=True)
            shown.append(marks[-1])
        if done >= args.to_step:
            raise _Enough

    run = flow_compiled.run
    flow_compiled.run = functools.partial(run, repair_log=log)  # type: ignore[assignment]
    topology = topology_from_arg(args.topology, network_overrides([NET]))
    with contextlib.suppress(_Enough):
        result = api.simulate("alltoall", "linear", topology, params={"order": args.order},
                     size_bytes=65536, model="flow", placement="column-major", gamma=0.0,
                     window=args.window, progress=False, maxmin_eps=parse_maxmin(args.maxmin))
        print(f"the whole run: {result.time_s * 1e3:.6f} ms simulated")
    flow_compiled.run = run  # type: ignore[assignment]
    start = next((m for m in marks if m[0] >= args.from_step), None)
    if start is None or marks[-1][0] == start[0]:
        print("the run ended before the steps to measure", file=sys.stderr)
        return 1
    _print_span(f"{args.topology} {args.order} window {args.window} {args.maxmin}: over steps "
                f"{start[0]}-{marks[-1][0]}", start, marks[-1])
    print(f"CPU {marks[-1][1]:.1f} s in all")
    return 0


def _print_span(label: str, start: tuple[int, float, int, int],
                end: tuple[int, float, int, int], flush: bool = False) -> None:
    steps, updates = end[0] - start[0], end[2] - start[2]
    per_step = (end[1] - start[1]) / steps * 1e6
    refilled = (end[3] - start[3]) / updates if updates else 0.0
    print(f"{label}: {per_step:.2f} us of CPU per step, {refilled:.1f} flows re-filled per "
          f"rate update ({updates / steps:.3f} updates per step)", flush=flush)


if __name__ == "__main__":
    sys.exit(main())
