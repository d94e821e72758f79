"""Point-to-point messages between ranks 0 and 1 checked against what was sent (the tests of
the shared-memory transport's point-to-point layout settings)."""

from __future__ import annotations

from typing import Any

import numpy as np


def exchange(comm: Any, sizes: list[int], burst: int = 0) -> list[int]:
    """Rank 0 sends each size to rank 1 and back; then ``burst`` messages at once, received
    only after all were sent; the sizes (or, negated, the message numbers) that arrived
    wrong."""
    errors = []
    for nbytes in sizes:
        x = np.arange(nbytes // 8, dtype=np.float64) + 1
        if comm.rank == 0:
            comm.send(x, 1, tag=7)
            got, _ = comm.recv(source=1, tag=8)
        else:
            got, _ = comm.recv(source=0, tag=7)
            comm.send(got, 0, tag=8)
        if not np.array_equal(got, x):
            errors.append(nbytes)
    if burst:
        if comm.rank == 0:
            requests = [comm.isend(np.full(16, float(i)), 1, tag=i) for i in range(burst)]
            comm.barrier()
            for r in requests:
                r.wait()
        else:
            comm.barrier()
            for i in range(burst):
                got, _ = comm.recv(source=0, tag=i)
                if not np.array_equal(got, np.full(16, float(i))):
                    errors.append(-i)
    return errors
