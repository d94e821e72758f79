"""Ending an MPI job on purpose, with its reason on stderr.

Four things end a collops MPI job early: an uncaught exception (`install_abort_hook`), a rank
closing the transport while a peer of its node is dead (``MPI_Finalize`` would wait for it for
ever), and the two guards that free a blocking MPI call when a peer of the node died
(`liveness.BlockingGuard`, `blocking`'s watchdog). Each must leave its reason where the user
reads it, so each goes through `abort_job`:

1. the message is written and flushed;
2. the shared-memory files this process mapped are unlinked (MPI_Abort would leave them);
3. the process waits (at most 2 s) until ``mpiexec`` has read its stderr pipe: ``MPI_Abort``
   makes the launcher kill every rank and exit, and what still sits in the pipe is lost — the
   job then ends with exit code 1 and not a word of why (seen in the fault campaign);
4. ``MPI_Abort(1)``.
"""

from __future__ import annotations

import array
import fcntl
import os
import sys
import termios
import time
import traceback
from types import TracebackType
from typing import Any


def _mpi() -> Any:
    from mpi4py import MPI  # the transport that calls this has imported it already

    return MPI


def abort_job(message: str) -> None:
    """Write ``message`` to stderr, wait until it is read, and abort the whole MPI job."""
    sys.stderr.write(message if message.endswith("\n") else message + "\n")
    sys.stderr.flush()
    sys.stdout.flush()
    unlink_mapped_shm()
    for stream in (sys.stderr, sys.stdout):
        try:
            wait_until_read(stream.fileno())
        except (AttributeError, ValueError, OSError):
            pass
    _mpi().COMM_WORLD.Abort(1)


def install_abort_hook(rank: int, size: int) -> None:
    """Make an uncaught exception print this rank's traceback and abort the whole MPI job."""

    def abort(kind: type[BaseException], value: BaseException,
              tb: TracebackType | None) -> None:
        text = "".join(traceback.format_exception(kind, value, tb))
        abort_job(f"collops: uncaught {kind.__name__} on MPI rank {rank} of {size}; "
                  f"aborting the job\n[rank {rank}] " +
                  text.rstrip("\n").replace("\n", f"\n[rank {rank}] "))

    sys.excepthook = abort


def unlink_mapped_shm() -> None:
    """Unlink the shared-memory files this process has mapped (MPI_Abort would leave them).

    MPICH removes its ``/dev/shm/mpich_shm_*`` segment in ``MPI_Finalize``, not on abort; the
    ranks that still use it keep their mappings, as unlinking only drops the name.
    """
    try:
        with open("/proc/self/maps") as maps:
            fields = [line.split(None, 5) for line in maps]
    except OSError:
        return
    paths = {f[5].strip() for f in fields if len(f) == 6}
    for path in paths:
        if path.startswith("/dev/shm/") and not path.endswith("(deleted)"):
            try:
                os.unlink(path)
            except OSError:
                pass


def wait_until_read(fd: int, limit: float = 2.0) -> None:
    """Wait (at most ``limit`` s) until the reader of pipe ``fd`` has taken what was written.

    Where ``fd`` is not a pipe (a terminal, a file) there is nothing to wait for.
    """
    unread = array.array("i", [0])
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            fcntl.ioctl(fd, termios.FIONREAD, unread)
        except OSError:
            return
        if unread[0] == 0:
            return
        time.sleep(0.001)
