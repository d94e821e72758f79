"""The facade's ``I…`` and ``…_init`` v-collectives plan a signature once, as the blocking ones
do: after the first call with a spec, later calls (the same spec objects) never parse and
check it again — counted by wrapping the planning function `buffers.vector` — and every call
still gives numpy's answer."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import collops
from collops import MPI
from collops.facade import collectives
from collops.facade.comm import wrap

pytestmark = pytest.mark.timeout(60)
ROUNDS = 6


def _gapped(p: int, n: int) -> tuple[list[int], list[int], int]:
    """Counts and displacements of ``p`` blocks of ``n`` elements with a gap before each."""
    displs = [(n + 1) * j + 1 for j in range(p)]
    return [n] * p, displs, displs[-1] + n + 1


def _rounds(comm: Any, after_first: Callable[[], None]) -> list[bool]:
    """Every v-form, non-blocking and persistent, ``ROUNDS`` times on the same spec objects,
    against numpy; ``after_first()`` once every rank has done the first round."""
    f, p, r = wrap(comm), comm.size, comm.rank
    n = 3
    counts, displs, length = _gapped(p, n)
    whole, received = np.zeros(length), np.zeros(length)
    spec = [whole, (counts, displs), MPI.DOUBLE]
    into = [received, (counts, displs), MPI.DOUBLE]
    source = np.arange(length, dtype=np.float64) + 100 * r  # rank r's alltoallv blocks
    sent = [source, (counts, displs), MPI.DOUBLE]
    x, part = np.empty(n), np.empty(n)
    persistent = [f.Allgatherv_init(x, spec), f.Gatherv_init(x, spec, 0),
                  f.Scatterv_init(spec, part, 0), f.Alltoallv_init(sent, into)]
    ok = []
    for k in range(ROUNDS):
        if k == 1:
            comm.barrier()
            after_first()
        for use_init in (False, True):
            x[:] = r + 10 * k
            whole[:] = 0
            (persistent[0].Start() if use_init else None)
            request = persistent[0] if use_init else f.Iallgatherv(x, spec)
            request.Wait()
            ok.append(all(np.array_equal(whole[d:d + n], np.full(n, j + 10 * k))
                          for j, d in enumerate(displs)))
            whole[:] = 0
            (persistent[1].Start() if use_init else None)
            (persistent[1] if use_init else f.Igatherv(x, spec, 0)).Wait()
            if r == 0:
                ok.append(all(np.array_equal(whole[d:d + n], np.full(n, j + 10 * k))
                              for j, d in enumerate(displs)))
            if r == 0:
                whole[:] = np.arange(length) + k
            (persistent[2].Start() if use_init else None)
            (persistent[2] if use_init else f.Iscatterv(spec, part, 0)).Wait()
            ok.append(np.array_equal(part, np.arange(n) + displs[r] + k))
            received[:] = 0
            (persistent[3].Start() if use_init else None)
            (persistent[3] if use_init else f.Ialltoallv(sent, into)).Wait()
            ok.append(all(np.array_equal(received[d:d + n],
                                         np.arange(n) + displs[r] + 100 * j)
                          for j, d in enumerate(displs)))
    return ok


def test_the_non_blocking_and_persistent_v_forms_plan_once(monkeypatch):
    calls: list[int] = []
    lock = threading.Lock()
    planning = collectives.vector

    def counted(*args: Any, **kwargs: Any) -> Any:
        with lock:
            calls.append(1)
        return planning(*args, **kwargs)

    monkeypatch.setattr(collectives, "vector", counted)
    after_first: list[int] = []

    def mark() -> None:
        with lock:
            after_first.append(len(calls))

    results = collops.spawn(_rounds, 2, mark, transport="inproc", timeout=30)
    assert all(all(r) for r in results), results
    assert calls, "the planning function was never called: the test wraps the wrong one"
    assert len(calls) == max(after_first), (len(calls), after_first)  # none after round one
