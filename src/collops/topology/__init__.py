"""Networks as values: topologies, routing, link loads and rank placement."""

from .base import DisconnectedError, NetworkParams, Routes, Topology
from .grid import Grid, Hypercube, Mesh, Ring, Torus
from .machine import LevelParams, Machine, MachineNetwork, detect_machine, parse_machine
from .parse import (
    KINDS,
    load_topology,
    parse_topology,
    save_topology,
    topology_from_dict,
    topology_from_text,
)
from .pgft import GeneralFatTree
from .placement import place
from .tree import CombiningTree, FatTree, KaryTree, Switch

KINDS.setdefault("machine", lambda spec, text, params: parse_machine(spec, params))

__all__ = [
    "KINDS", "CombiningTree", "DisconnectedError", "FatTree", "GeneralFatTree", "Grid",
    "Hypercube", "KaryTree", "LevelParams", "Machine", "MachineNetwork", "Mesh",
    "NetworkParams", "Ring", "Routes",
    "Switch", "Topology", "Torus", "detect_machine", "load_topology", "parse_machine",
    "parse_topology", "place", "save_topology", "topology_from_dict", "topology_from_text",
]
