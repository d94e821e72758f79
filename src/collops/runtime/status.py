"""`Status`: what a point-to-point receive or probe tells of the message it matched."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ArgumentError


@dataclass(frozen=True)
class Status:
    """The matched message's source, tag and size (MPI_Status)."""

    source: int
    tag: int
    #: bytes of the message
    nbytes: int
    #: the sender's dtype (uint8 for an object form)
    dtype: np.dtype = np.dtype(np.uint8)
    #: whether the receive was cancelled (then nothing arrived)
    cancelled: bool = False

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
