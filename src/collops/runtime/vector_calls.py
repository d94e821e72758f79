"""The v-collectives on the blocking fast path: the hashable key of a call's counts and
displacements, and the spec its general path would make from them (see `FastPaths`).

A v-call whose counts are given everywhere it needs them is one phase, like its regular form,
so it takes the same route: its key (``counts``, displacements and, for ``reduce_scatter``,
the operator) stands where a reduction's operator stands in the prepared calls' keys, and a
signature run by a compiled runner is bound like any other. Whatever the general path would
treat specially — counts exchanged, a result with gaps (zeros to write), a bad argument — is
left to it (None here).
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import numpy as np

from ..algorithms.spec import CallSpec, make_spec
from .arguments import checked_displs, rows_spanned
from .commbase import _row_size

if TYPE_CHECKING:
    from .commbase import CommBase

#: the v-collectives that take the fast path
VECTOR_FAST = frozenset({"allgatherv", "gatherv", "reduce_scatter", "alltoallv"})


def _ints(values: Any) -> tuple[int, ...] | None:
    """``values`` as a tuple of ints (None for None); raises TypeError when it is not one."""
    if values is None:
        return None
    if isinstance(values, (str, bytes)):
        raise TypeError(values)
    return tuple(operator.index(v) for v in values)


def vector_key(*parts: Any) -> tuple[Any, ...] | None:
    """The hashable key of a v-call's counts and displacements (None: not all of them are
    sequences of integers, which the general path reports)."""
    try:
        return tuple(_ints(part) for part in parts)
    except TypeError:
        return None


def _counts_ok(counts: tuple[int, ...] | None, p: int) -> bool:
    return counts is not None and len(counts) == p and min(counts, default=0) >= 0


def _packed_rows(comm: CommBase, call: str, name: str, displs: tuple[int, ...] | None,
                 counts: tuple[int, ...]) -> tuple[bool, tuple[int, ...] | None]:
    """``(usable, displs)``: displacements of received blocks checked (`ArgumentError` if
    they overlap; None when not given); not ``usable`` when they leave gaps, since the result
    then needs zeros between its blocks (the general path makes it)."""
    if displs is None:
        return True, None
    checked_displs(call, name, displs, list(counts), comm.rank, True)
    return rows_spanned(list(displs), list(counts)) == sum(counts), displs


def vector_blocking_spec(comm: CommBase, collective: str, x: np.ndarray, key: Any, root: int
                         ) -> tuple[CallSpec, object, tuple[int, ...], bool] | None:
    """``(spec, counts signature, result shape, whether this rank receives)`` of a blocking
    v-call on ``x`` with ``key`` (`vector_key`), as its general path makes them."""
    if x.ndim == 0 or key is None:
        return None
    p, dt, rank = comm.size, x.dtype, comm.rank
    rows, trailing, per_row = x.shape[0], x.shape[1:], _row_size(x)
    if collective in ("allgatherv", "gatherv"):
        counts, displs = key
        if not _counts_ok(counts, p) or counts[rank] != rows:
            return None
        root = comm._check_root(collective, root) if collective == "gatherv" else 0
        receives = collective == "allgatherv" or rank == root
        usable, placed = _packed_rows(comm, collective, "displs",
                                      displs if receives else None, counts)
        if not usable:
            return None
        spec = make_spec(collective, p, dt, counts=[c * per_row for c in counts], root=root,
                         displs=None if placed is None else [d * per_row for d in placed])
        return spec, None, (sum(counts), *trailing), receives
    if collective == "reduce_scatter":
        op, counts = key
        if not _counts_ok(counts, p) or sum(counts) != rows:
            return None
        resolved = comm._op(collective, op, dt)
        spec = make_spec(collective, p, dt, counts=[c * per_row for c in counts], op=resolved)
        return spec, (spec.count, spec.counts, resolved.name), (counts[rank], *trailing), True
    if collective == "alltoallv":
        sendcounts, sdispls, recvcounts, rdispls = key
        if not (_counts_ok(sendcounts, p) and _counts_ok(recvcounts, p)):
            return None
        if recvcounts[rank] != sendcounts[rank]:
            return None
        if sdispls is None:
            if sum(sendcounts) > rows:
                return None
        else:
            comm._send_blocks(collective, x, sendcounts, sdispls, ("sendcounts", "sdispls"))
        usable, placed = _packed_rows(comm, collective, "rdispls", rdispls, recvcounts)
        if not usable:
            return None
        spec = make_spec(collective, p, dt, sendcounts=[c * per_row for c in sendcounts],
                         sdispls=None if sdispls is None else [d * per_row for d in sdispls],
                         recvcounts=[c * per_row for c in recvcounts],
                         rdispls=None if placed is None else [d * per_row for d in placed])
        return spec, ("v", per_row), (sum(recvcounts), *trailing), True
    return None
