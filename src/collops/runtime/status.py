"""`Status`: what a point-to-point receive or probe tells of the message it matched."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ArgumentError

_BYTE = np.dtype(np.uint8)


class Status:
    """The matched message's source, tag and size (MPI_Status): ``source``, ``tag``,
    ``nbytes``, ``dtype`` (the sender's; uint8 for an object form), ``cancelled`` (the
    receive was cancelled, nothing arrived) and ``count`` (elements of ``dtype``). A value:
    compared by its fields; not to be changed (MPI's status is the receive's answer)."""

    __slots__ = ("source", "tag", "nbytes", "dtype", "cancelled")

    def __init__(self, source: int, tag: int, nbytes: int, dtype: np.dtype = _BYTE,
                 cancelled: bool = False) -> None:
        self.source, self.tag, self.nbytes = source, tag, nbytes
        self.dtype, self.cancelled = dtype, cancelled

    def __repr__(self) -> str:
        return (f"Status(source={self.source}, tag={self.tag}, nbytes={self.nbytes}, "
                f"dtype={self.dtype}, cancelled={self.cancelled})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Status) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __reduce__(self) -> tuple[Any, ...]:
        return Status, self._fields()

    def _fields(self) -> tuple[Any, ...]:
        return self.source, self.tag, self.nbytes, self.dtype, self.cancelled

    @property
    def count(self) -> int:
        """Elements of the sender's dtype in the message."""
        return self.nbytes // self.dtype.itemsize if self.dtype.itemsize else 0

    def get_count(self, dtype: Any = None) -> int:
        """Elements of ``dtype`` (default: the sender's) in the message; an error if the
        message is not a whole number of them."""
        kind = self.dtype if dtype is None else np.dtype(dtype)
        if not kind.itemsize or self.nbytes % kind.itemsize:
            raise ArgumentError("Status.get_count", "dtype", kind, f"{self.nbytes} bytes are "
                                f"not a whole number of {kind.itemsize}-byte elements")
        return self.nbytes // kind.itemsize
