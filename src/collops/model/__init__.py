"""Closed-form costs: Hockney's α-β, LogGP, the seed-004 table and the cluster models A and B."""

from .closed_form import closed_form, exact_time, seed_shape
from .cluster import model_a, model_b, packet_count, transfer_time, wire_bytes
from .hockney import alpha_beta, cost_model, mean_hops
from .loggp import LogGP
from .seed004 import (
    hypercube_allgather,
    hypercube_alltoall,
    hypercube_alltoall_pairwise,
    ring_allgather,
    ring_alltoall,
    seed004,
    torus_allgather,
    torus_alltoall,
)

__all__ = [
    "LogGP", "alpha_beta", "closed_form", "cost_model", "exact_time", "hypercube_allgather",
    "hypercube_alltoall", "hypercube_alltoall_pairwise", "mean_hops", "model_a", "model_b",
    "packet_count", "ring_allgather", "ring_alltoall", "seed004", "seed_shape",
    "torus_allgather", "torus_alltoall", "transfer_time", "wire_bytes",
]
