"""Under mpiexec: collops.MPI is mpi4py's MPI; prints one JSON line per rank."""

import json
import sys

import collops.MPI
import mpi4py.MPI

from collops import MPI

comm = MPI.COMM_WORLD
report = json.dumps({"rank": comm.Get_rank(), "same": MPI is mpi4py.MPI is collops.MPI,
                     "sum": comm.allreduce(comm.Get_rank() + 1)})
sys.stdout.write(report + "\n")  # one write per rank
sys.stdout.flush()
