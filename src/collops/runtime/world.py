"""Starting ranks: `init` for a program's world, `spawn` for a function on N ranks."""

from __future__ import annotations

import atexit
import os
import threading
import traceback
from collections.abc import Callable
from typing import Any

from ..errors import ArgumentError, PeerFailed, RankFailed
from ..transport.base import Transport
from ..transport.inproc import Fabric
from .comm import Comm

_world: Comm | None = None

#: environment variables that show a process was started by an MPI launcher
MPI_ENV_MARKERS = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MPI_LOCALRANKID",
                   "HYDRA_CONTROL_FD")


def _transport_from_environment() -> Transport:
    from ..config import settings
    kind = os.environ.get("COLLOPS_TRANSPORT") or settings.transport
    if kind == "auto":
        if os.environ.get("COLLOPS_JOB"):
            kind = "shm"
        elif any(v in os.environ for v in MPI_ENV_MARKERS):
            kind = "mpi"
        else:
            kind = "inproc"
    if kind == "shm":
        from ..transport.shm import ShmTransport
        transport = ShmTransport.from_env()
        atexit.register(transport.close)
        return transport
    if kind == "mpi":
        import importlib
        mpi = importlib.import_module("collops.transport.mpi")
        return mpi.MpiTransport.world()  # type: ignore[no-any-return]
    if kind == "inproc":
        return Fabric(1).endpoint(0)
    raise ArgumentError("init", "COLLOPS_TRANSPORT", kind, "one of auto, inproc, shm, mpi")


def init() -> Comm:
    """This process's world communicator (size 1 when started without a launcher)."""
    global _world
    if _world is None:
        _world = Comm(_transport_from_environment())
    return _world


def spawn(fn: Callable[..., Any], nprocs: int, *args: Any, transport: str = "inproc",
          timeout: float | None = None) -> list[Any]:
    """Run ``fn(comm, *args)`` on ``nprocs`` ranks; returns the results by rank.

    If any rank raises, `RankFailed` names the first failing rank and carries its traceback.
    """
    if not isinstance(nprocs, int) or nprocs < 1:
        raise ArgumentError("spawn", "nprocs", nprocs, "must be a positive integer")
    if transport == "inproc":
        return _spawn_threads(fn, nprocs, args, timeout)
    if transport == "shm":
        from .launcher import launch_function

        def worker(t: Transport) -> Any:
            return fn(Comm(t), *args)

        return launch_function(worker, nprocs, timeout=timeout)
    raise ArgumentError("spawn", "transport", transport, "one of inproc, shm")


def _spawn_threads(fn: Callable[..., Any], nprocs: int, args: tuple[Any, ...],
                   timeout: float | None) -> list[Any]:
    fabric = Fabric(nprocs)
    results: list[Any] = [None] * nprocs
    failures: dict[int, tuple[BaseException, str]] = {}

    def run(rank: int) -> None:
        try:
            results[rank] = fn(Comm(fabric.endpoint(rank)), *args)
        except BaseException as exc:  # noqa: BLE001 - reported to the caller below
            failures[rank] = (exc, traceback.format_exc())
            fabric.mark_failed(rank, f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=run, args=(r,), name=f"collops-rank-{r}", daemon=True)
               for r in range(nprocs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        if t.is_alive():
            fabric.mark_failed(-1, "spawn timeout")
            raise RankFailed(threads.index(t), f"did not finish within {timeout} s", "Timeout")
    if failures:
        primary = [r for r, (e, _) in failures.items() if not isinstance(e, PeerFailed)]
        rank = min(primary) if primary else min(failures)
        exc, text = failures[rank]
        raise RankFailed(rank, text, type(exc).__name__) from exc
    return results
