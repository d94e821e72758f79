"""``collops show``: a picture of one algorithm's schedule — text by default, ``--png FILE``
for a drawing, ``--topology T`` for the same steps in simulated time on a network."""

from __future__ import annotations

import argparse
import sys

import numpy as np

from ..algorithms.registry import get_algorithm
from ..algorithms.spec import COLLECTIVES
from ..errors import CollopsError
from ..sim.api import call_specs, parse_size, run_program
from ..sim.program import program_from_schedules
from ..topology import parse_topology, place
from .plot import render_png
from .text import render_text
from .timeline import Timeline, timeline

#: beyond this many ranks a picture is unreadable; the text table still works
MAX_PNG_RANKS = 64


def _show_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--collective", required=True, choices=COLLECTIVES)
    p.add_argument("--algorithm", required=True, help="the algorithm to draw")
    p.add_argument("-n", "--nprocs", type=int, default=4, help="ranks (default 4)")
    p.add_argument("--size", default="16",
                   help="bytes per rank's contribution (per pair for alltoall), e.g. 16, 4K")
    p.add_argument("--root", type=int, default=0, help="root of a rooted collective")
    p.add_argument("--param", action="append", default=[], metavar="K=V",
                   help="an algorithm parameter (repeatable)")
    p.add_argument("--topology", default=None,
                   help="draw in simulated time on this network (e.g. torus:2x2x2, ring:8)")
    p.add_argument("--png", default=None, metavar="FILE", help="write a picture (matplotlib)")


def build_timeline(collective: str, algorithm: str, nprocs: int, size: int, root: int = 0,
                   params: dict[str, str] | None = None,
                   topology: str | None = None) -> Timeline:
    """The placed steps of ``algorithm`` for one call; in simulated time on ``topology``."""
    alg = get_algorithm(collective, algorithm, call="collops show")
    if alg.native is not None or alg.needs:
        raise CollopsError(f"collops show: {collective}.{algorithm} is a transport's own "
                           "collective, not a schedule; there is nothing to draw")
    if not 0 <= root < nprocs:
        raise CollopsError(f"collops show: --root {root} is not a rank of {nprocs}")
    specs = [s.with_(root=root) for s in call_specs(collective, nprocs, size)]
    alg.check(specs[0])
    schedules = alg.build_all(specs, params or {})
    title = f"{collective}.{algorithm} on {nprocs} ranks, {size} B per rank"
    phase_times = None
    if topology is not None:
        topo = parse_topology(topology)
        program = program_from_schedules(schedules, 1)
        outcome = run_program(program, topo, place(topo, nprocs))
        per_phase = outcome.rounds.per_phase()
        levels = int(max(program.msg_phase.max(initial=0),
                         program.local_level.max(initial=0))) + 2
        phase_times = np.zeros(levels)
        phase_times[per_phase.phase] = per_phase.time_s
        title += f", simulated on {topology} ({outcome.time_s * 1e6:.2f} µs)"
    return timeline(schedules, 1, title, phase_times)


def cmd_show(args: argparse.Namespace) -> int:
    """Draw an algorithm's schedule: a lane per rank, a box per step, arrows for messages."""
    try:
        params = dict(kv.split("=", 1) for kv in args.param)
        t = build_timeline(args.collective, args.algorithm, args.nprocs, parse_size(args.size),
                           args.root, params, args.topology)
        if args.png:
            if args.nprocs > MAX_PNG_RANKS:
                raise CollopsError(f"collops show: --png draws at most {MAX_PNG_RANKS} ranks "
                                   "(use the text table)")
            render_png(t, args.png)
            print(f"wrote {args.png}")
        else:
            print(render_text(t))
    except (CollopsError, ValueError) as exc:
        print(f"collops: error: {exc}", file=sys.stderr)
        return 2
    return 0


COMMAND = ("show", _show_args, cmd_show)
