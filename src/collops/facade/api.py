# ruff: noqa: F401  (this module is a namespace: every import is re-exported)
"""The namespace ``collops.MPI`` is: mpi4py's ``MPI`` module over collops.

Import it as ``from collops import MPI`` or ``import collops.MPI`` (see `importer`; under a
real ``mpiexec`` those give mpi4py's own ``MPI``). Names MPI has and collops does not
implement raise `NotImplementedError` naming the missing part when used.
"""

from __future__ import annotations

from typing import Any

from .alltoallw import Aint_add, Aint_diff, Get_address
from .attributes import TAG_UB_KEY
from .comm import COMM_NULL, COMM_SELF, COMM_WORLD, Comm, Intercomm, Intracomm, wrap
from .constants import (
    ANY_SOURCE,
    ANY_TAG,
    APPNUM,
    BOTTOM,
    BSEND_OVERHEAD,
    BUFFER_AUTOMATIC,
    COMM_TYPE_HW_GUIDED,
    COMM_TYPE_HW_UNGUIDED,
    COMM_TYPE_SHARED,
    CONGRUENT,
    HOST,
    IDENT,
    IN_PLACE,
    IO,
    KEYVAL_INVALID,
    LASTUSEDCODE,
    MAX_ERROR_STRING,
    MAX_LIBRARY_VERSION_STRING,
    MAX_OBJECT_NAME,
    MAX_PROCESSOR_NAME,
    PROC_NULL,
    ROOT,
    SIMILAR,
    SUBVERSION,
    THREAD_FUNNELED,
    THREAD_MULTIPLE,
    THREAD_SERIALIZED,
    THREAD_SINGLE,
    UNDEFINED,
    UNEQUAL,
    UNIVERSE_SIZE,
    VERSION,
    WTIME_IS_GLOBAL,
)
from .datatypes import DATATYPE_NULL, PREDEFINED, Datatype
from .environment import (
    ERRHANDLER_NULL,
    ERRORS_ABORT,
    ERRORS_ARE_FATAL,
    ERRORS_RETURN,
    INFO_ENV,
    INFO_NULL,
    Alloc_mem,
    Attach_buffer,
    Cartcomm,
    Close_port,
    Compute_dims,
    Detach_buffer,
    Distgraphcomm,
    Errhandler,
    File,
    Finalize,
    Free_mem,
    Get_library_version,
    Get_processor_name,
    Get_version,
    Graphcomm,
    Info,
    Init,
    Init_thread,
    Is_finalized,
    Is_initialized,
    Is_thread_main,
    Lookup_name,
    Open_port,
    Pcontrol,
    Publish_name,
    Query_thread,
    Register_datarep,
    Session,
    Topocomm,
    Unpublish_name,
    Win,
    Wtick,
    Wtime,
    buffer,
    get_vendor,
)
from .exceptions import (
    ERR_ARG,
    ERR_BUFFER,
    ERR_COMM,
    ERR_COUNT,
    ERR_DIMS,
    ERR_GROUP,
    ERR_IN_STATUS,
    ERR_INTERN,
    ERR_LASTCODE,
    ERR_OP,
    ERR_OTHER,
    ERR_PENDING,
    ERR_PROC_ABORTED,
    ERR_RANK,
    ERR_REQUEST,
    ERR_ROOT,
    ERR_TAG,
    ERR_TOPOLOGY,
    ERR_TRUNCATE,
    ERR_TYPE,
    ERR_UNKNOWN,
    ERR_UNSUPPORTED_OPERATION,
    SUCCESS,
    Exception,
    Get_error_class,
    Get_error_string,
)
from .group import GROUP_EMPTY, GROUP_NULL, Group
from .objects import Pickle, pickle
from .operators import (
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
    NO_OP,
    OP_NULL,
    PROD,
    REPLACE,
    SUM,
    Op,
)
from .pointtopoint import MESSAGE_NO_PROC, MESSAGE_NULL, Message
from .requests import REQUEST_NULL, Grequest, Prequest, Request, Status
from .typemaps import ORDER_C, ORDER_FORTRAN

TAG_UB = TAG_UB_KEY
ERR_LASTUSEDCODE = ERR_LASTCODE
globals().update(PREDEFINED)


def _typecode(datatype: Datatype) -> str | None:
    """The typecode of a predefined datatype (mpi4py's private helper, used by its tests)."""
    return datatype.typechar or None


def __getattr__(name: str) -> Any:
    raise AttributeError(f"collops.MPI has no {name!r}: not part of what collops implements "
                         "(see docs/mpi4py.md)")


__all__ = [name for name in dict(globals()) if not name.startswith("_")
           and name not in ("annotations", "Any", "PREDEFINED", "wrap")]
__all__ += list(PREDEFINED)
