"""``mpi4py`` as collops sees it: ``from mpi4py import MPI`` gives ``collops.MPI``.

``collops run --mpi4py`` puts the directory holding this package first on the ranks'
``sys.path``, so an unmodified mpi4py program runs on collops. ``rc``, ``get_include``,
``get_config`` and ``profile`` exist and do nothing harmful.
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("COLLOPS_MPI4PY_SHIM", "1")

__version__ = "4.1.2"
__author__ = "collops (mpi4py's interface)"


class _Rc:
    """mpi4py's runtime configuration: options are accepted and kept, collops ignores them."""

    def __init__(self) -> None:
        self.initialize = True
        self.threads = True
        self.thread_level = "multiple"
        self.finalize = None
        self.fast_reduce = True
        self.recv_mprobe = True
        self.irecv_bufsz = 32768
        self.errors = "exception"

    def __call__(self, **options: Any) -> None:
        for key, value in options.items():
            setattr(self, key, value)

    def __repr__(self) -> str:
        return f"<mpi4py.rc (collops) {vars(self)}>"


rc = _Rc()


def get_include() -> str:
    """A directory for C headers (collops has none to offer)."""
    return os.path.join(os.path.dirname(__file__), "include")


def get_config() -> dict[str, str]:
    """The build configuration (none: collops is not built against an MPI)."""
    return {}


def profile(name: str = "", *, path: Any = None) -> None:
    """Profiling libraries are not loaded under collops."""
