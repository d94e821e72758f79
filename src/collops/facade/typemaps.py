"""Type maps of MPI's derived datatypes over one numpy base dtype, in base elements.

A derived type here is a list of positions of base elements (``offsets``, relative to the
start of one element of the type) with a lower bound and an extent, all counted in base
elements: MPI's type map when every basic type in it is the same. Each constructor
(`contiguous`, `vector`, `indexed`, `subarray`, `struct`, …) lays copies of old types at
shifts and bounds the result as MPI does: the lower bound is the least of the copies' lower
bounds, the upper bound the greatest of their upper bounds. Byte displacements (the ``h``
forms, `struct`, `resized`) must be whole base elements.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .exceptions import ERR_ARG, mpi_exception, not_implemented

ORDER_C, ORDER_FORTRAN = 56, 57


class TypeMap(NamedTuple):
    """One element of a type: base-element ``offsets``, ``lower`` bound and ``span`` (the
    extent), in base elements."""

    offsets: np.ndarray
    lower: int
    span: int


def dense(n: int) -> TypeMap:
    """``n`` base elements one after another."""
    return TypeMap(np.arange(n, dtype=np.int64), 0, n)


def is_dense(tmap: TypeMap) -> bool:
    """Whether a type map is ``dense(n)``: its elements can be used in place."""
    n = tmap.offsets.size
    return tmap.lower == 0 and tmap.span == n and bool(
        np.array_equal(tmap.offsets, np.arange(n)))


def laid_out(copies: Sequence[tuple[TypeMap, np.ndarray]]) -> TypeMap:
    """Copies of old types, each at every shift given (base elements), as one type."""
    parts = [(old.offsets[None, :] + shifts[:, None]).ravel() for old, shifts in copies
             if shifts.size]
    if not parts:
        return TypeMap(np.empty(0, np.int64), 0, 0)
    lower = min(int(shifts.min()) + old.lower for old, shifts in copies if shifts.size)
    upper = max(int(shifts.max()) + old.lower + old.span for old, shifts in copies
                if shifts.size)
    return TypeMap(np.concatenate(parts).astype(np.int64, copy=False), lower, upper - lower)


def elements(nbytes: Any, itemsize: int, call: str, what: str) -> int:
    """A byte displacement as base elements (it must be a whole number of them)."""
    value = _integer(nbytes, call, what)
    if value % itemsize:
        raise not_implemented(f"a {what} of {value} bytes, not a whole number of "
                              f"{itemsize}-byte base elements", call)
    return value // itemsize


def _integer(value: Any, call: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise mpi_exception(ERR_ARG, f"{call}: {what} must be an integer, not {value!r}")
    return int(value)


def _counts(values: Any, call: str, what: str) -> list[int]:
    items = [_integer(v, call, what) for v in values]
    if any(v < 0 for v in items):
        raise mpi_exception(ERR_ARG, f"{call}: {what} must not be negative: {items}")
    return items


def _ranges(starts: Sequence[int], lengths: Sequence[int], step: int) -> np.ndarray:
    """Shifts ``start + j * step`` for ``j < length`` of each block, block after block."""
    if len(starts) != len(lengths):
        raise mpi_exception(ERR_ARG, f"{len(lengths)} block lengths but {len(starts)} "
                            "displacements")
    parts = [start + np.arange(length, dtype=np.int64) * step
             for start, length in zip(starts, lengths, strict=True)]
    return np.concatenate(parts) if parts else np.empty(0, np.int64)


def contiguous(old: TypeMap, count: Any, call: str) -> TypeMap:
    """``count`` copies one extent apart."""
    (n,) = _counts([count], call, "count")
    return laid_out([(old, np.arange(n, dtype=np.int64) * old.span)])


def vector(old: TypeMap, count: Any, blocklength: Any, stride: int, call: str) -> TypeMap:
    """``count`` blocks of ``blocklength`` copies, block starts ``stride`` base elements
    apart."""
    n, length = _counts([count, blocklength], call, "count and blocklength")
    starts = (np.arange(n, dtype=np.int64) * stride).tolist()
    return laid_out([(old, _ranges(starts, [length] * n, old.span))])


def indexed(old: TypeMap, blocklengths: Any, starts: Sequence[int], call: str) -> TypeMap:
    """Blocks of ``blocklengths`` copies at ``starts`` (base elements)."""
    lengths = _counts(blocklengths, call, "blocklengths")
    return laid_out([(old, _ranges(list(starts), lengths, old.span))])


def subarray(old: TypeMap, sizes: Any, subsizes: Any, starts: Any, order: int,
             call: str) -> TypeMap:
    """The ``subsizes`` block at ``starts`` of an array of ``sizes`` (C or Fortran order);
    its extent is the whole array's."""
    sizes, subsizes, starts = (_counts(v, call, name) for v, name in (
        (sizes, "sizes"), (subsizes, "subsizes"), (starts, "starts")))
    if not len(sizes) == len(subsizes) == len(starts) or not sizes:
        raise mpi_exception(ERR_ARG, f"{call}: sizes, subsizes and starts need one entry "
                            "per dimension")
    for size, sub, start in zip(sizes, subsizes, starts, strict=True):
        if sub < 1 or start + sub > size:
            raise mpi_exception(ERR_ARG, f"{call}: a block of {sub} from {start} does not "
                                f"fit a dimension of {size}")
    if order not in (ORDER_C, ORDER_FORTRAN):
        raise mpi_exception(ERR_ARG, f"{call}: order must be ORDER_C or ORDER_FORTRAN")
    grid = np.meshgrid(*[np.arange(s, s + n) for s, n in zip(starts, subsizes, strict=True)],
                       indexing="ij")
    flat = np.ravel_multi_index(grid, sizes, order="C" if order == ORDER_C else "F")
    if order == ORDER_FORTRAN:  # element order is memory order in either case
        flat = flat.transpose()
    shifts = flat.ravel().astype(np.int64) * old.span
    inner = laid_out([(old, shifts)])
    return TypeMap(inner.offsets, old.lower, int(np.prod(sizes)) * old.span)


def resized(old: TypeMap, lower: int, span: int, call: str) -> TypeMap:
    """The same elements with a new lower bound and extent."""
    return TypeMap(old.offsets, lower, span)


def positions(tmap: TypeMap, count: int, first: int) -> np.ndarray:
    """Where ``count`` elements of the type from element ``first`` of a buffer put their
    base elements, in order."""
    starts = (first + np.arange(count, dtype=np.int64)) * tmap.span
    return (starts[:, None] + tmap.offsets[None, :]).ravel()
