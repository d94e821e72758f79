"""Checks of scalar call arguments (timeouts, integers) that raise `ArgumentError` naming the
call, the argument, its value and the rank, rather than letting Python's own conversions
raise a bare ValueError or TypeError deep inside a call."""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..algorithms.spec import prefix
from ..errors import ArgumentError

_TIMEOUT_RULE = "must be a positive number of seconds or None"


def checked_timeout(call: str, timeout: Any, rank: int | None) -> float | None:
    """``timeout`` if it is None or a positive number (not a bool, not NaN)."""
    if timeout is None:
        return None
    kind = type(timeout)
    if kind is not float and kind is not int:  # the common cases need no ABC look-up
        if not isinstance(timeout, numbers.Real) or isinstance(timeout, bool):
            raise ArgumentError(call, "timeout", timeout, _TIMEOUT_RULE, rank)
    if not timeout > 0 or math.isnan(timeout):
        raise ArgumentError(call, "timeout", timeout, _TIMEOUT_RULE, rank)
    return timeout  # type: ignore[no-any-return]


def checked_int(call: str, name: str, value: Any, rank: int | None) -> int:
    """``value`` as an int if it is an integer (int, numpy integer; not a float or a str)."""
    try:
        return operator.index(value)
    except TypeError:
        raise ArgumentError(call, name, value, f"must be an integer, not "
                            f"{type(value).__name__}", rank) from None


def checked_ints(call: str, name: str, values: Any, rank: int | None) -> list[int]:
    """``values`` as a list of ints if it is a sequence of integers (not a str)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ArgumentError(call, name, values, "must be a sequence of integers", rank)
    try:
        return [operator.index(v) for v in values]
    except TypeError:
        raise ArgumentError(call, name, values, "must be a sequence of integers",
                            rank) from None



def writeable_buffer(call: str, out: Any, rank: int | None) -> Any:
    """``out`` as a numpy array if it is one or another buffer-protocol object (an
    `ArgumentError` otherwise); its dtype, shape and flags are the caller's to check."""
    if isinstance(out, np.ndarray):
        return out
    try:
        return np.asarray(memoryview(out))
    except TypeError:
        raise ArgumentError(call, "out", type(out).__name__, "must be an array or another "
                            "writeable buffer", rank) from None


def checked_displs(call: str, name: str, displs: Any, counts: list[int], rank: int,
                   receive: bool) -> list[int]:
    """``displs`` (rows, one per rank, not negative) for blocks of ``counts``; where they
    place *received* blocks (``receive``) no two non-empty blocks may overlap, as MPI
    requires (send blocks may overlap and leave gaps)."""
    values = checked_ints(call, name, displs, rank)
    if len(values) != len(counts):
        raise ArgumentError(call, name, displs, f"needs one entry per rank ({len(counts)})",
                            rank)
    if any(v < 0 for v in values):
        raise ArgumentError(call, name, displs, "displacements must not be negative", rank)
    if receive:
        blocks = sorted((d, d + c, j) for j, (d, c) in enumerate(zip(values, counts,
                                                                     strict=True)) if c)
        for (_, end, a), (start, _, b) in zip(blocks, blocks[1:], strict=False):
            if start < end:
                first, second = sorted((a, b))
                raise ArgumentError(
                    call, name, displs, f"the receive regions of ranks {first} "
                    f"[{values[first]}:{values[first] + counts[first]}] and {second} "
                    f"[{values[second]}:{values[second] + counts[second]}] overlap (rows)",
                    rank)
    return values


def rows_spanned(displs: list[int], counts: list[int]) -> int:
    """Rows a buffer needs to hold blocks of ``counts`` at ``displs`` (empty blocks aside)."""
    return max((d + c for d, c in zip(displs, counts, strict=True) if c), default=0)


def displaced_signature(spec: Any) -> object:
    """The counts signature of a gather's spec (its fingerprint's counts): an allgatherv's
    displacements are part of it, since its schedules may merge blocks that lie back to back
    into one message — ranks whose displacements differ then meet a `CollectiveMismatch`
    instead of messages of other sizes. None for the others (count and counts alone)."""
    if spec.collective == "allgatherv" and spec.displs != prefix(spec.counts):
        return (spec.count, spec.counts, spec.displs)
    return None

