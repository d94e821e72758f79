"""The compiled whole call of ``mpi_native`` (``collops.mpi._native``), where it can run.

A repeated blocking call bound to its signature (`BlockingCall.bind_call`, `bind_bcast`)
goes, through Python, from the communicator's method to the runner, the board and mpi4py's
method, each a frame, and mpi4py parses a buffer specification on every call: at 8 bytes that
is about as long as MPI's own collective. The compiled runner does the same steps — the
array checks, the call's number, the board's entry, MPI's blocking collective with the
prepared counts, datatype and operator — in one C call, and hands anything off the inline
route back to Python (`BlockingCall.finish`) at the point where the Python route would be.

It is used only where it is certainly safe: the extension was built (against the
environment's ``mpi.h``; it links no MPI library), ``COLLOPS_COMPILED`` is not 0, and the
MPI library mpi4py loaded has the handles of the header compiled against (`load`, which
takes MPI's functions from that very library, never loading another). mpi4py 4 may run Open
MPI or the MPI ABI instead of MPICH; its handles then differ and the Python route runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import config
from .native import _REDUCING, MPI_NATIVE, mpi_reduction
from .transport import COLLECTIVE_SLOTS

try:
    from . import _native
except ImportError:  # not built: the Python route
    _native = None  # type: ignore[assignment]

#: whether `load` succeeded (None: not tried yet)
_LOADED: bool | None = None

#: the collectives the compiled runner calls, by name
_KINDS = ("barrier", "bcast", "allreduce", "reduce", "allgather", "alltoall", "gather", "scan",
          "exscan", "reduce_scatter_block")


def available(MPI: Any) -> bool:
    """Whether the compiled runner may run over mpi4py's ``MPI`` (built, allowed, loaded)."""
    global _LOADED
    if _native is None or not config.settings.compiled:
        return False
    if _LOADED is None:
        try:
            _LOADED = bool(_native.load(MPI.__file__, MPI._sizeof(MPI.Comm),
                                        MPI.COMM_WORLD.handle, MPI.BYTE.handle,
                                        MPI.DOUBLE.handle, MPI.SUM.handle))
        except (AttributeError, TypeError, ValueError, OverflowError):
            _LOADED = False  # an mpi4py without handles or a module file
    return _LOADED


def runner(blocking: Any) -> Any:
    """The compiled runner of ``blocking`` (a `BlockingCall`), or None where it cannot run."""
    MPI = blocking._MPI
    spec = blocking.spec
    collective = spec.collective
    if blocking.flavour is not MPI_NATIVE or collective not in _KINDS or not available(MPI):
        return None  # another flavour's operation (`hier`'s phases) is not MPI's one call
    if COLLECTIVE_SLOTS > 64 or len(blocking.others) > 64:
        return None
    byte = MPI.BYTE
    datatype, op, count = byte, MPI.SUM, 0
    if collective in _REDUCING:
        assert spec.op is not None
        datatype, op = mpi_reduction(MPI, spec.op, spec.dtype)
        count = spec.count
    elif collective == "bcast":
        count = spec.count * spec.itemsize
    elif collective in ("allgather", "gather"):
        count = (spec.counts[blocking.rank] if spec.counts else 0) * spec.itemsize
    elif collective == "alltoall":
        count = (spec.sendcounts[0] if spec.sendcounts else 0) * spec.itemsize
    if count >= 2**31:  # MPI's counts are C ints: the Python route's large-count support
        return None
    transport = blocking.transport
    comms = tuple(mc.handle for mc in transport._pools[blocking.pool_key])
    board = blocking.board
    watchdog = blocking.watchdog
    watch, watch_id = (None, 0) if watchdog is None else watchdog.watch(blocking)
    blocking._handles = (datatype, op)  # the MPI objects whose handles the runner holds
    return _native.Runner(
        kind=getattr(_native, collective.upper()), comms=comms, count=count,
        datatype=datatype.handle, op=op.handle, root=spec.root,
        is_root=blocking.rank == spec.root,
        board=None if board is None else board.words,
        mine=0 if board is None else board.mine, rows=blocking.rows,
        fingerprint=blocking.fingerprint, spin=transport._spin_seconds,
        agree_first=blocking.agree_first, transport=transport, active=blocking._active,
        watch=watch, watch_id=watch_id, finish=blocking.finish, fail=blocking.failed,
        ndarray=np.ndarray, flags=-1 if board is None else board.flags, mark=blocking.mark,
        pending=None if board is None else board.pending, defer=blocking.defer)
