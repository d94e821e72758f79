"""The MPI transport's point-to-point contract, checked on every rank under mpiexec.

Every rank sends to every other rank messages of several sizes around the eager limit, with
tags far beyond MPI's tag range, and receives them in reverse order (so most arrive before
their receive is posted); then a wrong-size receive of a small and of a large message must
report the size that arrived. Each rank prints one JSON line: ``{"rank": r, "checked": n}``
or ``{"rank": r, "error": "..."}``.
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import numpy as np  # noqa: E402

import collops  # noqa: E402
from collops.mpi.transport import EAGER_LIMIT, MpiTransport  # noqa: E402

SIZES = [0, 1, 100, EAGER_LIMIT, EAGER_LIMIT + 1, 300_000]
BIG_TAG = (1 << 62) + 12345


def payload(src, dst, k, n):
    """Bytes that say who sent them and which message they are."""
    return ((np.arange(n, dtype=np.int64) * 7 + src * 1000 + dst * 100 + k) % 251).astype(
        np.uint8)


def wait(t, handles, seconds=30.0):
    end = time.monotonic() + seconds
    while not all(h.done for h in handles):
        t.progress()
        if time.monotonic() > end:
            raise TimeoutError(f"rank {t.rank}: handles not done: {handles}")
        t.wait_for_activity(0.01)


def main():
    comm = collops.init()
    t = comm.transport
    assert isinstance(t, MpiTransport), type(t)
    me, p = t.rank, t.size
    checked = 0
    sends = []
    for peer in range(p):
        if peer == me:
            continue
        for k, n in enumerate(SIZES):
            data = payload(me, peer, k, n)
            sends.append((t.isend(peer, BIG_TAG + k, memoryview(data), 1000 + k), data))
    time.sleep(0.2)  # let messages arrive before any receive is posted
    recvs = []
    for peer in range(p):
        if peer == me:
            continue
        for k in reversed(range(len(SIZES))):
            out = np.zeros(SIZES[k], np.uint8)
            recvs.append((t.irecv(peer, BIG_TAG + k, memoryview(out)), out, peer, k))
    wait(t, [h for h, _ in sends] + [h for h, *_ in recvs])
    for h, out, peer, k in recvs:
        assert h.nbytes == SIZES[k], (h.nbytes, SIZES[k])
        assert h.fingerprint == 1000 + k, h.fingerprint
        np.testing.assert_array_equal(out, payload(peer, me, k, SIZES[k]))
        checked += 1
    # a receive posted for the wrong size reports what arrived (small and large)
    right, left = (me + 1) % p, (me - 1) % p
    if p > 1:
        small, large = np.ones(10, np.uint8), np.ones(EAGER_LIMIT * 2, np.uint8)
        s1 = t.isend(right, 7, memoryview(small), 5)
        s2 = t.isend(right, 8, memoryview(large), 6)
        r1 = t.irecv(left, 7, memoryview(np.zeros(4, np.uint8)))
        r2 = t.irecv(left, 8, memoryview(np.zeros(16, np.uint8)))
        wait(t, [s1, s2, r1, r2])
        assert (r1.nbytes, r1.fingerprint) == (10, 5), (r1.nbytes, r1.fingerprint)
        assert (r2.nbytes, r2.fingerprint) == (EAGER_LIMIT * 2, 6), (r2.nbytes, r2.fingerprint)
        checked += 2
    comm.barrier(algorithm="dissemination")
    print(json.dumps({"rank": me, "checked": checked}), flush=True)


try:
    main()
except Exception as exc:
    print(json.dumps({"rank": collops.init().rank, "error": f"{type(exc).__name__}: {exc}"}),
          flush=True)
