"""collops: collective operations for programs made of many ranks.

Every algorithm is a schedule (data) that runs for real — threads, processes over shared
memory, MPI — and on modelled networks. Start with `spawn` or `init`.
"""

from . import mpi, ops, shm  # noqa: F401  (mpi, shm: register their native algorithms)
from .algorithms import algorithms
from .algorithms.registry import Algorithm
from .algorithms.spec import COLLECTIVES
from .config import reload_settings, settings
from .datatypes import pair_dtype, pairs
from .errors import (
    AlgorithmIneligible,
    ArgumentError,
    CollectiveMismatch,
    CollectiveTimeout,
    CollopsError,
    DeadlockError,
    MessageSizeMismatch,
    PeerFailed,
    PerformanceWarning,
    RankFailed,
    RequestError,
    ScheduleError,
    SettingError,
    TransportError,
    UnknownAlgorithm,
    UnsupportedOperation,
)
from .ops import (
    BAND,
    BOR,
    BXOR,
    LAND,
    LOR,
    LXOR,
    MAX,
    MAXLOC,
    MIN,
    MINLOC,
    PROD,
    SUM,
    Op,
)
from .runtime import (
    Comm,
    PersistentRequest,
    Request,
    init,
    spawn,
    start_all,
    test_all,
    wait_all,
    wait_any,
)

__version__ = "0.1.0"

__all__ = [
    "BAND", "BOR", "BXOR", "COLLECTIVES", "LAND", "LOR", "LXOR", "MAX", "MAXLOC", "MIN", "MINLOC",
    "PROD", "SUM", "Algorithm", "AlgorithmIneligible", "ArgumentError", "CollectiveMismatch",
    "CollectiveTimeout", "CollopsError", "Comm", "DeadlockError", "MessageSizeMismatch", "Op",
    "PeerFailed", "PerformanceWarning", "PersistentRequest", "RankFailed", "Request",
    "RequestError", "ScheduleError", "SettingError", "TransportError", "UnknownAlgorithm",
    "UnsupportedOperation", "algorithms", "init", "ops", "pair_dtype", "pairs",
    "reload_settings", "settings", "spawn", "start_all", "test_all", "wait_all", "wait_any",
]
