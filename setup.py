"""Build the optional C accelerators; everything else is in pyproject.toml.

``collops.shm._direct`` (the blocking fast path of the ``shm_direct`` collectives) and
``collops.shm._stream`` (the inner loop of the ``shm_stream`` collectives) are
optional: where no C compiler is at hand the build goes on without them and collops runs in
pure Python.
"""

from setuptools import Extension, setup

#: the header both include (their shared-memory words, spin hint and clock)
SHARED = ["src/collops/shm/_shm_wait.h"]

setup(ext_modules=[Extension("collops.shm._direct", ["src/collops/shm/_direct.c"],
                             depends=SHARED, optional=True,
                             extra_compile_args=["-O2", "-std=gnu11"]),
                   Extension("collops.shm._stream", ["src/collops/shm/_stream.c"],
                             depends=SHARED, optional=True,
                             extra_compile_args=["-O2", "-std=gnu11"])])
