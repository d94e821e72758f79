"""`collops sim --algorithm auto`: the algorithm selection picks for a call on this network.

The choice is the selection engine's own (`collops.algorithms.selection.select`), given the
network as its cost term (`NetworkCost`, in the model being simulated, with the ranks on the
nodes the simulation puts them on): among the eligible algorithms that can run on the network
the one with the least time there. Rules of the built-in table are about real transports and
cover no simulated call; the user's tuning file and ``COLLOPS_<COLL>_ALGORITHM`` are not read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..algorithms import selection
from ..topology import Topology, place
from .api import SimResult, call_specs
from .innetwork import IN_NETWORK_RESOURCE
from .network_cost import NetworkCost

#: what ``--algorithm`` says to let selection choose
AUTO = "auto"


@dataclass(frozen=True)
class AutoChoice:
    """The algorithm chosen, the table behind the choice and the chosen one's simulation."""

    algorithm: str
    explanation: str
    result: SimResult


def network_for(topology: Topology, nranks: int, model: str, *, placement: Any = "row-major",
                seed: int = 0, options: Mapping[str, Any] | None = None) -> NetworkCost:
    """The cost term of ``nranks`` ranks placed on ``topology`` as `simulate` places them."""
    given = options or {}
    outside = frozenset(given.get("excluded", ())) | frozenset(given.get("idle", ()))
    nodes = place(topology, nranks, placement, seed, outside)
    return NetworkCost(topology, [int(n) for n in nodes], model, closed_forms=False,
                       options=options)


def choose(collective: str, size_bytes: int, network: NetworkCost) -> AutoChoice:
    """What selection picks for ``collective`` with ``size_bytes`` per rank on ``network``."""
    spec = call_specs(collective, len(network.nodes), size_bytes)[0]
    resources = frozenset({IN_NETWORK_RESOURCE}) if network.topology.in_network_reduction \
        else frozenset()
    choice = selection.select(spec, resources=resources, network=network)
    return AutoChoice(choice.algorithm.name, selection.explain(spec, resources, network=network),
                      network.result(choice.algorithm, spec))
