"""Network-aware costs: the time of a call on a known network, contention included.

Selection (`collops.algorithms.selection`) compares α-β-γ guesses when it knows nothing of the
network, and those have no term for contention: on a torus the seeds' random-order alltoall
and the lecture's dimension-wise schemes look no better than a linear exchange. Where the
network *is* known — always in `collops sim --algorithm auto`, and in a real run whose user
declared it (``COLLOPS_TOPOLOGY``, ``COLLOPS_PLACEMENT``; see `collops.runtime.network`) — a
`NetworkCost` answers instead with each algorithm's time on that network:

* the seed-004 closed form where it is exact (`collops.model.closed_form.exact_time`: the
  contention-free cases, which the simulators reproduce within 1 %; not for `collops sim`,
  whose choice must be the best in the model it simulates), else
* a simulation of the algorithm's own schedule on the network with the ranks on their nodes,
  in a model (the flow model by default: every message a flow over its route, bandwidth
  shared max-min as flows start and end), with the algorithm's default parameters but those
  the network supplies (`facts`: a torus's shape to the lecture's dimension-wise schemes).

Answers are cached per (algorithm, call signature) for the object's life, so each signature
is simulated once per process; with ``size_classes`` (real runs) a regular call's count is
rounded up to a power of two first, so calls of nearby sizes share one simulation. Algorithms
that cannot run on the network — a transport's native collectives, which have no schedule,
or one that needs in-network reduction where no switch combines — get None: selection
leaves them to the table's rules. A vector call whose counts only its own rank knows
(alltoallv) gets None too: ranks must not choose differently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..algorithms.registry import Algorithm
from ..algorithms.spec import CallSpec
from ..model.closed_form import exact_time
from ..topology.base import Topology
from ..topology.grid import Grid
from .api import MODELS, SimResult, simulate
from .innetwork import IN_NETWORK_RESOURCE

#: resources a modelled network can offer an algorithm
_NETWORK_RESOURCES = frozenset({IN_NETWORK_RESOURCE})


def size_class(spec: CallSpec) -> CallSpec:
    """``spec`` with its element count rounded up to a power of two (regular calls only)."""
    if spec.counts or spec.sendcounts or spec.count <= 1:
        return spec
    return spec.with_(count=1 << (spec.count - 1).bit_length())


class NetworkCost:
    """Times of calls on ``topology`` with the ranks on ``nodes`` (see the module essay)."""

    def __init__(self, topology: Topology, nodes: Sequence[int], model: str = "flow", *,
                 size_classes: bool = False, closed_forms: bool = True,
                 options: Mapping[str, Any] | None = None) -> None:
        if model not in MODELS:
            raise ValueError(f"model {model!r} is not one of {', '.join(MODELS)}")
        self.topology = topology
        self.nodes = np.asarray(nodes, dtype=np.int64)
        #: the ranks sit on the network's first nodes in its own order (closed forms and a
        #: torus's shape hold only then)
        self.in_order = bool(np.array_equal(self.nodes, topology.compute_nodes[:len(self.nodes)]))
        self.model = model
        self.size_classes = size_classes
        #: whether exact closed forms stand in for simulations (not when the answer must be
        #: the simulated time in this model, which counts local copies too)
        self.closed_forms = closed_forms
        #: more keyword arguments of every `simulate` (window, excluded, switching, gamma, …)
        self.options = dict(options or {})
        self._times: dict[tuple[str, Any], float | None] = {}
        #: the simulations behind the times, by the same keys
        self.results: dict[tuple[str, Any], SimResult] = {}

    def describe(self) -> str:
        """The network and model in a few words, for `explain`."""
        placed = "" if self.in_order else ", ranks placed on chosen nodes"
        return f"{self.topology.spec} ({self.model} model{placed})"

    def facts(self) -> dict[str, str]:
        """What the network tells algorithms that ask (`Param.supplied`): ``network.shape``,
        the torus's dimensions, when the ranks fill a torus in its own order."""
        if isinstance(self.topology, Grid) and self.topology.wrap and self.in_order \
                and len(self.nodes) == self.topology.num_nodes:
            return {"network.shape": "x".join(str(d) for d in self.topology.dims)}
        return {}

    def params_for(self, algorithm: Algorithm) -> dict[str, str]:
        """The parameters the network supplies to ``algorithm`` (see `facts`)."""
        facts = self.facts()
        return {p.name: facts[p.supplied] for p in algorithm.params
                if p.supplied is not None and p.supplied in facts}

    def runs(self, algorithm: Algorithm) -> bool:
        """Whether ``algorithm`` can run on this network at all."""
        if algorithm.native is not None:
            return False
        offers = _NETWORK_RESOURCES if self.topology.in_network_reduction else frozenset()
        return algorithm.needs <= offers

    def time(self, algorithm: Algorithm, spec: CallSpec) -> float | None:
        """Seconds ``algorithm`` takes for ``spec`` on the network (None: it cannot run there,
        or the call's size is not known to every rank)."""
        if spec.collective == "alltoallv" or not self.runs(algorithm) \
                or not algorithm.eligible(spec) or spec.size != len(self.nodes):
            return None
        asked = size_class(spec) if self.size_classes else spec
        key = (algorithm.name, asked.key())
        if key not in self._times:
            self._times[key] = self._compute(key, algorithm, asked)
        return self._times[key]

    def result(self, algorithm: Algorithm, spec: CallSpec) -> SimResult:
        """The simulation of ``algorithm`` for ``spec`` on the network (run unless `time` ran
        it already)."""
        key = (algorithm.name, spec.key())
        if key not in self.results:
            self.results[key] = self._simulate(algorithm, spec)
        return self.results[key]

    def _simulate(self, algorithm: Algorithm, spec: CallSpec) -> SimResult:
        return simulate(spec.collective, algorithm.name, self.topology, spec.size,
                        _bytes_per_rank(spec), model=self.model, placement=self.nodes.tolist(),
                        params=self.params_for(algorithm), specs=[spec] * spec.size,
                        **{"progress": False, **self.options})

    def _compute(self, key: tuple[str, Any], algorithm: Algorithm, spec: CallSpec
                 ) -> float | None:
        nbytes = _bytes_per_rank(spec)
        if self.closed_forms and self.in_order and not self.options.get("excluded") \
                and not self.options.get("idle"):
            exact = exact_time(spec.collective, algorithm.name, self.topology, spec.size, nbytes)
            if exact is not None:
                return exact
        return float(self.result(algorithm, spec).time_s)


def _bytes_per_rank(spec: CallSpec) -> int:
    """The per-rank contribution in bytes, as the simulator's sizes count it."""
    if spec.counts:
        return max(spec.counts) * spec.itemsize
    return spec.count * spec.itemsize
