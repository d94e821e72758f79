"""collops: collective operations for programs made of many ranks.

Every algorithm is a schedule (data) that runs for real — threads, processes over shared
memory, MPI — and on modelled networks. Start with `spawn` or `init`.
"""

from . import mpi, ops, shm  # noqa: F401  (mpi, shm: register their native algorithms)
from .algorithms import algorithms
from .algorithms.registry import (
    COMMUTATIVE,
    EQUAL_COUNTS,
    POWER_OF_TWO,
    Algorithm,
    CostModel,
    Param,
    Restriction,
)
from .algorithms.spec import COLLECTIVES, CallSpec, builder_for, make_spec
from .algorithms.user import algorithm
from .config import reload_settings, settings
from .datatypes import pair_dtype, pairs
from .errors import (
    AlgorithmIneligible,
    ArgumentError,
    CollectiveMismatch,
    CollectiveTimeout,
    CollopsError,
    CommunicatorBroken,
    CommunicatorFreed,
    CommunicatorLimit,
    DeadlockError,
    MessageSizeMismatch,
    PeerFailed,
    PerformanceWarning,
    PluginError,
    RankFailed,
    RequestError,
    ScheduleError,
    SettingError,
    TransportError,
    TruncationError,
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
from .plugins import load_plugin
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
from .runtime.groups import (
    CONGRUENT,
    GROUP_EMPTY,
    IDENT,
    SIMILAR,
    UNDEFINED,
    UNEQUAL,
    Group,
)
from .runtime.matching import ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB
from .runtime.p2p import Message
from .runtime.status import Status
from .schedule import RECV, SEND, TMP, Region, Schedule, ScheduleBuilder
from .version import __version__

__all__ = [
    "CONGRUENT", "GROUP_EMPTY", "IDENT", "SIMILAR", "UNDEFINED", "UNEQUAL", "Group",
    "ANY_SOURCE", "ANY_TAG", "Message", "PROC_NULL", "Status", "TAG_UB", "TruncationError",
    "BAND", "BOR", "BXOR", "COLLECTIVES", "COMMUTATIVE", "EQUAL_COUNTS", "LAND", "LOR", "LXOR",
    "MAX", "MAXLOC", "MIN", "MINLOC", "POWER_OF_TWO", "PROD", "RECV", "SEND", "SUM", "TMP",
    "Algorithm", "AlgorithmIneligible", "ArgumentError", "CallSpec", "CollectiveMismatch",
    "CollectiveTimeout", "CollopsError", "Comm", "CommunicatorBroken", "CommunicatorFreed",
    "CommunicatorLimit",
    "CostModel", "DeadlockError",
    "MessageSizeMismatch", "Op", "Param", "PeerFailed", "PerformanceWarning",
    "PersistentRequest", "PluginError", "RankFailed", "Region", "Request", "RequestError",
    "Restriction", "Schedule", "ScheduleBuilder", "ScheduleError", "SettingError", "TransportError",
    "UnknownAlgorithm", "UnsupportedOperation", "algorithm", "algorithms", "builder_for", "init",
    "load_plugin", "make_spec", "ops", "pair_dtype", "pairs", "reload_settings", "settings",
    "spawn", "start_all", "test_all", "wait_all", "wait_any", "__version__",
]

# ``collops.MPI`` (mpi4py's MPI over collops): found by a meta-path finder and by the module
# ``__getattr__``, never by a file named MPI beside mpi/ (see `facade.importer`).
from .facade.importer import install as _install_mpi_finder  # noqa: E402
from .facade.importer import module_attribute as __getattr__  # noqa: E402, F401

_install_mpi_finder()

# Users' algorithms named by COLLOPS_PLUGINS and installed entry points, loaded last (a
# plug-in imports collops, which is complete by now).
from .plugins import load_configured_plugins  # noqa: E402

load_configured_plugins()
