"""Build the optional C accelerator; everything else is in pyproject.toml.

``collops.transport._direct`` (the blocking fast path of the ``shm_direct`` collectives) is
optional: where no C compiler is at hand the build goes on without it and collops runs in
pure Python.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("collops.transport._direct", ["src/collops/transport/_direct.c"],
                             optional=True, extra_compile_args=["-O2", "-std=gnu11"])])
