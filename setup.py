"""Build the optional C accelerators; everything else is in pyproject.toml.

``collops.shm._direct`` (the blocking fast path of the ``shm_direct`` collectives) and
``collops.shm._stream`` (the inner loop of the ``shm_stream`` collectives) and
``collops.runtime._slots`` (the object collectives' slot codec) and
``collops.runtime._overlap`` (whether two arrays may share memory) and
``collops.facade._specs`` (collops.MPI's buffer-specification checks and compiled ``I…``
v-methods) and
``collops.sim._maxmin`` (the flow model's max-min rates) and ``collops.sim._flowsim`` (the flow
model's whole run) and ``collops.mpi._native`` (``mpi_native``'s compiled whole call, built only
where an ``mpi.h`` is found: the environment's, as the ``mpich`` wheel installs it, or
``COLLOPS_MPI_INCLUDE``; it links no MPI library) are optional: where no C compiler
is at hand the build goes on without them, says so with the reason, and collops runs in
pure Python (``collops info`` shows what was built, and the
first shared-memory communicator warns).
"""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

#: set to 1 for a release build: a runner that cannot be built fails the build (a wheel
#: without them would install and run several times slower)
REQUIRED = os.environ.get("COLLOPS_REQUIRE_COMPILED") == "1"

#: the headers the shared-memory runners include (their words, spin hint and clock; numpy's
#: array head, which `collops.facade._specs` reads too)
SHARED = ["src/collops/shm/_shm_wait.h", "src/collops/shm/_numpy_head.h"]


def mpi_include():
    """The directory of the ``mpi.h`` to compile ``collops.mpi._native`` against, or None."""
    for where in (os.environ.get("COLLOPS_MPI_INCLUDE"), os.path.join(sys.prefix, "include")):
        if where and os.path.isfile(os.path.join(where, "mpi.h")):
            return where
    return None


def mpi_extensions():
    """``collops.mpi._native`` where an ``mpi.h`` is at hand (no MPI library is linked: the
    module takes MPI's functions from the one mpi4py loaded), else nothing, said so."""
    where = mpi_include()
    if where is None:
        print("collops: NOT building collops.mpi._native (no mpi.h in the environment or "
              "COLLOPS_MPI_INCLUDE); mpi_native's blocking calls go through mpi4py",
              file=sys.stderr, flush=True)
        return []
    return [Extension("collops.mpi._native", ["src/collops/mpi/_native.c",
                                                "src/collops/mpi/_native_board.c"],
                      depends=[*SHARED, "src/collops/mpi/_native.h"],
                      include_dirs=[where], libraries=["dl"], optional=True,
                      extra_compile_args=["-O2", "-std=gnu11"])]


class OptionalBuildExt(build_ext):
    """Build each extension; one that fails is skipped with a line saying why, not silently."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # no compiler at all: nothing can be built
            self._skipped("all C extensions", exc)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:
            self._skipped(ext.name, exc)

    @staticmethod
    def _skipped(what, exc):
        if REQUIRED:
            raise SystemExit(f"collops: cannot build {what} ({type(exc).__name__}: {exc}) and "
                             "COLLOPS_REQUIRE_COMPILED=1 asks for a release build with them")
        print(f"collops: NOT building {what} ({type(exc).__name__}: {exc}); collops will run "
              "its shared-memory collectives in pure Python, several times slower. Install a "
              "C compiler and reinstall to get them.", file=sys.stderr, flush=True)


setup(cmdclass={"build_ext": OptionalBuildExt},
      ext_modules=[Extension("collops.shm._direct", ["src/collops/shm/_direct.c",
                                                     "src/collops/shm/_direct_runner.c",
                                                     "src/collops/shm/_direct_posted.c",
                                                     "src/collops/shm/_direct_bound.c",
                                                     "src/collops/shm/_direct_fold.c",
                                                     "src/collops/shm/_kernels.c"],
                             depends=[*SHARED, "src/collops/shm/_direct.h",
                                      "src/collops/shm/_kernels.h"], optional=True,
                             extra_compile_args=["-O2", "-std=gnu11"]),
                   Extension("collops.shm._stream", ["src/collops/shm/_stream.c",
                                                     "src/collops/shm/_stream_plan.c",
                                                     "src/collops/shm/_stream_copy.c",
                                                     "src/collops/shm/_kernels.c"],
                             depends=[*SHARED, "src/collops/shm/_stream.h",
                                      "src/collops/shm/_stream_copy.h",
                                      "src/collops/shm/_kernels.h"], optional=True,
                             extra_compile_args=["-O2", "-std=gnu11"]),
                   Extension("collops.shm._p2p", ["src/collops/shm/_p2p.c"],
                             depends=SHARED, optional=True,
                             extra_compile_args=["-O2", "-std=gnu11"]),
                   Extension("collops.runtime._slots", ["src/collops/runtime/_slots.c"],
                             optional=True, extra_compile_args=["-O2", "-std=gnu11"]),
                   Extension("collops.runtime._keys", ["src/collops/runtime/_keys.c"],
                             optional=True, extra_compile_args=["-O2", "-std=gnu11"]),
                   Extension("collops.runtime._overlap", ["src/collops/runtime/_overlap.c"],
                             depends=["src/collops/shm/_numpy_head.h"], optional=True,
                             extra_compile_args=["-O2", "-std=gnu11"]),
                   Extension("collops.facade._specs", ["src/collops/facade/_specs.c",
                                                      "src/collops/facade/_starters.c"],
                             depends=["src/collops/shm/_numpy_head.h",
                                      "src/collops/facade/_specs.h"], optional=True,
                             extra_compile_args=["-O2", "-std=gnu11"]),
                   Extension("collops.sim._maxmin", ["src/collops/sim/_maxmin.c"],
                             optional=True, extra_compile_args=["-O2", "-std=gnu11"]),
                   Extension("collops.sim._flowsim", ["src/collops/sim/_flowsim.c",
                                                      "src/collops/sim/_flowsim_rates.c"],
                             depends=["src/collops/sim/_flowsim.h"], optional=True,
                             extra_compile_args=["-O2", "-std=gnu11"]),
                   *mpi_extensions()])
