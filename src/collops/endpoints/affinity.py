"""What affinity-shaped collectives save (seed 003), in numbers.

`compare_on_machine` builds every rank's schedule of a few algorithms for a call on a
machine (``machine:4x8x2`` …) with ranks bound to hardware threads by a mapping, and reports
for each:

- the messages crossing each level of the hierarchy (core, module, node);
- the hierarchical α-β time (`collops.topology.machine.hierarchical_time`: each message pays
  the latency and bandwidth of the level it crosses; a rank receives one phase's messages in
  turn);
- the simulator's time (`collops.sim.simulate`, congestion model unless ``model`` says
  ``"packet"``) on the machine as a network (`MachineNetwork`) with every rank placed on its
  hardware thread: each link carries its level's bandwidth and latency, so a message pays
  for the levels it crosses and queues on the links it shares; unlike the α-β figure it
  also charges the network's per-message overhead and the local copy and reduce steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..algorithms.affinity import ALGORITHM, threads_of_ranks
from ..algorithms.registry import get_algorithm
from ..sim.api import DEFAULT_GAMMA, call_specs, simulate
from ..sim.program import program_from_schedules
from ..topology.machine import Machine, MachineNetwork, hierarchical_time

BASELINES = {
    "reduce": ("binomial", "nary_tree"),
    "allreduce": ("recursive_doubling", "reduce_bcast", "ring"),
    "bcast": ("binomial", "pipeline"),
    "barrier": ("tree", "dissemination"),
}


@dataclass(frozen=True)
class Comparison:
    """One algorithm's figures on one machine."""

    algorithm: str
    crossings: tuple[int, ...]   # messages crossing each level, innermost first
    hierarchical_s: float
    simulated_s: float


def compare_on_machine(collective: str, machine: str | Machine = "machine:4x8x2",
                       nbytes: int = 65536, mapping: str = "fill", arity: int = 2,
                       algorithms: Sequence[str] | None = None,
                       model: str = "congestion", gamma: float = DEFAULT_GAMMA
                       ) -> list[Comparison]:
    """Figures for ``affinity_tree`` and the baselines of ``collective`` (all ranks busy);
    ``model`` and ``gamma`` (seconds per byte of a local copy or reduce) go to `simulate`."""
    hw = machine if isinstance(machine, Machine) else Machine.parse(machine)
    network = MachineNetwork(hw)
    p = hw.threads
    names = [ALGORITHM, *(algorithms if algorithms is not None else BASELINES[collective])]
    threads = np.array(threads_of_ranks(hw.shape, mapping, p), dtype=np.int64)
    specs = call_specs(collective, p, nbytes)
    out = []
    for name in names:
        alg = get_algorithm(collective, name)
        params = ({"machine": "x".join(map(str, hw.shape)), "mapping": mapping, "arity": arity}
                  if name == ALGORITHM else {})
        if not alg.eligible(specs[0]):
            continue
        program = program_from_schedules(alg.build_all(specs, params), 1)
        src, dst = threads[program.msg_src], threads[program.msg_dst]
        levels = hw.crossing_level(src, dst)
        crossings = tuple(int((levels == lv).sum()) for lv in range(1, len(hw.shape) + 1))
        alpha_beta = hierarchical_time(hw, src, dst, program.msg_bytes, program.msg_phase)
        simulated = simulate(collective, name, network, p, nbytes, model=model, gamma=gamma,
                             params=params, placement=[int(t) for t in threads]).time_s
        out.append(Comparison(name, crossings, alpha_beta, simulated))
    return out


def format_comparison(rows: Sequence[Comparison], machine: Machine) -> str:
    """A Markdown table of `compare_on_machine` results."""
    levels = machine.level_names()
    head = ("| algorithm | " + " | ".join(f"{n} msgs" for n in levels)
            + " | hierarchical α-β | simulated |")
    lines = [head, "|" + "---|" * (len(levels) + 3)]
    for r in rows:
        sim = f"{r.simulated_s * 1e6:.1f} µs"
        lines.append(f"| `{r.algorithm}` | " + " | ".join(map(str, r.crossings))
                     + f" | {r.hierarchical_s * 1e6:.2f} µs | {sim} |")
    return "\n".join(lines)
