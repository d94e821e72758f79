"""Algorithms: one module per collective, each algorithm a pure schedule builder.

Importing this package registers every algorithm; `algorithms(collective)` lists them.
"""

from . import (  # noqa: F401  (imported for registration)
    affinity,
    allgather,
    allreduce,
    alltoall,
    barrier,
    bcast,
    gather,
    lecture,
    reduce,
    reduce_scatter,
    scan,
    scatter,
)
from .registry import (
    COMMUTATIVE,
    POWER_OF_TWO,
    Algorithm,
    CostModel,
    Param,
    Restriction,
    algorithms,
    all_algorithms,
    get_algorithm,
    register,
)
from .spec import COLLECTIVES, CallSpec, make_spec

__all__ = [
    "COLLECTIVES", "COMMUTATIVE", "POWER_OF_TWO", "Algorithm", "CallSpec", "CostModel", "Param",
    "Restriction", "algorithms", "all_algorithms", "get_algorithm", "make_spec", "register",
]
