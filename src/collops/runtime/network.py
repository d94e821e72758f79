"""The network a job's user declared, as selection's cost term for real runs.

On one machine nothing about the network is known and selection compares α-β-γ estimates.
A user whose ranks run on a known network — a torus, a fat tree, a combining tree — declares
it (``COLLOPS_TOPOLOGY=torus:8x8x8`` or a JSON/TOML file, ``COLLOPS_PLACEMENT`` for where the
world's ranks sit, row-major by default), and every communicator then chooses among its
eligible schedules by their time on that network, contention included
(`collops.sim.network_cost`: exact closed forms where they exist, else a flow-model
simulation of the schedule, once per signature and power-of-two size class). Every rank
computes the same deterministic estimate, so the ranks agree without talking. The table's
rules (which name a transport's native collectives) still come first; `comm.explain()` shows
the network column.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from ..errors import CollopsError, SettingError

if TYPE_CHECKING:
    from ..sim.network_cost import NetworkCost


def declared_network(topology: str | None, placement: str, world_size: int,
                     group: Sequence[int]) -> NetworkCost | None:
    """The cost term of a communicator of world ranks ``group`` on the declared network
    (None when none is declared)."""
    if not topology:
        return None
    return _network(topology, placement, world_size, tuple(group))


@lru_cache(maxsize=64)
def _network(topology: str, placement: str, world_size: int,
             group: tuple[int, ...]) -> NetworkCost:
    from ..sim.network_cost import NetworkCost
    from ..topology import place, topology_from_text
    try:
        network = topology_from_text(topology)
    except (CollopsError, OSError, ValueError, KeyError) as exc:
        raise SettingError(f"COLLOPS_TOPOLOGY={topology!r}: {exc}") from None
    try:
        nodes = place(network, world_size, placement)
    except (CollopsError, OSError, ValueError) as exc:
        raise SettingError(f"COLLOPS_PLACEMENT={placement!r} for {world_size} ranks on "
                           f"{network.spec}: {exc}") from None
    return NetworkCost(network, [int(nodes[w]) for w in group], "flow", size_classes=True)
