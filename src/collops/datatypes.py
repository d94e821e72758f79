"""Numpy dtypes collops moves and reduces, and conversion of caller buffers to arrays.

MINLOC and MAXLOC work on value/index pairs, held in a structured dtype with the fields
``value`` and ``index`` (see `pair_dtype` and `pairs`).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from .errors import ArgumentError

#: dtype kinds collops can move (b bool, i signed, u unsigned, f float, c complex, V pairs)
MOVABLE_KINDS = frozenset("biufcV")


def pair_dtype(value_dtype: Any, index_dtype: Any = np.int64) -> np.dtype:
    """The structured dtype of (value, index) pairs used by MINLOC and MAXLOC."""
    return np.dtype([("value", np.dtype(value_dtype)), ("index", np.dtype(index_dtype))])


def pairs(values: Any, indices: Any) -> np.ndarray:
    """Build an array of (value, index) pairs for MINLOC/MAXLOC from two arrays."""
    values = np.asarray(values)
    indices = np.asarray(indices)
    out = np.empty(values.shape, dtype=pair_dtype(values.dtype, indices.dtype))
    out["value"] = values
    out["index"] = indices
    return out


def is_pair_dtype(dtype: np.dtype) -> bool:
    """True for the (value, index) structured dtypes MINLOC/MAXLOC accept."""
    return dtype.names == ("value", "index")


def as_array(obj: Any, call: str, argument: str, rank: int | None = None) -> np.ndarray:
    """A C-contiguous numpy view of any buffer-protocol object (copying only when needed)."""
    arr: np.ndarray | None = None
    if isinstance(obj, np.ndarray):
        arr = obj
    else:
        if not isinstance(obj, (list, tuple)):
            try:
                arr = np.asarray(memoryview(obj))
            except TypeError:
                arr = None
        if arr is None:
            try:
                arr = np.asarray(obj)
            except Exception as exc:  # pragma: no cover - numpy's message is kept
                raise ArgumentError(call, argument, obj, f"not an array: {exc}", rank) from exc
            if arr.dtype == object:
                raise ArgumentError(
                    call, argument, obj, "object arrays cannot be sent; use the *_object variant",
                    rank,
                )
    assert arr is not None
    check_dtype(arr.dtype, call, argument, rank)
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    return arr


def check_dtype(dtype: np.dtype, call: str, argument: str, rank: int | None = None) -> None:
    """Raise unless collops can move arrays of this dtype."""
    if dtype.kind not in MOVABLE_KINDS or dtype.hasobject:
        raise ArgumentError(call, argument, dtype, "dtype cannot be moved by collops", rank)
    if dtype.kind == "V" and not is_pair_dtype(dtype):
        raise ArgumentError(
            call, argument, dtype, "structured dtypes must be (value, index) pairs", rank
        )


def dtype_token(dtype: np.dtype) -> str:
    """A short string that `dtype_from_token` turns back into ``dtype``."""
    if is_pair_dtype(dtype):
        return f"pair:{dtype['value'].str},{dtype['index'].str}"
    return dtype.str


def dtype_from_token(token: str) -> np.dtype:
    """Inverse of `dtype_token`."""
    if token.startswith("pair:"):
        value, index = token[5:].split(",")
        return pair_dtype(value, index)
    return np.dtype(token)


def address_of(a: np.ndarray | None) -> int:
    """The address of an array's first byte (0 for None or an empty array)."""
    if a is None or a.size == 0:
        return 0
    try:  # a writable contiguous array: 0.45 µs, against 1.6 through __array_interface__
        return ctypes.addressof(ctypes.c_char.from_buffer(a))  # type: ignore[arg-type]
    except (TypeError, ValueError, BufferError):
        return int(a.__array_interface__["data"][0])
