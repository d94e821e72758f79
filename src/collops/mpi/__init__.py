"""The MPI transport component: ranks of an MPI job, through mpi4py.

It holds the transport (`transport`: point-to-point messages), ``mpi_native``, MPI's own
collectives (`native`; blocking calls in `blocking`, the agreement on a call in `board`), and
``hier``, node-aware collectives made of MPI's (`hier`), registered here when collops is
imported. Importing it neither
imports mpi4py nor initialises MPI: both happen when an MPI transport is made.
"""

from . import hier, native

native.register()
hier.register()
