"""``MPI.Exception`` and its error classes; collops errors surface as both.

A collops error raised under a facade call is re-raised as an instance of a class derived
from *both* its collops class and `Exception` (mpi4py's ``MPI.Exception``), with the same
message and attributes: ``except MPI.Exception`` and ``except collops.ArgumentError`` both
catch it, and `Exception.Get_error_class` names its MPI error class (``ERR_ROOT`` for a bad
root, ``ERR_TRUNCATE`` for a message larger than the receive buffer, …).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from ..errors import ArgumentError, CollopsError, PeerFailed, RequestError, UnsupportedOperation

SUCCESS = 0
ERR_BUFFER = 1
ERR_COUNT = 2
ERR_TYPE = 3
ERR_TAG = 4
ERR_COMM = 5
ERR_RANK = 6
ERR_ROOT = 7
ERR_GROUP = 8
ERR_OP = 9
ERR_TOPOLOGY = 10
ERR_DIMS = 11
ERR_ARG = 12
ERR_UNKNOWN = 13
ERR_TRUNCATE = 14
ERR_OTHER = 15
ERR_INTERN = 16
ERR_IN_STATUS = 17
ERR_PENDING = 18
ERR_REQUEST = 19
ERR_UNSUPPORTED_OPERATION = 52
ERR_PROC_ABORTED = 75
ERR_LASTCODE = 0x3FFFFFFF

ERROR_STRINGS = {
    SUCCESS: "No MPI error", ERR_BUFFER: "Invalid buffer pointer", ERR_COUNT: "Invalid count",
    ERR_TYPE: "Invalid datatype", ERR_TAG: "Invalid tag", ERR_COMM: "Invalid communicator",
    ERR_RANK: "Invalid rank", ERR_ROOT: "Invalid root", ERR_GROUP: "Invalid group",
    ERR_OP: "Invalid MPI_Op", ERR_TOPOLOGY: "Invalid topology", ERR_DIMS: "Invalid dimension",
    ERR_ARG: "Invalid argument", ERR_UNKNOWN: "Unknown error", ERR_TRUNCATE: "Message truncated",
    ERR_OTHER: "Other MPI error", ERR_INTERN: "Internal MPI error",
    ERR_IN_STATUS: "See the MPI_ERROR field in MPI_Status for the error code",
    ERR_PENDING: "Pending request", ERR_REQUEST: "Invalid MPI_Request",
    ERR_UNSUPPORTED_OPERATION: "Unsupported operation",
    ERR_PROC_ABORTED: "Communication with an aborted process",
}

#: an ArgumentError's argument name -> the MPI error class it maps to
_ARGUMENT_CLASSES = {
    "root": ERR_ROOT, "dest": ERR_RANK, "source": ERR_RANK, "rank": ERR_RANK,
    "ranks": ERR_RANK, "tag": ERR_TAG, "sendtag": ERR_TAG, "recvtag": ERR_TAG,
    "count": ERR_COUNT, "counts": ERR_COUNT, "sendcounts": ERR_COUNT, "recvcounts": ERR_COUNT,
    "op": ERR_OP, "x": ERR_BUFFER, "out": ERR_BUFFER, "buf": ERR_BUFFER, "sendbuf": ERR_BUFFER,
    "recvbuf": ERR_BUFFER, "datatype": ERR_TYPE, "dtype": ERR_TYPE, "comm": ERR_COMM,
    "group": ERR_GROUP, "request": ERR_REQUEST, "requests": ERR_REQUEST,
}

#: collops error class names (of branches merged later) -> MPI error class
_NAMED_CLASSES = {"TruncationError": ERR_TRUNCATE, "CommunicatorFreed": ERR_COMM}


class Exception(RuntimeError):  # noqa: A001  (mpi4py's name)
    """mpi4py's ``MPI.Exception``: an MPI error carrying its error code."""

    error_code_value: int = ERR_OTHER

    def __init__(self, ierr: int = SUCCESS) -> None:
        super().__init__(ierr)
        self.error_code_value = int(ierr)

    def __str__(self) -> str:
        if self.args and isinstance(self.args[0], str):
            return self.args[0]
        return self.Get_error_string()

    def __int__(self) -> int:
        return self.error_code_value

    def __bool__(self) -> bool:
        return self.error_code_value != SUCCESS

    def __eq__(self, other: object) -> bool:
        if isinstance(other, int):
            return self.error_code_value == other
        return super().__eq__(other)

    __hash__ = RuntimeError.__hash__

    def Get_error_code(self) -> int:
        """The error code."""
        return self.error_code_value

    def Get_error_class(self) -> int:
        """The error class (codes and classes are the same here)."""
        return Get_error_class(self.error_code_value)

    def Get_error_string(self) -> str:
        """The error code's text."""
        return Get_error_string(self.error_code_value)

    @property
    def error_code(self) -> int:
        """The error code."""
        return self.error_code_value

    @property
    def error_class(self) -> int:
        """The error class."""
        return self.Get_error_class()

    @property
    def error_string(self) -> str:
        """The error code's text."""
        return self.Get_error_string()


def Get_error_class(errorcode: int) -> int:
    """The error class of an error code (the same: collops defines no other codes)."""
    return int(errorcode)


def Get_error_string(errorcode: int) -> str:
    """The text of an error code."""
    return ERROR_STRINGS.get(int(errorcode), f"Unknown error code {errorcode}")


def error_class_of(exc: BaseException) -> int:
    """The MPI error class a collops error maps to."""
    for cls in type(exc).__mro__:
        if cls.__name__ in _NAMED_CLASSES:
            return _NAMED_CLASSES[cls.__name__]
    if isinstance(exc, UnsupportedOperation):
        return ERR_OP
    if isinstance(exc, ArgumentError):
        return _ARGUMENT_CLASSES.get(exc.argument, ERR_ARG)
    if isinstance(exc, RequestError):
        return ERR_REQUEST
    if isinstance(exc, PeerFailed):
        return ERR_PROC_ABORTED
    return ERR_OTHER


_DUAL: dict[type, type] = {}


def _dual_class(cls: type) -> type:
    """The class deriving from both collops' ``cls`` and `Exception`."""
    dual = _DUAL.get(cls)
    if dual is None:
        dual = _DUAL[cls] = type(cls.__name__, (cls, Exception),
                                 {"__module__": cls.__module__, "__doc__": cls.__doc__,
                                  "__init__": BaseException.__init__,
                                  "__reduce__": BaseException.__reduce__})
    return dual


def mpi_error(exc: CollopsError) -> BaseException:
    """``exc`` as an instance of its class and `Exception` at once (same message and fields)."""
    if isinstance(exc, Exception):
        return exc
    dual: Any = _dual_class(type(exc))
    converted = dual.__new__(dual)
    converted.__dict__.update(exc.__dict__)
    converted.args = exc.args
    converted.error_code_value = error_class_of(exc)
    tb: TracebackType | None = exc.__traceback__
    return converted.with_traceback(tb)  # type: ignore[no-any-return]


def mpi_exception(error_class: int, message: str) -> Exception:
    """A plain `Exception` of ``error_class`` with collops' message."""
    exc = Exception(error_class)
    exc.args = (message,)
    return exc


def not_implemented(what: str, call: str) -> NotImplementedError:
    """The error for a part of MPI collops does not implement, raised locally on every rank
    before any communication (so no peer is left waiting)."""
    return NotImplementedError(f"collops.MPI: {call}: {what} is not implemented by collops")
