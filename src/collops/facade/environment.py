"""mpi4py's module-level functions: initialisation state, timers, versions, thread levels,
and the parts of MPI collops does not implement (raising `NotImplementedError`)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Sequence
from typing import Any, NoReturn

import numpy as np

from .constants import LIBRARY_VERSION, SUBVERSION, THREAD_SERIALIZED, VERSION
from .exceptions import ERR_DIMS, mpi_exception, not_implemented


class Errhandler:
    """An error handler: collops.MPI always raises exceptions (as ERRORS_RETURN in mpi4py)."""

    def __init__(self, name: str = "") -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<collops.MPI.Errhandler {self.name}>"

    def Free(self) -> None:
        """Release the handle (predefined handlers stay)."""


ERRORS_RETURN = Errhandler("ERRORS_RETURN")
ERRORS_ARE_FATAL = Errhandler("ERRORS_ARE_FATAL")
ERRORS_ABORT = Errhandler("ERRORS_ABORT")
ERRHANDLER_NULL = Errhandler("ERRHANDLER_NULL")


class Info(dict):  # type: ignore[type-arg]
    """Hints: accepted and ignored (collops takes its settings from `collops.settings`)."""

    @classmethod
    def Create(cls, items: Any = None) -> Info:
        """A new, empty (or filled) info object."""
        return cls(items or {})

    def Set(self, key: str, value: str) -> None:
        """Store a hint."""
        self[key] = value

    def Get(self, key: str) -> str | None:
        """A stored hint, or None."""
        return self.get(key)

    def Free(self) -> None:
        """Release the object."""
        self.clear()

    def Dup(self) -> Info:
        """A copy."""
        return Info(self)


INFO_NULL = Info()
INFO_ENV = Info()

_state = {"finalized": False, "thread_level": THREAD_SERIALIZED}
_MAIN_THREAD = threading.main_thread()


def Init() -> None:
    """Nothing to do: collops is ready once imported (as mpi4py initialises MPI on import)."""


def Init_thread(required: int = THREAD_SERIALIZED) -> int:
    """The thread level provided: THREAD_SERIALIZED (one collops call at a time per
    communicator; threads of `collops.spawn` each have their own ranks)."""
    return min(int(required), THREAD_SERIALIZED)


def Finalize() -> None:
    """Mark MPI finalized (collops releases its resources when the process ends)."""
    _state["finalized"] = True


def Is_initialized() -> bool:
    """True: initialised when imported."""
    return True


def Is_finalized() -> bool:
    """Whether `Finalize` was called."""
    return bool(_state["finalized"])


def Query_thread() -> int:
    """The thread level provided (THREAD_SERIALIZED)."""
    return THREAD_SERIALIZED


def Is_thread_main() -> bool:
    """Whether this is the main thread."""
    return threading.current_thread() is _MAIN_THREAD


def Wtime() -> float:
    """Wall-clock seconds from an arbitrary origin."""
    return time.perf_counter()


def Wtick() -> float:
    """The resolution of `Wtime`."""
    return time.get_clock_info("perf_counter").resolution


def Get_processor_name() -> str:
    """This host's name."""
    return socket.gethostname()


def Get_version() -> tuple[int, int]:
    """The MPI standard version followed: (4, 0)."""
    return VERSION, SUBVERSION


def Get_library_version() -> str:
    """collops' version."""
    return LIBRARY_VERSION


def get_vendor() -> tuple[str, tuple[int, ...]]:
    """The MPI implementation's name and version: collops'."""
    from .. import version
    return "collops", tuple(int(part) for part in version.__version__.split(".")[:3])


def Pcontrol(level: int) -> None:
    """Profiling control: nothing to do."""


def Compute_dims(nnodes: int, dims: int | Sequence[int]) -> list[int]:
    """A balanced split of ``nnodes`` over the dimensions (MPI_Dims_create); zeros in
    ``dims`` are filled in, non-zero entries kept."""
    given = [0] * dims if isinstance(dims, int) else [int(d) for d in dims]
    fixed = 1
    for d in given:
        fixed *= d if d > 0 else 1
    if fixed == 0 or nnodes % fixed:
        raise mpi_exception(ERR_DIMS, f"Compute_dims: {nnodes} nodes do not split over {dims}")
    left = nnodes // fixed
    free = [i for i, d in enumerate(given) if d <= 0]
    if not free:
        if left != 1:
            raise mpi_exception(ERR_DIMS, f"Compute_dims: {nnodes} nodes != product of {dims}")
        return given
    factors: list[int] = []
    n, p = left, 2
    while p * p <= n:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    if n > 1:
        factors.append(n)
    sizes = [1] * len(free)
    for f in sorted(factors, reverse=True):
        sizes[sizes.index(min(sizes))] *= f
    for i, s in zip(free, sorted(sizes, reverse=True), strict=True):
        given[i] = s
    return given


class buffer(bytearray):  # noqa: N801  (mpi4py's name)
    """Memory `Alloc_mem` gives: a bytearray of fixed size with mpi4py's ``buffer``
    attributes (``address``, ``nbytes``, ``readonly``, ``obj``, ``tobytes``, ``release``)."""

    @property
    def address(self) -> int:
        """Where the memory starts."""
        return int(np.frombuffer(self, np.uint8).ctypes.data) if len(self) else 0

    @property
    def nbytes(self) -> int:
        """Its size in bytes."""
        return len(self)

    @property
    def readonly(self) -> bool:
        """False: it is writable."""
        return False

    @property
    def obj(self) -> None:
        """None: the memory is its own."""
        return None

    def release(self) -> None:
        """Nothing to release: the garbage collector frees it."""


def Alloc_mem(size: int, info: Any = None) -> buffer:
    """``size`` bytes of memory (ordinary memory: collops needs none of its own)."""
    return buffer(int(size))


def Free_mem(mem: Any) -> None:
    """Release memory from `Alloc_mem` (the garbage collector does)."""


def Attach_buffer(buf: Any) -> None:
    """Accepted: buffered sends are ordinary sends here."""


def Detach_buffer() -> None:
    """Nothing attached to detach."""


def _unsupported(what: str, name: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> NoReturn:
        raise not_implemented(what, name)
    call.__name__ = name
    call.__doc__ = f"Not implemented by collops: {what}."
    return call


class _Unsupported:
    """A class of MPI collops does not implement: making one raises `NotImplementedError`."""

    what = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise not_implemented(self.what, type(self).__name__)

    def __init_subclass__(cls, what: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.what = what
        for method in ("Create", "Allocate", "Allocate_shared", "Create_dynamic", "Open",
                       "Delete"):
            setattr(cls, method, classmethod(lambda c, *a, _m=method, **k:
                                             _raise(c.what, f"{c.__name__}.{_m}")))


def _raise(what: str, name: str) -> NoReturn:
    raise not_implemented(what, name)


class Cartcomm(_Unsupported, what="process topologies"):
    """Not implemented: Cartesian topologies."""


class Graphcomm(_Unsupported, what="process topologies"):
    """Not implemented: graph topologies."""


class Distgraphcomm(_Unsupported, what="process topologies"):
    """Not implemented: distributed graph topologies."""


class Topocomm(_Unsupported, what="process topologies"):
    """Not implemented: process topologies."""


class Win(_Unsupported, what="RMA windows (one-sided communication)"):
    """Not implemented: one-sided communication."""


class File(_Unsupported, what="MPI I/O"):
    """Not implemented: MPI I/O."""


class Session(_Unsupported, what="MPI sessions"):
    """Not implemented: sessions."""


Open_port = _unsupported("dynamic processes", "Open_port")
Close_port = _unsupported("dynamic processes", "Close_port")
Publish_name = _unsupported("dynamic processes", "Publish_name")
Unpublish_name = _unsupported("dynamic processes", "Unpublish_name")
Lookup_name = _unsupported("dynamic processes", "Lookup_name")
Register_datarep = _unsupported("MPI I/O", "Register_datarep")
