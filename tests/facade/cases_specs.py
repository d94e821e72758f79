"""The v-collectives called again and again with the same spec objects whose counts and
displacements change in place between calls (lists, ndarrays) or are replaced (tuples), as
the remembered layouts (`facade.layouts`) must see; bad values after good ones raise on every
rank, naming the argument, the rank and the call. Checked against numpy inside the ranks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from collops import MPI

from .cases import case, data

#: how a form holds counts and displacements, and how it takes new values
Holder = Callable[[list[int]], Any]
HOLDERS: dict[str, tuple[Holder, Callable[[Any, list[int]], Any]]] = {
    "list": (list, lambda old, new: old.__setitem__(slice(None), new) or old),
    "ndarray": (lambda v: np.array(v, np.int32),
                lambda old, new: old.__setitem__(slice(None), new) or old),
    "tuple": (tuple, lambda old, new: tuple(new)),
}


def _layout(p: int, k: int, shift: int = 0) -> tuple[list[int], list[int]]:
    """Round ``k``'s counts and gapped displacements (a gap of ``1 + (k + r) % 2`` before
    block r)."""
    counts = [1 + (r + k + shift) % 3 for r in range(p)]
    displs, at = [], 0
    for r in range(p):
        at += 1 + (k + r) % 2
        displs.append(at)
        at += counts[r]
    return counts, displs


def _placed(counts: list[int], displs: list[int], size: int, k: int = 0) -> np.ndarray:
    """Every rank's `data` (plus ``k``) placed at its displacement, -1 in the gaps."""
    want = np.full(size, -1.0)
    for r, (n, at) in enumerate(zip(counts, displs, strict=True)):
        want[at:at + n] = data(r, n) + k
    return want


def _spec(form: str, buf: np.ndarray, counts: Any, displs: Any) -> list[Any]:
    """A v-spec made anew for each call, as programs do: ``[buf, (counts, displs), type]``
    (``pair``) or ``[buf, counts, displs, type]``."""
    if form == "pair":
        return [buf, (counts, displs), MPI.DOUBLE]
    return [buf, counts, displs, MPI.DOUBLE]


ROUNDS, SIZE = 4, 64


@case
def case_vector_specs_changing(comm: Any) -> list[tuple[str, Any, Any]]:
    p, me, root = comm.size, comm.rank, 0
    results: list[tuple[str, Any, Any]] = []
    for name, (make, change) in HOLDERS.items():
        counts, displs = _layout(p, 0)
        c, d = make(counts), make(displs)
        whole = np.full(SIZE, -1.0)
        for k in range(ROUNDS):
            counts, displs = _layout(p, k)
            c, d = change(c, counts), change(d, displs)
            for form in ("pair", "four"):
                label = f"{name} {form} round {k}"
                mine = data(me, counts[me]) + k
                want = _placed(counts, displs, SIZE, k)
                whole[:] = -1.0
                comm.Allgatherv(mine, _spec(form, whole, c, d))
                results.append((f"allgatherv {label}", whole.copy(), want))
                whole[:] = -1.0
                comm.Gatherv([mine, MPI.DOUBLE], _spec(form, whole, c, d), root)
                results.append((f"gatherv {label}", whole.copy() if me == root else want, want))
                source = want.copy()
                whole[:] = source
                got = np.full(counts[me], -1.0)
                comm.Scatterv(_spec(form, whole, c, d), got, root)
                results.append((f"scatterv {label}", got, data(me, counts[me]) + k))
    return results


@case
def case_alltoallv_specs_changing(comm: Any) -> list[tuple[str, Any, Any]]:
    p, me = comm.size, comm.rank
    results: list[tuple[str, Any, Any]] = []
    for name, (make, change) in HOLDERS.items():
        sc, sd = (make(v) for v in _layout(p, 0))
        rc, rd = (make(v) for v in _layout(p, 0))
        send, recv = np.zeros(SIZE), np.full(SIZE, -1.0)
        for k in range(ROUNDS):
            # rank r sends 1 + (j + k + r) % 3 elements to rank j
            scounts = [1 + (j + k + me) % 3 for j in range(p)]
            rcounts = [1 + (me + k + r) % 3 for r in range(p)]
            sdispls = [sum(scounts[:j]) + 2 * j for j in range(p)]
            rdispls = [sum(rcounts[:r]) + 1 + (k + r) % 2 + r for r in range(p)]
            sc, sd = change(sc, scounts), change(sd, sdispls)
            rc, rd = change(rc, rcounts), change(rd, rdispls)
            send[:] = 1000 * k + 100 * me + np.arange(SIZE)
            recv[:] = -1.0
            comm.Alltoallv([send, (sc, sd), MPI.DOUBLE], [recv, rc, rd, MPI.DOUBLE])
            want = np.full(SIZE, -1.0)
            for r in range(p):  # rank r's block for me starts at its sdispls[me]
                theirs = [1 + (j + k + r) % 3 for j in range(p)]
                at = sum(theirs[:me]) + 2 * me
                want[rdispls[r]:rdispls[r] + rcounts[r]] = \
                    1000 * k + 100 * r + np.arange(at, at + rcounts[r])
            results.append((f"alltoallv {name} round {k}", recv.copy(), want))
    return results


def _error_text(call: Callable[[], Any]) -> str:
    try:
        call()
    except MPI.Exception as exc:
        return str(exc)
    return "no error"


@case
def case_vector_specs_turning_bad(comm: Any) -> list[tuple[str, Any, Any]]:
    """Good counts, then bad ones in place (every rank alike, so every rank raises before
    sending), then good ones again."""
    p, me = comm.size, comm.rank
    results: list[tuple[str, Any, Any]] = []
    counts, displs = _layout(p, 0)
    mine = data(me, counts[me])
    whole = np.full(SIZE, -1.0)
    spec = [whole, (counts, displs), MPI.DOUBLE]
    want = _placed(counts, displs, SIZE)
    for bad, words in (((0, -1), "must not be negative"), ((p - 1, SIZE), "goes beyond")):
        comm.Allgatherv(mine, spec)
        results.append(("allgatherv good", whole.copy(), want))
        index, value = bad
        kept = counts[index]
        counts[index] = value
        text = _error_text(lambda: comm.Allgatherv(mine, spec))
        results.append((f"allgatherv {words}", all(w in text for w in (
            words, "recvbuf", f"rank {me}", "Allgatherv")), True))
        counts[index] = kept
    received = [np.full(SIZE, -1.0), (list(counts), list(displs)), MPI.DOUBLE]
    displs[-1] = SIZE  # the last block beyond the buffer
    text = _error_text(lambda: comm.Alltoallv(spec, received))
    results.append(("alltoallv displacement beyond", all(w in text for w in (
        "goes beyond", "sendbuf", f"rank {me}", "Alltoallv")), True))
    return results
