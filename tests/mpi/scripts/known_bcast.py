"""Broadcasts whose data the envelope cannot carry, under ``mpi_native`` on one node's board:
``python known_bcast.py``.

Each rank runs every case below, each repeated (the first call of a signature goes the general
way, the second binds it: in C, `BlockingCall.bind_known`, with the compiled runner), and checks
every result against numpy; it counts how `BlockingCall.run_known` ended (True: one phase,
False: the envelope and a data phase; None: not tried) and how a compiled whole call's Python
rest did (``rest True``/``rest False``: not every rank posted the signature). Cases:

* ``out``: every non-root passes ``out=`` of the root's dtype and shape (2 KiB, 64 KiB, 1 MiB,
  float64, int16 and complex128, at every root): one phase;
* ``none``: the last rank passes no ``out``: two phases for everyone, right results;
* ``reshaped``: the last rank's ``out`` has the root's size in another shape: two phases;
* ``timed``: the root passes a timeout: two phases, right results;
* bound, then mixed: three calls bind a signature, then the last rank passes no ``out``, then
  the root passes a timeout: the others' bound calls (compiled: their rest) run two phases;
* ``wrong``: the last rank's ``out`` is one item short: it raises `ArgumentError` naming
  ``out``, the others finish, and the next call is right everywhere;
* ``mismatch``: the last rank names root 1, the others root 0: `CollectiveMismatch` on every
  rank.

Prints ``{"rank": r, "wrong": [...], "ended": {"True": n, ...}, "route": how a repeated
bcast runs after the ``out`` cases, "rests": compiled calls of those cases in two phases,
"mixed_ones": one-phase calls of the mixed cases, "errors": {case: [type, message]}}``.
"""

import json
from collections import Counter

import numpy as np

import collops
from collops.mpi import blocking

ENDED: Counter = Counter()
_real = blocking.BlockingCall.run_known
_real_after = blocking.BlockingCall.after_known
INSIDE = [False]


def _counted(self, *args):
    INSIDE[0] = True
    try:
        ended = _real(self, *args)
    finally:
        INSIDE[0] = False
    ENDED[str(ended)] += 1
    return ended


def _after_counted(self, *args):
    # called by the compiled whole call's rest (not from run_known): how such a call ended
    one = _real_after(self, *args)
    if not INSIDE[0]:
        ENDED[f"rest {one}"] += 1
    return one


blocking.BlockingCall.run_known = _counted
blocking.BlockingCall.after_known = _after_counted


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
    route = comm.bound_route("bcast", "mpi_native")
    rests = ENDED["rest False"]  # compiled calls that went in two phases
    ones_before = ENDED["True"] + ENDED["rest True"]
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
    mixed_ones = ENDED["True"] + ENDED["rest True"] - ones_before
    # a signature bound (the root's x, every reader's out=), then a call whose last rank
    # passes no out=, then one whose root has a time limit: the others' bound calls meet
    # them (compiled: their rest runs two phases)
    for i in range(6):
        want = data(0, (8192,), np.float64, 20 + i)
        out = None if me == 0 or (i == 3 and me == last) else np.empty(8192)
        got = bcast(want.copy() if me == 0 else None, 0, out,
                    **({"timeout": 30} if i == 4 and me == 0 else {}))
        if not np.array_equal(got, want):
            wrong.append(["bound, then mixed", i])
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
    print(json.dumps({"rank": me, "wrong": wrong, "ended": dict(ENDED), "route": route,
                      "rests": rests, "mixed_ones": mixed_ones, "errors": errors}), flush=True)


if __name__ == "__main__":
    main()
