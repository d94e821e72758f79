"""An mpi4py program whose rank 1 calls Abort(7) while the others wait in a barrier."""

from mpi4py import MPI

comm = MPI.COMM_WORLD
if comm.Get_rank() == 1:
    comm.Abort(7)
comm.Barrier()
