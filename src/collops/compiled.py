"""Whether this build's compiled runners loaded, why not, and the one warning when they did not.

The shared-memory component carries two optional C extensions (``collops.shm._direct`` and
``collops.shm._stream``); the module that uses each holds it in an attribute that is None
when the import failed, and then runs the same protocol in pure Python, several times
slower. `runner_status` reads those attributes (so it reports what the fallback really
uses) and, for a missing runner, imports it again to recover the error's text.
"""

from __future__ import annotations

import importlib
import warnings
from dataclasses import dataclass

from . import config
from .errors import PerformanceWarning

#: each compiled runner, and the module attribute that holds it (None when it did not load)
RUNNERS = {
    "collops.shm._direct": ("collops.shm.direct", "_direct"),
    "collops.shm._stream": ("collops.shm.stream_plan", "_stream"),
    "collops.runtime._slots": ("collops.runtime.objects", "_slots"),
}
#: the other compiled extensions, each with a Python twin or an optional role: point-to-point
#: cells, the v-calls' keys, the arrays' overlap check, the facade's buffer checks and
#: compiled ``I…`` v-methods, the flow model's rates and run,
#: ``mpi_native``'s whole call (built only where MPI's headers are); reported by ``collops
#: info``, never warned of
EXTENSIONS = {
    "collops.shm._p2p": ("collops.shm.cells", "CellRing"),
    "collops.runtime._keys": ("collops.runtime.vector_calls", "_keys"),
    "collops.runtime._overlap": ("collops.runtime.overlap", "_overlap"),
    "collops.facade._specs": ("collops.facade.layouts", "_specs"),
    "collops.sim._maxmin": ("collops.sim.maxmin", "_compiled"),
    "collops.sim._flowsim": ("collops.sim.flow_compiled", "_compiled"),
    "collops.mpi._native": ("collops.mpi.compiled", "_native"),
}
#: what to do when a runner is missing
FIX = ("install a C compiler (e.g. gcc) and reinstall collops "
       "(pip install --force-reinstall --no-deps collops, or pip install -e . in a checkout); "
       "set COLLOPS_COMPILED=0 to choose the pure-Python path and silence this warning")

_warned = False


@dataclass(frozen=True)
class Runner:
    """One compiled runner: its module, whether it is in use, and why not."""

    module: str
    present: bool
    error: str | None = None


def runner_status(table: dict[str, tuple[str, str]] = RUNNERS) -> list[Runner]:
    """Every compiled runner of this build (or of ``table``: `EXTENSIONS`), present or not
    (with the import error's text)."""
    status = []
    for name, (holder, attribute) in table.items():
        if getattr(importlib.import_module(holder), attribute, None) is not None:
            status.append(Runner(name, True))
            continue
        try:
            importlib.import_module(name)
        except ImportError as exc:
            error = f"{type(exc).__name__}: {exc}"
        else:
            error = f"importable, but not loaded by {holder}"
        status.append(Runner(name, False, error))
    return status


def missing_runners_message(missing: list[Runner]) -> str:
    """The warning's text for the runners in ``missing``: the cause and the fix."""
    causes = "; ".join(f"{r.module} ({r.error})" for r in missing)
    return (f"collops' compiled runners are missing, so shared-memory collectives run in pure "
            f"Python, several times slower: {causes}. To fix: {FIX}.")


def warn_if_interpreted(stacklevel: int = 3) -> None:
    """Warn once per process (a `PerformanceWarning`) when a compiled runner is missing,
    unless the user chose the pure-Python path with ``COLLOPS_COMPILED=0``."""
    global _warned
    if _warned or not config.settings.compiled:
        return
    _warned = True
    missing = [r for r in runner_status() if not r.present]
    if missing:
        warnings.warn(missing_runners_message(missing), PerformanceWarning, stacklevel=stacklevel)
