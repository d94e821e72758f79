"""An unmodified mpi4py program: 1-D heat diffusion with a halo exchange, then a
master–worker loop. It imports mpi4py only, so it runs under any of

    mpiexec -n 4 python examples/mpi4py_heat.py
    collops run -n 4 --mpi4py examples/mpi4py_heat.py      (no MPI installation needed)
    collops run -n 4 --mpi4py python -m mpi4py examples/mpi4py_heat.py

and prints the same numbers (rank 0 checks them against a serial numpy computation).
"""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
CELLS_PER_RANK, STEPS, ALPHA = 16, 50, 0.25

# -- halo exchange: each rank owns CELLS_PER_RANK cells plus one ghost cell at each end -----
n_total = CELLS_PER_RANK * size
initial = np.sin(np.linspace(0.0, np.pi, n_total)) * 100.0
u = np.zeros(CELLS_PER_RANK + 2)
comm.Scatter(initial if rank == 0 else None, u[1:-1], root=0)
left = rank - 1 if rank > 0 else MPI.PROC_NULL
right = rank + 1 if rank < size - 1 else MPI.PROC_NULL
for _ in range(STEPS):
    comm.Sendrecv(u[1:2], dest=left, sendtag=0, recvbuf=u[-1:], source=right, recvtag=0)
    comm.Sendrecv(u[-2:-1], dest=right, sendtag=1, recvbuf=u[:1], source=left, recvtag=1)
    u[1:-1] = u[1:-1] + ALPHA * (u[:-2] - 2 * u[1:-1] + u[2:])  # fixed ends (ghosts 0)
result = np.empty(n_total) if rank == 0 else None
comm.Gather(u[1:-1].copy(), result, root=0)
energy = np.zeros(1)
comm.Allreduce(np.array([u[1:-1].sum()]), energy, op=MPI.SUM)

# -- master-worker: rank 0 hands out tasks, workers send back squares ----------------------
TASKS = 20
if rank == 0:
    serial = np.zeros(n_total + 2)
    serial[1:-1] = initial
    for _ in range(STEPS):
        serial[1:-1] = serial[1:-1] + ALPHA * (serial[:-2] - 2 * serial[1:-1] + serial[2:])
    assert np.allclose(result, serial[1:-1]), "halo exchange differs from the serial run"
    assert np.isclose(energy[0], serial.sum())
    answers = {}
    status = MPI.Status()
    next_task, active = 0, 0
    for worker in range(1, size):
        if next_task < TASKS:
            comm.send(next_task, dest=worker, tag=1)
            next_task, active = next_task + 1, active + 1
        else:
            comm.send(None, dest=worker, tag=0)
    while active:
        task, square = comm.recv(source=MPI.ANY_SOURCE, tag=2, status=status)
        answers[task] = square
        worker = status.Get_source()
        if next_task < TASKS:
            comm.send(next_task, dest=worker, tag=1)
            next_task += 1
        else:
            comm.send(None, dest=worker, tag=0)
            active -= 1
    if size == 1:
        answers = {t: t * t for t in range(TASKS)}
    assert answers == {t: t * t for t in range(TASKS)}, answers
    print(f"heat: {STEPS} steps on {n_total} cells over {size} ranks, energy "
          f"{energy[0]:.6f}; master-worker: {len(answers)} tasks done")
else:
    while True:
        task = comm.recv(source=0, tag=MPI.ANY_TAG)
        if task is None:
            break
        comm.send((task, task * task), dest=0, tag=2)
comm.Barrier()
