"""``mpi4py.MPI`` is ``collops.MPI`` (the facade) in a ``collops run --mpi4py`` job."""

import sys

from collops import MPI

sys.modules[__name__] = MPI
