"""Under mpiexec: collops.MPI is mpi4py's MPI; prints one JSON line per rank."""

import json

import collops.MPI
import mpi4py.MPI

from collops import MPI

comm = MPI.COMM_WORLD
print(json.dumps({"rank": comm.Get_rank(), "same": MPI is mpi4py.MPI is collops.MPI,
                  "sum": comm.allreduce(comm.Get_rank() + 1)}), flush=True)
