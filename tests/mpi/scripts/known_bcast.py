"""Broadcasts whose data the envelope cannot carry, under ``mpi_native`` on one node's board:
``python known_bcast.py``.

Each rank runs every case below, each repeated (the first call of a signature goes the general
way), and checks every result against numpy; it counts how `BlockingCall.run_known` ended
(True: one phase, False: the envelope and a data phase; None: not tried). Cases:

* ``out``: every non-root passes ``out=`` of the root's dtype and shape (2 KiB, 64 KiB, 1 MiB,
  float64, int16 and complex128, at every root): one phase;
* ``none``: the last rank passes no ``out``: two phases for everyone, right results;
* ``reshaped``: the last rank's ``out`` has the root's size in another shape: two phases;
* ``timed``: the root passes a timeout: two phases, right results;
* ``wrong``: the last rank's ``out`` is one item short: it raises `ArgumentError` naming
  ``out``, the others finish, and the next call is right everywhere;
* ``mismatch``: the last rank names root 1, the others root 0: `CollectiveMismatch` on every
  rank.

Prints ``{"rank": r, "wrong": [...], "ended": {"True": n, ...}, "errors": {case: [type,
message]}}``.
"""

import json
from collections import Counter

import numpy as np

import collops
from collops.mpi import blocking

ENDED: Counter = Counter()
_real = blocking.BlockingCall.run_known


def _counted(self, *args):
    ended = _real(self, *args)
    ENDED[str(ended)] += 1
    return ended


blocking.BlockingCall.run_known = _counted


def data(root, shape, dtype, i):
    return ((np.arange(int(np.prod(shape))) % 251) * (root + 2) + i).astype(dtype).reshape(shape)


def main():
    comm = collops.init()
    me, p, last = comm.rank, comm.size, comm.size - 1
    wrong, errors = [], {}

    def bcast(x, root, out, **kw):
        return comm.bcast(x, root, out=out, algorithm="mpi_native", **kw)

    cases = [((256,), np.float64), ((8192,), np.float64), ((1 << 17,), np.float64),
             ((64, 16), np.int16), ((4096,), np.complex128)]
    for shape, dtype in cases:
        for root in range(p):
            for i in range(3):
                want = data(root, shape, dtype, i)
                x = want.copy() if me == root else np.zeros(shape, dtype)
                out = x if me == root else np.empty(shape, dtype)
                got = bcast(x, root, out)
                if not np.array_equal(got, want):
                    wrong.append(["out", np.dtype(dtype).name, list(shape), root, i])
                if not np.array_equal(out, want):
                    wrong.append(["out not filled", np.dtype(dtype).name, list(shape), root, i])
    ones_before = ENDED["True"]
    for case in ("none", "reshaped", "timed"):
        for i in range(3):
            want = data(0, (8192,), np.float64, i)
            x = want.copy() if me == 0 else None
            out = None if me == 0 else np.empty(8192)
            kw = {}
            if case == "none" and me == last:
                out = None
            if case == "reshaped" and me == last:
                out = np.empty((64, 128))
            if case == "timed" and me == 0:
                kw = {"timeout": 30}
            got = bcast(x, 0, out, **kw)
            if not np.array_equal(np.asarray(got).reshape(-1), want):
                wrong.append([case, i])
    mixed_ones = ENDED["True"] - ones_before
    want = data(0, (8192,), np.float64, 9)
    try:
        bcast(want.copy() if me == 0 else None, 0,
              np.empty(8191) if me == last else (None if me == 0 else np.empty(8192)))
        errors["wrong"] = [None, ""]
    except collops.CollopsError as exc:
        errors["wrong"] = [type(exc).__name__, str(exc)]
    got = bcast(want.copy() if me == 0 else None, 0, None if me == 0 else np.empty(8192))
    if not np.array_equal(got, want):
        wrong.append(["after wrong"])
    root = 1 if me == last else 0
    try:
        bcast(want.copy() if me == root else None, root, np.empty(8192))
        errors["mismatch"] = [None, ""]
    except collops.CollopsError as exc:
        errors["mismatch"] = [type(exc).__name__, str(exc)]
    print(json.dumps({"rank": me, "wrong": wrong, "ended": dict(ENDED),
                      "mixed_ones": mixed_ones, "errors": errors}), flush=True)


if __name__ == "__main__":
    main()
