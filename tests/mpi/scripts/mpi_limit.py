"""Live communicators until MPI has none left: ``python mpi_limit.py``.

Each rank dups the world until a dup raises; then frees ten, dups one and runs an allreduce on
it (against the ranks' sum), and frees all. Prints ``{"rank": r, "live": n, "error": [type,
message], "after": right?}``.
"""

import json

import numpy as np

import collops


def main():
    comm = collops.init()
    live, error = [], [None, ""]
    try:
        for _ in range(5000):
            live.append(comm.dup())
    except collops.CollopsError as exc:
        error = [type(exc).__name__, str(exc).splitlines()[0]]
    for c in live[-10:]:
        c.free()
    del live[-10:]
    with comm.dup() as d:
        total = comm.size * (comm.size + 1) / 2
        after = d.allreduce(np.array([comm.rank + 1.0])).tolist() == [total]
    for c in live:
        c.free()
    print(json.dumps({"rank": comm.rank, "live": len(live) + 10, "error": error,
                      "after": after}), flush=True)


if __name__ == "__main__":
    main()
