"""Starting ranks: `init` for a program's world, `spawn` for a function on N ranks."""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ArgumentError
from ..transport.base import Transport
from ..transport.inproc import Fabric
from ..transport.placement import check_policy
from .arguments import checked_timeout
from .comm import Comm
from .threads import ThreadJob

_world: Comm | None = None

#: environment variables that show a process was started by an MPI launcher (mpiexec,
#: mpirun: MPICH's Hydra, Open MPI, PMI/PMIx-based launchers); Slurm's srun is recognised by
#: `is_srun_step`, since a batch script's own shell also carries SLURM_ variables
MPI_ENV_MARKERS = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MPI_LOCALRANKID",
                   "HYDRA_CONTROL_FD")
#: Slurm's step ids that are not steps started by srun (slurm.h: SLURM_PENDING_STEP,
#: SLURM_BATCH_SCRIPT, SLURM_EXTERN_CONT, SLURM_INTERACTIVE_STEP and the other reserved ids
#: from 0xfffffff0 up): the batch script, the extern step, salloc's interactive shell
SLURM_RESERVED_STEPS = 0xFFFFFFF0


def is_srun_step(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` is that of a task of a parallel ``srun`` step.

    srun gives each task SLURM_STEP_ID (SLURM_STEPID in older Slurm), SLURM_PROCID and the
    step's task count (SLURM_STEP_NUM_TASKS; SLURM_NTASKS as a fallback). A batch script's own
    shell has SLURM_PROCID and SLURM_NTASKS too, but no step id or a reserved one (the batch
    step), so it does not count; nor does a step of one task (an ``srun --pty bash`` shell),
    which gains nothing from MPI.
    """
    step = environ.get("SLURM_STEP_ID", environ.get("SLURM_STEPID"))
    tasks = environ.get("SLURM_STEP_NUM_TASKS", environ.get("SLURM_NTASKS"))
    if step is None or tasks is None or "SLURM_PROCID" not in environ:
        return False
    try:
        return 0 <= int(step) < SLURM_RESERVED_STEPS and int(tasks) > 1
    except ValueError:
        return False


def started_by_mpi_launcher(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``environ`` (default: this process's) shows an MPI launcher or an srun step."""
    env = os.environ if environ is None else environ
    return any(v in env for v in MPI_ENV_MARKERS) or is_srun_step(env)


def transport_kind(environ: Mapping[str, str], configured: str = "auto") -> str:
    """The transport `init` uses: COLLOPS_TRANSPORT, else ``configured`` unless "auto"; auto
    means shm under ``collops run`` (COLLOPS_JOB), mpi under an MPI launcher or an srun step
    (`started_by_mpi_launcher`), else inproc (a world of one)."""
    kind = environ.get("COLLOPS_TRANSPORT") or configured
    if kind != "auto":
        return kind
    if environ.get("COLLOPS_JOB"):
        return "shm"
    return "mpi" if started_by_mpi_launcher(environ) else "inproc"


def _transport_from_environment() -> Transport:
    from ..config import settings
    kind = transport_kind(os.environ, settings.transport)
    if kind == "shm":
        from ..shm.transport import ShmTransport
        transport = ShmTransport.from_env()
        atexit.register(transport.close)
        return transport
    if kind == "mpi":
        import importlib
        mpi = importlib.import_module("collops.mpi.transport")
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
          timeout: float | None = None, bind_to: str = "auto") -> list[Any]:
    """Run ``fn(comm, *args)`` on ``nprocs`` ranks; returns the results by rank.

    If any rank raises, `RankFailed` names the first failing rank and carries its traceback.
    ``bind_to`` (``auto``, ``core``, ``none``) pins the processes of ``transport="shm"`` to
    CPUs as ``collops run --bind-to`` does (`collops.transport.placement`).
    """
    if not callable(fn):
        raise ArgumentError("spawn", "fn", fn, "must be callable as fn(comm, *args)")
    if not isinstance(nprocs, int) or nprocs < 1:
        raise ArgumentError("spawn", "nprocs", nprocs, "must be a positive integer")
    timeout = checked_timeout("spawn", timeout, None)
    check_policy(bind_to, "spawn")
    if transport == "inproc":
        return ThreadJob(fn, nprocs, args).run(timeout)
    if transport == "shm":
        from .launcher import launch_function

        def worker(t: Transport) -> Any:
            return fn(Comm(t), *args)

        return launch_function(worker, nprocs, timeout=timeout, bind_to=bind_to)
    raise ArgumentError("spawn", "transport", transport, "one of inproc, shm")
