"""Networks as values: topologies, routing, link loads and rank placement."""

from .base import DisconnectedError, NetworkParams, Routes, Topology
from .grid import Grid, Hypercube, Mesh, Ring, Torus
from .parse import KINDS, load_topology, parse_topology, save_topology, topology_from_dict
from .placement import place
from .tree import CombiningTree, FatTree, KaryTree, Switch

__all__ = [
    "KINDS", "CombiningTree", "DisconnectedError", "FatTree", "Grid", "Hypercube", "KaryTree",
    "Mesh", "NetworkParams", "Ring", "Routes", "Switch", "Topology", "Torus", "load_topology",
    "parse_topology", "place", "save_topology", "topology_from_dict",
]
