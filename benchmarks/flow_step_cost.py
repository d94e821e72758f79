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
import sys
import time
from collections.abc import Callable, Iterator

import collops.sim.api as api
from collops.model.cli import network_overrides, topology_from_arg
from collops.sim.flow import parse_maxmin

NET = "overhead=0,hop_latency=0,tie_break=simgrid"


class _Enough(Exception):
    """Raised from the progress callback once the last step to measure has run."""


def main() -> int:
    """Run the scenario until ``--to-step`` and print CPU µs per step since ``--from-step``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default="torus:16x16x8")
    ap.add_argument("--order", default="random", choices=("random", "shift", "plain"))
    ap.add_argument("--window", type=int, default=1)
    ap.add_argument("--from-step", type=int, default=300_000)
    ap.add_argument("--to-step", type=int, default=1_000_000)
    ap.add_argument("--maxmin", default="exact", help="exact, approx or approx:eps=E")
    args = ap.parse_args()
    marks: list[tuple[int, float]] = []

    @contextlib.contextmanager
    def bar(*_args: object, **_kwargs: object) -> Iterator[Callable[[int, int], None]]:
        def update(done: int, total: int) -> None:
            code = sys._getframe(1).f_code  # the compiled loop reports through flow_compiled.run
            if not (code.co_filename.endswith("flow_compiled.py") and code.co_name == "run"):
                return
            marks.append((done, time.process_time()))
            if done >= args.to_step:
                raise _Enough
        yield update

    api.progress_bar = bar  # type: ignore[assignment]
    topology = topology_from_arg(args.topology, network_overrides([NET]))
    with contextlib.suppress(_Enough):
        api.simulate("alltoall", "linear", topology, params={"order": args.order},
                     size_bytes=65536, model="flow", placement="column-major", gamma=0.0,
                     window=args.window, progress=True, maxmin_eps=parse_maxmin(args.maxmin))
    start = next((m for m in marks if m[0] >= args.from_step), None)
    if start is None or marks[-1][0] == start[0]:
        print("the run ended before the steps to measure", file=sys.stderr)
        return 1
    end = marks[-1]
    per_step = (end[1] - start[1]) / (end[0] - start[0]) * 1e6
    print(f"{args.topology} {args.order} window {args.window} {args.maxmin}: "
          f"{per_step:.2f} us of CPU per step over steps {start[0]}-{end[0]}; "
          f"CPU {end[1]:.1f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
