"""mpi4py's constants, with MPICH's values where collops' own API shares them."""

from __future__ import annotations

from .. import version

#: collops' point-to-point shares these (the contract: MPICH's values)
ANY_SOURCE = -2
ANY_TAG = -1
PROC_NULL = -1
ROOT = -3
UNDEFINED = -32766
TAG_UB = 2**31 - 1

#: group and communicator comparison results (MPICH's values)
IDENT = 0
CONGRUENT = 1
SIMILAR = 2
UNEQUAL = 3

THREAD_SINGLE = 0
THREAD_FUNNELED = 1
THREAD_SERIALIZED = 2
THREAD_MULTIPLE = 3

#: the MPI standard this module follows, and its library version string
VERSION = 4
SUBVERSION = 0
LIBRARY_VERSION = f"collops {version.__version__} (mpi4py's MPI interface over collops)"

#: split_type kinds: shared memory is the one collops knows
COMM_TYPE_SHARED = 1
COMM_TYPE_HW_GUIDED = 2
COMM_TYPE_HW_UNGUIDED = 3

#: attribute keys: none is predefined beyond TAG_UB (so APPNUM is the invalid key)
KEYVAL_INVALID = -1
APPNUM = KEYVAL_INVALID
UNIVERSE_SIZE = KEYVAL_INVALID
LASTUSEDCODE = KEYVAL_INVALID
WTIME_IS_GLOBAL = KEYVAL_INVALID
IO = KEYVAL_INVALID
HOST = KEYVAL_INVALID

#: bytes a buffered send adds to an attached buffer (MPICH's figure; sends are not buffered
#: here, so any attached size works)
BSEND_OVERHEAD = 96

MAX_PROCESSOR_NAME = 128
MAX_ERROR_STRING = 512
MAX_OBJECT_NAME = 128
MAX_LIBRARY_VERSION_STRING = 8192


class _Sentinel:
    """A named placeholder buffer (``MPI.IN_PLACE``, ``MPI.BOTTOM``)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> str:
        return self.name


IN_PLACE = _Sentinel("IN_PLACE")
BOTTOM = _Sentinel("BOTTOM")
BUFFER_AUTOMATIC = _Sentinel("BUFFER_AUTOMATIC")
