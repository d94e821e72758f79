"""Buffers whose datatype has gaps, moved through packed copies.

collops moves dense arrays. A buffer spec whose datatype leaves gaps (a `Create_vector`
column, an indexed block, a subarray) becomes a packed array of its elements: a call's
`Stage` copies the elements in before the call starts (every start, for a persistent
request) and, for a buffer the call writes, back out once it completed — only the type's
elements, so what the gaps hold is left as it was, as MPI leaves it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


class Stage:
    """The gapped buffers of one call: ``(buffer, positions, packed, written)`` each."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[tuple[np.ndarray, np.ndarray, np.ndarray, bool]] = []

    def __bool__(self) -> bool:
        return bool(self.items)

    def add(self, buffer: np.ndarray, positions: np.ndarray, written: bool) -> np.ndarray:
        """The packed array standing for ``buffer``'s elements at ``positions`` (1-D array
        of base elements); ``written``: copied back by `unpack`."""
        packed = np.empty(positions.size, buffer.dtype)
        self.items.append((buffer, positions, packed, written))
        return packed

    def pack(self) -> None:
        """Copy every buffer's elements into its packed array (before the call)."""
        for buffer, positions, packed, _ in self.items:
            np.take(buffer, positions, out=packed)

    def unpack(self) -> None:
        """Copy the packed arrays of the buffers the call wrote back into them."""
        for buffer, positions, packed, written in self.items:
            if written:
                buffer[positions] = packed

    def before(self, then: Callable[[], None] | None) -> Callable[[], None] | None:
        """A step packing, then running ``then`` (None when there is nothing to do)."""
        if not self.items:
            return then

        def step() -> None:
            self.pack()
            if then is not None:
                then()
        return step

    def finisher(self) -> Callable[[Any], Any] | None:
        """A request's finishing step: unpack, then hand the value on (None if nothing is
        written back)."""
        if not any(item[3] for item in self.items):
            return None

        def finish(value: Any) -> Any:
            self.unpack()
            return value
        return finish
