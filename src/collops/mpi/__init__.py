"""The MPI transport component: ranks of an MPI job, through mpi4py.

It holds the transport (`transport`: point-to-point messages) and ``mpi_native``, MPI's own
collectives (`native`), registered here when collops is imported. Importing it neither
imports mpi4py nor initialises MPI: both happen when an MPI transport is made.
"""

from . import hier, native

native.register()
hier.register()
