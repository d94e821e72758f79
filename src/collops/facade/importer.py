"""``collops.MPI`` without a file of that name: a meta-path finder resolves it.

A file or directory ``MPI`` beside the package ``collops/mpi/`` would collide on
case-insensitive file systems, so ``collops.MPI`` is found by `MPIFinder` (``import
collops.MPI``) and by ``collops.__getattr__`` (``from collops import MPI``). It resolves to
the facade (`collops.facade.api`), or, in a process started by a real MPI launcher (collops'
transport is MPI there), to mpi4py's own ``MPI`` — so one program runs on both. Under
``collops run --mpi4py`` (``COLLOPS_MPI4PY_SHIM``) it is always the facade, since there
``mpi4py`` itself is the facade.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
from types import ModuleType
from typing import Any

NAME = "collops.MPI"


def uses_mpi4py() -> bool:
    """Whether ``collops.MPI`` is mpi4py's own ``MPI`` in this process (collops' transport
    is MPI: a real ``mpiexec`` started it, or COLLOPS_TRANSPORT=mpi)."""
    from ..runtime.launcher_cli import SHIM_VARIABLE
    if os.environ.get(SHIM_VARIABLE):
        return False
    from ..config import settings
    from ..runtime.world import transport_kind
    return transport_kind(os.environ, settings.transport) == "mpi"


def resolve() -> ModuleType:
    """The module ``collops.MPI`` stands for in this process."""
    name = "mpi4py.MPI" if uses_mpi4py() else "collops.facade.api"
    return importlib.import_module(name)


class _Loader(importlib.abc.Loader):
    """Hands the import system the resolved module, leaving its own ``__spec__`` alone."""

    def __init__(self) -> None:
        self.spec: Any = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = resolve()
        self.spec = getattr(module, "__spec__", None)
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self.spec  # the import system set it to collops.MPI's


class MPIFinder(importlib.abc.MetaPathFinder):
    """Finds ``collops.MPI`` (and nothing else)."""

    def find_spec(self, fullname: str, path: Any = None,
                  target: Any = None) -> importlib.machinery.ModuleSpec | None:
        """The spec of ``collops.MPI``; None for any other module."""
        if fullname != NAME:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Loader())


def install() -> None:
    """Put `MPIFinder` on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, MPIFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MPIFinder())


def module_attribute(name: str) -> ModuleType:
    """``collops.MPI`` for ``collops.__getattr__``; AttributeError for other names."""
    if name == "MPI":
        return importlib.import_module(NAME)
    raise AttributeError(f"module 'collops' has no attribute {name!r}")
