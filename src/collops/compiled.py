"""Whether this build's compiled runners loaded, and why not.

The shared-memory component carries two optional C extensions (``collops.shm._direct`` and
``collops.shm._stream``); the module that uses each holds it in an attribute that is None
when the import failed, and then runs the same protocol in pure Python, several times
slower. `runner_status` reads those attributes (so it reports what the fallback really
uses) and, for a missing runner, imports it again to recover the error's text.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

#: each compiled runner, and the module attribute that holds it (None when it did not load)
RUNNERS = {
    "collops.shm._direct": ("collops.shm.direct", "_direct"),
    "collops.shm._stream": ("collops.shm.stream_plan", "_stream"),
}


@dataclass(frozen=True)
class Runner:
    """One compiled runner: its module, whether it is in use, and why not."""

    module: str
    present: bool
    error: str | None = None


def runner_status() -> list[Runner]:
    """Every compiled runner of this build, present or not (with the import error's text)."""
    status = []
    for name, (holder, attribute) in RUNNERS.items():
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
