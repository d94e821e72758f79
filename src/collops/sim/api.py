"""``simulate``: one collective call, one algorithm, one network, one model → a `SimResult`.

The call is described as a user would make it — collective, algorithm, size in bytes per
rank contribution (per pair for alltoall) — and the registry's builders make every rank's
schedule, exactly the schedules the engine runs. Ranks are placed on compute nodes
(``placement``); ``excluded`` nodes are taken out of the group (fewer ranks) while their
links stay in the network, and routes detour around them; ``idle`` nodes are out of the group
too, but their routers still forward, so routes cross them unchanged.

Which path produced the messages is recorded in ``SimResult.source``:

* ``"registry"`` — schedules built by the registry and levelled (`collops.sim.program`);
* ``"vectorised"`` — a vectorised generator mirroring a step-by-step registry builder
  (`collops.sim.fastpath`), used by the congestion model for large regular calls;
* ``"vectorised steps"`` — the registry's whole program (steps and messages) of a large
  ``linear`` or ``random_chunked`` alltoall written as arrays (`collops.sim.step_programs`),
  used by the event-driven models (flow, packet);
* ``"in-network"`` — a reduction combined in the switches (`collops.sim.innetwork`).

A named algorithm is simulated as that algorithm's schedule, on every network: a reduce or
allreduce by ``ring`` on a combining tree is the ring's messages. The switches reduce only for
an algorithm whose metadata asks for in-network reduction (``gather.or_combine``, which
declares the ``in_network_reduction`` resource), or when the caller asks for it explicitly
(``in_network=True``; ``collops sim --in-network``) for a reduce or allreduce.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..algorithms import CallSpec, get_algorithm, make_spec
from ..algorithms.spec import REDUCING
from ..errors import ArgumentError
from ..ops import SUM
from .congestion import CongestionOutcome, RoundStats, congestion_model
from .credit import CreditPacketSimulation
from .fastpath import fast_generator
from .flow import flow_model
from .innetwork import IN_NETWORK_RESOURCE, SWEEPING, in_network_reduction
from .packet import PacketOutcome, PacketSimulation
from .program import Program, program_from_schedules
from .progress import progress_bar
from .step_programs import step_generator
from .timeline import hops_to_windows

MODELS = ("congestion", "flow", "packet")
#: default seconds per byte of a local copy or reduce step (the registry's CostModel γ)
DEFAULT_GAMMA = 2e-10
#: the congestion model uses a vectorised generator from this many messages on
FAST_PATH_MESSAGES = 1 << 16
JSON_FIELDS = ("collective", "algorithm", "topology", "nprocs", "size", "model", "time_s",
               "max_link_load_bytes", "mean_link_load_bytes", "closed_form_s")


@dataclass(frozen=True, eq=False)
class SimResult:
    """The prediction for one simulated call."""

    collective: str
    algorithm: str
    topology: str
    nprocs: int
    size: int
    model: str
    time_s: float
    bandwidth_Bps: float
    max_link_load_bytes: float
    mean_link_load_bytes: float
    link_loads: np.ndarray = field(repr=False)
    phase_hotspots: RoundStats = field(repr=False)
    source: str = "registry"
    messages: int = 0
    total_bytes: int = 0
    placement: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    wall_s: float = 0.0

    def to_json_dict(self, closed_form_s: float | None = None) -> dict[str, Any]:
        """The documented JSON record (``closed_form_s`` is supplied by the caller)."""
        return {
            "collective": self.collective, "algorithm": self.algorithm,
            "topology": self.topology, "nprocs": int(self.nprocs), "size": int(self.size),
            "model": self.model, "time_s": float(self.time_s),
            "max_link_load_bytes": float(self.max_link_load_bytes),
            "mean_link_load_bytes": float(self.mean_link_load_bytes),
            "closed_form_s": None if closed_form_s is None else float(closed_form_s),
        }


def call_specs(collective: str, nranks: int, size_bytes: int) -> list[CallSpec]:
    """Every rank's call spec for ``size_bytes`` per rank contribution (bytes as uint8)."""
    c, p, n = collective, int(nranks), int(size_bytes)
    dt = np.uint8
    if c == "barrier":
        spec = make_spec(c, p, dt)
    elif c in ("scatterv", "gatherv", "allgatherv", "reduce_scatter"):
        spec = make_spec(c, p, dt, counts=[n] * p, op=SUM if c in REDUCING else None)
    elif c == "alltoallv":
        spec = make_spec(c, p, dt, sendcounts=[n] * p, recvcounts=[n] * p)
    else:
        spec = make_spec(c, p, dt, count=n, op=SUM if c in REDUCING else None)
    return [spec] * p


def _topology(topology: Any) -> Any:
    if isinstance(topology, str):
        from ..topology import parse_topology
        return parse_topology(topology)
    return topology


def _needs_in_network(alg: Any) -> bool:
    wanted = set(getattr(alg, "resources", ())) | set(getattr(alg, "needs", ()))
    return IN_NETWORK_RESOURCE in wanted


def simulate(
    collective: str,
    algorithm: str,
    topology: Any,
    nranks: int | None = None,
    size_bytes: int = 0,
    model: str = "congestion",
    params: Mapping[str, Any] | None = None,
    excluded: Iterable[int] = frozenset(),
    placement: str | Sequence[int] = "row-major",
    seed: int = 0,
    *,
    specs: Sequence[CallSpec] | None = None,
    gamma: float = DEFAULT_GAMMA,
    switching: str = "packet",
    ordering: str = "issue",
    in_network: bool | None = None,
    fast: bool | None = None,
    progress: bool | None = None,
    window: int | None = None,
    idle: Iterable[int] = frozenset(),
    maxmin_eps: float = 0.0,
) -> SimResult:
    """Simulate one call of ``collective`` with ``algorithm`` on ``topology``.

    ``params`` are the algorithm's parameters; ``specs`` (one per rank) replace the specs
    derived from ``size_bytes``; ``in_network=True`` combines a reduce or allreduce in the
    switches of a combining tree instead of running the algorithm's schedule (None or False:
    only an algorithm that asks for in-network reduction gets it); ``fast`` (None:
    automatic) allows the vectorised generators; ``window`` is how many of a rank's sends
    may be in flight (None: the model's default; see `run_program`). An algorithm's own
    ``throttle`` parameter is that window. ``maxmin_eps`` > 0: the flow model's approximate
    max-min repair (`collops.sim.flow.parse_maxmin`).
    """
    wall = time.monotonic()
    if model not in MODELS:
        raise ArgumentError("simulate", "model", model, f"one of {', '.join(MODELS)}")
    from ..topology import place
    topo = _topology(topology)
    excluded = frozenset(int(x) for x in excluded)
    outside = excluded | frozenset(int(x) for x in idle)
    if nranks is None:
        nranks = len([n for n in topo.compute_nodes.tolist() if n not in outside])
    nodes = place(topo, int(nranks), placement, seed, outside)
    alg = get_algorithm(collective, algorithm)
    rank_specs = list(specs) if specs is not None else call_specs(collective, nranks, size_bytes)
    if len(rank_specs) != nranks:
        raise ArgumentError("simulate", "specs", len(rank_specs), f"need one per rank ({nranks})")
    alg.check(rank_specs[0])
    window = window_for(algorithm, alg.resolve(params or {}), window)
    common = dict(collective=collective, algorithm=algorithm, topology=str(topo.spec),
                  nprocs=int(nranks), size=int(size_bytes), model=model)

    if _use_in_network(collective, alg, topo, in_network):
        spec = rank_specs[0]
        nbytes = (spec.total if spec.counts else spec.count) * spec.itemsize
        outcome = in_network_reduction(topo, nodes, "allreduce" if collective == "allreduce"
                                       else "reduce", nbytes, spec.root, excluded)
        return _result(common, outcome, nbytes * nranks, nranks, "in-network", nodes, wall)

    with progress_bar(f"{collective}.{algorithm} on {topo.spec}", progress) as update:
        program = _program(collective, algorithm, alg, rank_specs, params or {}, model, fast,
                           update)
        outcome = run_program(program, topo, nodes, model, excluded=excluded, gamma=gamma,
                              ordering=ordering, switching=switching, seed=seed,
                              window=window, progress=update, maxmin_eps=maxmin_eps)
    return _result(common, outcome, program.total_bytes, program.num_messages, program.source,
                   nodes, wall)


def run_program(program: Program, topology: Any, placement: np.ndarray,
                model: str = "congestion", *, excluded: Iterable[int] = frozenset(),
                gamma: float = DEFAULT_GAMMA, ordering: str = "issue",
                switching: str = "packet", seed: int = 0, window: int | None = None,
                progress: Any = None, maxmin_eps: float = 0.0) -> CongestionOutcome:
    """Run one model on a ready program (placement: node of every rank).

    ``window``: at most that many of a rank's sends in flight. The flow model counts a send
    in flight until its last byte has arrived (None or 0: no limit); the congestion model
    slots a rank's messages ``window`` at a time (None: the node's injection links; 0: a
    whole phase at once). The packet model with a window, or with finite buffers
    (``buffer_packets`` of the network), is the buffered one (`collops.sim.credit`: input
    queues, credits, a send in flight until its last packet arrived); without either it
    queues packets at the links without bound (`collops.sim.packet`).
    """
    excluded = frozenset(int(x) for x in excluded)
    if window is not None and int(window) < 0:
        raise ArgumentError("simulate", "window", window, "must be >= 0")
    if maxmin_eps and (model != "flow" or not 0.0 < maxmin_eps < 1.0):
        raise ArgumentError("simulate", "maxmin_eps", maxmin_eps,
                            "must be in [0, 1), and above 0 only in the flow model")
    if model == "congestion":
        return congestion_model(program, topology, placement, excluded=excluded, gamma=gamma,
                                ordering=ordering, window=window, progress=progress)
    if model == "flow":
        flows = flow_model(program, topology, placement, excluded=excluded, gamma=gamma,
                           window=int(window or 0), progress=progress,
                           maxmin_eps=float(maxmin_eps))
        return CongestionOutcome(flows.time_s, flows.link_loads, flows.hotspots)
    if model != "packet":
        raise ArgumentError("simulate", "model", model, f"one of {', '.join(MODELS)}")
    if window is not None or topology.params.buffer_packets > 0:
        buffered = CreditPacketSimulation(program, topology, placement, excluded=excluded,
                                          gamma=gamma, window=int(window or 0), seed=seed,
                                          progress=progress).run()
        return CongestionOutcome(buffered.time_s, buffered.link_loads, _windows(buffered,
                                                                               topology))
    sim = PacketSimulation(program, topology, placement, excluded=excluded, gamma=gamma,
                           switching=switching, seed=seed, progress=progress)
    packets = sim.run()
    return CongestionOutcome(packets.time_s, packets.link_loads, _windows(packets, topology))


def simulate_schedules(schedules: Sequence[Any], topology: Any, *, itemsize: int = 1,
                       model: str = "congestion", placement: str | Sequence[int] = "row-major",
                       seed: int = 0,
                       excluded: Iterable[int] = frozenset(), label: str = "custom",
                       **options: Any) -> SimResult:
    """Simulate ready-made per-rank schedules (e.g. hand-written ones) on ``topology``."""
    from ..topology import place
    wall = time.monotonic()
    topo = _topology(topology)
    excluded = frozenset(int(x) for x in excluded)
    nodes = place(topo, len(schedules), placement, seed, excluded)
    program = program_from_schedules(schedules, itemsize)
    outcome = run_program(program, topo, nodes, model, excluded=excluded, seed=seed, **options)
    common = dict(collective=label, algorithm=label, topology=str(topo.spec),
                  nprocs=len(schedules), size=0, model=model)
    return _result(common, outcome, program.total_bytes, program.num_messages, program.source,
                   nodes, wall)


def window_for(algorithm: str, params: Mapping[str, Any], window: int | None) -> int | None:
    """The window of a run: ``window`` as given, else the algorithm's ``throttle`` (if set);
    both given and different is an error."""
    throttle = int(params.get("throttle", 0) or 0)
    if not throttle:
        return window
    if window is not None and int(window) != throttle:
        raise ArgumentError("simulate", "window", window,
                            f"{algorithm}'s throttle={throttle} is a window of {throttle}")
    return throttle


def _use_in_network(collective: str, alg: Any, topo: Any, in_network: bool | None) -> bool:
    """Whether the switches combine this call: for an algorithm whose metadata asks for it
    where the topology can combine (its schedule runs elsewhere), or when ``in_network`` is
    True (a reduce or allreduce); never by default otherwise."""
    capable = bool(getattr(topo, "in_network_reduction", False))
    if _needs_in_network(alg):
        return capable  # elsewhere its own schedule runs (seed 002's binomial OR-reduction)
    if not in_network:
        return False
    if collective not in SWEEPING:
        raise ArgumentError("simulate", "in_network", True, f"{collective} is not combined in "
                            f"the network (only {' and '.join(sorted(SWEEPING))} are)")
    if not capable:
        raise ArgumentError("simulate", "in_network", True, f"{topo.spec} cannot reduce")
    return True


def _program(collective: str, name: str, alg: Any, specs: list[CallSpec],
             params: Mapping[str, Any], model: str, fast: bool | None, update: Any) -> Program:
    p = len(specs)
    gen = (fast_generator(collective, name, specs[0]) if model == "congestion"
           else step_generator(collective, name, specs[0]))
    uniform = all(s is specs[0] or s == specs[0] for s in specs)
    if gen is not None and uniform and (fast or (fast is None and p * p >= FAST_PATH_MESSAGES)):
        return gen(specs[0], alg.resolve(params))
    resolved = alg.resolve(params)
    schedules = []
    for rank, spec in enumerate(specs):
        schedules.append(alg.builder(rank, spec, resolved))
        if rank % 64 == 63:
            update(rank + 1, 2 * p)
    return program_from_schedules(schedules, specs[0].itemsize)


def _windows(outcome: PacketOutcome, topo: Any) -> RoundStats:
    """Hot spots per time window of a packet model's run (`collops.sim.timeline`)."""
    return hops_to_windows(outcome.hop_log or [], int(topo.num_links), outcome.time_s)


def _result(common: dict[str, Any], outcome: CongestionOutcome, total_bytes: int,
            messages: int, source: str, nodes: np.ndarray, wall: float) -> SimResult:
    loads = outcome.link_loads
    t = outcome.time_s
    return SimResult(
        **common, time_s=t, bandwidth_Bps=(total_bytes / t) if t > 0 else 0.0,
        max_link_load_bytes=float(loads.max()) if len(loads) else 0.0,
        mean_link_load_bytes=float(loads.mean()) if len(loads) else 0.0,
        link_loads=loads, phase_hotspots=outcome.rounds, source=source, messages=messages,
        total_bytes=int(total_bytes), placement=nodes, wall_s=time.monotonic() - wall)


# -- helpers for the command line ------------------------------------------------------------
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20,
          "MB": 1 << 20, "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}


def parse_size(text: str | int) -> int:
    """``"64K"`` → 65536 (K, M, G are binary multiples; plain numbers are bytes)."""
    if isinstance(text, int):
        return text
    match = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", str(text))
    if not match or match.group(2).upper() not in _UNITS:
        raise ArgumentError("sim", "size", text, "a byte count such as 4096, 64K or 1M")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def parse_sizes(text: str) -> list[int]:
    """``"1K,4K,16K"`` → byte counts."""
    return [parse_size(part) for part in text.split(",") if part.strip()]


def parse_nodes(text: str) -> frozenset[int]:
    """``"3,10-12"`` → {3, 10, 11, 12}."""
    out: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            out.update(range(int(lo), int(hi or lo) + 1))
        except ValueError as exc:
            raise ArgumentError("sim", "exclude", text, "node ids like 3,10-12") from exc
    return frozenset(out)


def simulate_sweep(collective: str, algorithms: Sequence[str], topology: Any,
                   sizes: Sequence[int], **options: Any) -> list[SimResult]:
    """`simulate` for every algorithm × size (the topology parsed once)."""
    topo = _topology(topology)
    return [simulate(collective, name, topo, size_bytes=size, **options)
            for name in algorithms for size in sizes]


def format_results(results: Sequence[SimResult],
                   closed_forms: Sequence[float | None] | None = None) -> str:
    """A plain-text table of results (one line each), closed form beside the prediction."""
    forms = list(closed_forms) if closed_forms is not None else [None] * len(results)
    head = (f"{'algorithm':<18}{'size':>10}{'ranks':>7}{'model':>12}{'time':>13}"
            f"{'closed form':>13}{'bandwidth':>13}{'max link':>12}{'mean link':>12}")
    lines = [head]
    for r, cf in zip(results, forms, strict=True):
        lines.append(
            f"{r.algorithm:<18}{r.size:>10}{r.nprocs:>7}{r.model:>12}{_secs(r.time_s):>13}"
            f"{_secs(cf) if cf is not None else '-':>13}{_rate(r.bandwidth_Bps):>13}"
            f"{_bytes(r.max_link_load_bytes):>12}{_bytes(r.mean_link_load_bytes):>12}")
    return "\n".join(lines)


def _secs(t: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if t >= scale:
            return f"{t / scale:.3f} {unit}"
    return f"{t * 1e9:.1f} ns"


def _bytes(n: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"


def _rate(bps: float) -> str:
    return f"{bps / 1e9:.3f} GB/s"
