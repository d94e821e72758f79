"""``collops sim``: predict one collective call on a modelled network, from the command line.

The command is a thin layer over `collops.sim.simulate`: it parses the user's strings (sizes
such as ``64K``, node lists such as ``3,10-12``, ``k=v`` parameters), runs every requested
*variant* × size, and prints the prediction beside the closed-form estimate of
`collops.model.closed_form`. A variant is an algorithm name with optional parameters of its
own, ``ALGO[:k=v[:k=v…]]`` — so ``--compare random_chunked,linear:rank_order=1`` sets the
seed's random order against the naive rank order in one run. ``--param k=v`` applies to every
variant whose algorithm declares ``k`` (and is an error when none does). A variant's label,
used in the table, the JSON records and the plots, is the text the user wrote for it.

Every error a user can cause (unknown topology, bad size string, unknown algorithm or
parameter, an excluded node that does not exist) is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..algorithms import COLLECTIVES, get_algorithm
from ..errors import CollopsError
from ..model.cli import UsageError, network_overrides, parse_assignments, topology_from_arg
from ..topology import Topology
from .api import DEFAULT_GAMMA, MODELS, SimResult, parse_nodes, parse_size, parse_sizes, simulate
from .auto import AUTO, choose, network_for
from .flow import parse_maxmin

PLOT_KINDS = ("auto", "time", "ratio", "heatmap", "hotspots")
#: ``--progress`` -> `simulate`'s ``progress`` (None: when stderr is a terminal)
PROGRESS = {"auto": None, "on": True, "off": False}
#: the label of the run ``--in-network`` adds (a reduction combined in the switches)
IN_NETWORK_LABEL = "in-network"
SWITCHING = ("packet", "message")


@dataclass(frozen=True)
class Variant:
    """One algorithm to simulate, with the parameters given for it alone."""

    label: str
    algorithm: str
    params: Mapping[str, str]


def parse_variant(text: str) -> Variant:
    """``"linear:rank_order=1"`` → Variant("linear:rank_order=1", "linear", {"rank_order": "1"})."""
    name, *assignments = [t.strip() for t in text.strip().split(":")]
    if not name:
        raise UsageError(f"algorithm {text!r} has no name (use ALGO[:k=v[:k=v…]])")
    return Variant(text.strip(), name, parse_assignments(assignments, "parameter"))


def check_collective(name: str) -> str:
    """The collective's name, or a one-line error listing the known ones."""
    if name not in COLLECTIVES:
        raise UsageError(f"unknown collective {name!r} (one of {', '.join(COLLECTIVES)})")
    return name


def variants(algorithm: str | None, compare: str | None) -> list[Variant]:
    """The variants to run: ``--algorithm`` first, then every ``--compare`` entry."""
    texts = ([algorithm] if algorithm else []) + [
        t for t in (compare or "").split(",") if t.strip()]
    if not texts:
        raise UsageError("give --algorithm ALGO or --compare ALGO,ALGO")
    return [parse_variant(t) for t in texts]


def resolve_params(collective: str, chosen: Sequence[Variant],
                   common: Mapping[str, str]) -> list[dict[str, str]]:
    """Each variant's parameters: the ``--param`` values its algorithm declares, then its own."""
    declared = [{p.name for p in get_algorithm(collective, v.algorithm).params} for v in chosen]
    unused = [name for name in common if not any(name in d for d in declared)]
    if unused:
        names = ", ".join(sorted({v.algorithm for v in chosen}))
        raise UsageError(f"--param {unused[0]}: no chosen algorithm ({names}) takes it")
    return [{**{k: v for k, v in common.items() if k in d}, **dict(v.params)}
            for v, d in zip(chosen, declared, strict=True)]


def check_excluded(nodes: frozenset[int], topology: Topology,
                   option: str = "--exclude") -> frozenset[int]:
    """The excluded (or idle) node ids, each checked to exist in ``topology``."""
    bad = sorted(n for n in nodes if not 0 <= n < topology.num_nodes)
    if bad:
        raise UsageError(f"{option}: node {bad[0]} does not exist in {topology} "
                         f"(nodes 0..{topology.num_nodes - 1})")
    return nodes


# -- running ---------------------------------------------------------------------------------
def closed_form_for(result: SimResult, topology: Topology, algorithm: str) -> float | None:
    """The closed-form time of the result's call (seed 004 where exact, else α-β; a call the
    switches combine is its in-network formula, `collops.sim.innetwork`), or None."""
    from ..model import closed_form
    if result.source == "in-network":
        return result.time_s
    switching = "packet" if result.model == "packet" else "cut-through"
    try:
        return closed_form(result.collective, algorithm, topology, result.nprocs, result.size,
                           switching)
    except CollopsError:
        return None


@dataclass(frozen=True, eq=False)
class Run:
    """One simulated variant at one size, with its closed-form estimate."""

    result: SimResult
    closed_form_s: float | None
    #: for ``--algorithm auto``: the selection table behind the choice
    explanation: str = ""

    def record(self) -> dict[str, Any]:
        """The documented JSON record of this run."""
        return self.result.to_json_dict(self.closed_form_s)


def run_all(args: argparse.Namespace) -> tuple[list[Run], Topology]:
    """Parse the arguments and simulate every variant × size."""
    collective = check_collective(args.collective)
    if args.gamma < 0:
        raise UsageError(f"--gamma must be >= 0, not {args.gamma}")
    if args.model not in MODELS:
        raise UsageError(f"unknown model {args.model!r} (one of {', '.join(MODELS)})")
    if args.window is not None and args.window < 0:
        raise UsageError(f"--window must be >= 0, not {args.window}")
    try:
        args.maxmin_eps = parse_maxmin(args.maxmin)
    except ValueError as e:
        raise UsageError(f"--maxmin: {e}") from None
    if args.maxmin_eps and args.model != "flow":
        raise UsageError("--maxmin approx applies to --model flow only")
    if args.switching not in SWITCHING:
        raise UsageError(f"unknown switching {args.switching!r} (one of {', '.join(SWITCHING)})")
    topology = topology_from_arg(args.topology, network_overrides(args.net))
    sizes = parse_sizes(args.sizes) if args.sizes else [parse_size(args.size)]
    if not sizes:
        raise UsageError("--sizes lists no size")
    excluded = check_excluded(parse_nodes(args.exclude or ""), topology)
    idle = check_excluded(parse_nodes(args.idle or ""), topology, "--idle")
    chosen = variants(args.algorithm, args.compare)
    named = [v for v in chosen if v.algorithm != AUTO]
    params = resolve_params(collective, named, parse_assignments(args.param, "--param"))
    if args.in_network and not named:
        raise UsageError("--in-network needs a named algorithm beside --algorithm auto")
    own_params = iter(params)
    runs = []
    for variant in chosen:
        if variant.algorithm == AUTO:
            runs += auto_runs(args, collective, topology, sizes, excluded, idle)
            continue
        own = next(own_params)
        for size in sizes:
            result = simulate(collective, variant.algorithm, topology, args.nprocs, size,
                              model=args.model, params=own, excluded=excluded,
                              placement=args.placement, seed=args.seed,
                              switching=args.switching, gamma=args.gamma, in_network=False,
                              window=args.window, progress=PROGRESS[args.progress], idle=idle,
                              maxmin_eps=args.maxmin_eps)
            form = closed_form_for(result, topology, variant.algorithm)
            runs.append(Run(dataclasses.replace(result, algorithm=variant.label), form))
    if args.in_network:  # one more run per size: the reduction combined in the switches
        for size in sizes:
            result = simulate(collective, named[0].algorithm, topology, args.nprocs, size,
                              model=args.model, params=params[0], excluded=excluded,
                              placement=args.placement, seed=args.seed,
                              switching=args.switching, gamma=args.gamma, in_network=True,
                              progress=PROGRESS[args.progress], idle=idle)
            runs.append(Run(dataclasses.replace(result, algorithm=IN_NETWORK_LABEL), None))
    return runs, topology


def auto_runs(args: argparse.Namespace, collective: str, topology: Topology,
              sizes: Sequence[int], excluded: frozenset[int], idle: frozenset[int]
              ) -> list[Run]:
    """``--algorithm auto``: at each size the algorithm selection picks on this network, in
    this model (`collops.sim.auto`), labelled ``auto=NAME``."""
    nranks = args.nprocs if args.nprocs is not None else len(
        [n for n in topology.compute_nodes.tolist() if n not in excluded | idle])
    network = network_for(topology, nranks, args.model, placement=args.placement,
                          seed=args.seed, options=dict(
                              excluded=excluded, idle=idle, seed=args.seed,
                              switching=args.switching,
                              gamma=args.gamma, window=args.window,
                              progress=PROGRESS[args.progress], maxmin_eps=args.maxmin_eps))
    runs = []
    for size in sizes:
        picked = choose(collective, size, network)
        form = closed_form_for(picked.result, topology, picked.algorithm)
        runs.append(Run(dataclasses.replace(picked.result, algorithm=f"auto={picked.algorithm}"),
                        form, picked.explanation))
    return runs


def results_table(runs: Sequence[Run]) -> str:
    """The runs as a text table: prediction and closed form side by side, then link loads."""
    from .api import _bytes, _rate, _secs
    width = max([len("algorithm")] + [len(r.result.algorithm) for r in runs]) + 2
    lines = [f"{'algorithm':<{width}}{'size':>9}{'ranks':>7}{'model':>12}{'time':>13}"
             f"{'closed form':>13}{'bandwidth':>14}{'max link':>12}{'mean link':>12}"]
    for run in runs:
        r, cf = run.result, run.closed_form_s
        lines.append(
            f"{r.algorithm:<{width}}{r.size:>9}{r.nprocs:>7}{r.model:>12}{_secs(r.time_s):>13}"
            f"{_secs(cf) if cf is not None else '-':>13}{_rate(r.bandwidth_Bps):>14}"
            f"{_bytes(r.max_link_load_bytes):>12}{_bytes(r.mean_link_load_bytes):>12}")
    return "\n".join(lines)


def hotspot_table(runs: Sequence[Run]) -> str:
    """Per run: rounds, the hottest round's hot link load and the mean of the rounds' peaks."""
    from .api import _bytes, _secs
    width = max([len("algorithm")] + [len(r.result.algorithm) for r in runs]) + 2
    lines = [f"{'algorithm':<{width}}{'size':>9}{'rounds':>8}{'peak round':>13}"
             f"{'mean peak':>13}{'busiest round':>15}"]
    for run in runs:
        rounds = run.result.phase_hotspots
        peaks = rounds.hot_load_bytes
        finite = rounds.time_s[np.isfinite(rounds.time_s)] if len(rounds) else rounds.time_s
        slowest = _secs(float(finite.max())) if len(finite) else "-"
        lines.append(f"{run.result.algorithm:<{width}}{run.result.size:>9}{len(rounds):>8}"
                     f"{_bytes(float(peaks.max()) if len(peaks) else 0.0):>13}"
                     f"{_bytes(float(peaks.mean()) if len(peaks) else 0.0):>13}{slowest:>15}")
    return "\n".join(lines)


def describe(runs: Sequence[Run], topology: Topology, excluded: str | None,
             window: int | None = None, idle: str | None = None) -> str:
    """The heading above the table."""
    r = runs[0].result
    out = f"{r.collective} on {topology} ({r.nprocs} ranks), {r.model} model"
    if window is not None:
        out += f", window {window}" if window else ", window 0 (as issued)"
    if excluded:
        out += f", nodes {excluded} excluded"
    if idle:
        out += f", nodes {idle} idle"
    return out


# -- plots -----------------------------------------------------------------------------------
def _with_suffix(path: Path, suffix: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9_.=-]+", "_", suffix)
    return path.with_name(f"{path.stem}-{slug}{path.suffix}")


def plot_hotspots_overlay(results: Sequence[SimResult]) -> Any:
    """The hottest link's load in every round (phase, injection slot) of the congestion
    model, or in every time window of the flow and packet models, one line per run."""
    from .plots import _pyplot, round_axis
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    label = "round (phase, injection slot)"
    timed = results[0].model != "congestion"  # windows of equal width in simulated time
    for r in results:
        spots = r.phase_hotspots
        x, label = round_axis(spots.time_s, "round (phase, injection slot)")
        if timed and spots.mean_load_bytes is not None:  # rates: windows differ between runs
            width = np.where(spots.time_s > 0, spots.time_s, np.inf)
            line, = ax.plot(x, spots.hot_load_bytes / width, drawstyle="steps-post",
                            label=f"{r.algorithm}: hottest link")
            ax.plot(x, spots.mean_load_bytes / width, drawstyle="steps-post", linestyle="--",
                    color=line.get_color(), label=f"{r.algorithm}: mean over links")
        else:
            ax.plot(x, spots.hot_load_bytes, drawstyle="steps-post", label=r.algorithm)
    ax.set_yscale("log")
    ax.set_xlabel("simulated time at the window's start (s)" if timed else label)
    ax.set_ylabel("link throughput in the time window (B/s)" if timed
                  else "hottest link load in the round (bytes)")
    r0 = results[0]
    ax.set_title(f"{r0.collective} on {r0.topology}, {r0.size} B, {r0.model} model: hot spot "
                 + ("over time" if timed else "per round"))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


def draw_plots(path_text: str, kind: str, runs: Sequence[Run], topology: Topology,
               axis: int) -> list[Path]:
    """Write the requested figure(s); returns the files written."""
    from . import plots
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install 'collops[plot]'") from None
    results = [run.result for run in runs]
    path = Path(path_text)
    sizes = sorted({r.size for r in results})
    grid = len(getattr(topology, "dims", ())) >= 2
    if kind == "auto":
        kind = "time" if len(sizes) > 1 else ("heatmap" if grid and len(results) == 1
                                              else "hotspots")
    if kind == "time":
        plots.save(plots.plot_time_vs_size(results), str(path))
        return [path]
    if kind == "ratio":
        if len({r.algorithm for r in results}) < 2:
            raise UsageError("--plot-kind ratio compares variants: give --compare")
        plots.save(plots.plot_ratios(results), str(path))
        return [path]
    if kind == "hotspots":
        written = []
        for size in sizes:
            target = path if len(sizes) == 1 else _with_suffix(path, str(size))
            plots.save(plot_hotspots_overlay([r for r in results if r.size == size]),
                       str(target))
            written.append(target)
        return written
    if not grid:
        raise UsageError(f"--plot-kind heatmap needs a grid of two or more dimensions, "
                         f"not {topology}")
    if not 0 <= axis < len(topology.dims):  # type: ignore[attr-defined]
        raise UsageError(f"--plane-axis {axis} is not a dimension of {topology}")
    written = []
    for r in results:
        target = path if len(results) == 1 else _with_suffix(
            path, r.algorithm + (f"-{r.size}" if len(sizes) > 1 else ""))
        plots.save(plots.plot_link_heatmap(r, topology, axis), str(target))
        written.append(target)
    return written


# -- the command -----------------------------------------------------------------------------
def _sim_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--collective", default="alltoallv", help="the collective (default alltoallv)")
    p.add_argument("--algorithm", default=None,
                   help="ALGO[:k=v[:k=v…]] to simulate, or auto: the algorithm selection "
                        "picks on this network in this model (its table is printed)")
    p.add_argument("--compare", default=None, help="more variants: ALGO[:k=v…],ALGO[:k=v…],…")
    p.add_argument("--topology", required=True,
                   help="network spec (torus:8x8x8, tree:2:64, …) or a JSON/TOML file")
    p.add_argument("--size", default="1K", help="bytes per rank contribution (per pair for "
                   "alltoall), e.g. 4096, 64K, 1M (default 1K)")
    p.add_argument("--sizes", default=None, help="several sizes, e.g. 1K,4K,16K (overrides --size)")
    p.add_argument("--model", default="congestion",
                   help="congestion (default): lockstep rounds, each as slow as its busiest "
                        "link — exact for send-receive rounds and for everything posted at "
                        "once, not for free-running windowed sends; flow: event-driven, every "
                        "message a flow whose rate is max-min fair, re-shared as flows start "
                        "and end; packet: every packet through FIFO link queues")
    p.add_argument("--maxmin", default="exact", metavar="exact|approx[:eps=E]",
                   help="the flow model's max-min repair: exact (default), or approx: a flow "
                        "keeps its rate while a link within a relative E of saturation (E "
                        "default 0.05) is its bottleneck (docs/simulation.md)")
    p.add_argument("--window", type=int, default=None, metavar="W",
                   help="at most W of a rank's sends in flight (flow: until the last byte "
                        "arrived; congestion: W per injection slot); 0: as the schedule "
                        "issues them; default: flow 0, congestion the node's links. An "
                        "algorithm's throttle=W is the same window")
    p.add_argument("--switching", default="packet",
                   help="packet model: packet (default) or message (store-and-forward)")
    p.add_argument("--in-network", action="store_true",
                   help="reduce/allreduce on a combining tree: also run the reduction combined "
                        "in the switches (labelled in-network); the named algorithms always run "
                        "as their own schedules")
    p.add_argument("--exclude", default=None,
                   help="node ids out of the group, e.g. 3,10-12 (their links stay; routes "
                        "detour around them)")
    p.add_argument("--idle", default=None,
                   help="node ids out of the group whose routers still forward (routes "
                        "cross them unchanged)")
    p.add_argument("--param", action="append", default=[], metavar="K=V",
                   help="algorithm parameter for every variant that takes it (repeatable)")
    p.add_argument("--net", action="append", default=[], metavar="K=V",
                   help="network parameter: bandwidth, hop_latency, packet_size, header_bytes, "
                        "overhead, tie_break=plus|simgrid (repeatable)")
    p.add_argument("-n", "--nprocs", type=int, default=None,
                   help="ranks (default: every compute node not excluded)")
    p.add_argument("--placement", default="row-major",
                   help="row-major (default), column-major (a grid with dimension 0 fastest, "
                        "SimGrid's numbering), random, or a file of node ids")
    p.add_argument("--seed", type=int, default=0, help="seed of random placement and the packet "
                   "model (the algorithm's own seed is --param seed=N)")
    p.add_argument("--gamma", type=float, default=DEFAULT_GAMMA,
                   help=f"seconds per byte of local copy/reduce steps (default {DEFAULT_GAMMA:g}; "
                        "0 leaves them out, as the closed forms do)")
    p.add_argument("--progress", default="auto", choices=("auto", "on", "off"),
                   help="progress bar on stderr for runs longer than 2 s: auto (default: when "
                        "stderr is a terminal), on, off")
    p.add_argument("--hotspots", action="store_true",
                   help="also print every run's per-round hot spots")
    p.add_argument("--json", default=None, metavar="FILE", help="write the JSON records here")
    p.add_argument("--plot", default=None, metavar="FILE.png", help="draw a figure")
    p.add_argument("--plot-kind", default="auto", choices=PLOT_KINDS,
                   help="time (vs size), ratio (each variant's time over the first's, per "
                        "size), heatmap (per torus plane), hotspots (per round, against "
                        "time where rounds are timed); auto picks one")
    p.add_argument("--plane-axis", type=int, default=0,
                   help="heat map: the dimension fixed in each panel (default 0)")


def cmd_sim(args: argparse.Namespace) -> int:
    """Predict a collective's time and link loads on a modelled network."""
    try:
        runs, topology = run_all(args)
        print(describe(runs, topology, args.exclude, args.window, args.idle))
        for run in runs:
            if run.explanation:
                print(f"{run.result.algorithm} at {run.result.size} bytes:\n{run.explanation}\n")
        print(results_table(runs))
        if args.hotspots:
            print()
            print(hotspot_table(runs))
        if args.json:
            Path(args.json).write_text(json.dumps([r.record() for r in runs], indent=1) + "\n")
        if args.plot:
            for path in draw_plots(args.plot, args.plot_kind, runs, topology, args.plane_axis):
                print(f"wrote {path}")
    except (CollopsError, OSError) as exc:
        print(f"collops sim: error: {exc}", file=sys.stderr)
        return 2
    return 0


#: the subcommand this module adds to ``collops``: name, argument set-up, handler
COMMAND = ("sim", _sim_args, cmd_sim)
