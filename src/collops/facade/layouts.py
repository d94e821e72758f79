"""The v-collectives' counts and displacements, checked once per layout and remembered.

A v-collective's spec (``[buf, (counts, displs), datatype]``) names one count and one
displacement per rank. Checking them (integers, not negative, one per rank, each block inside
the buffer) element by element costs microseconds; a program calls the same collective with
the same counts and displacements again and again. `Layout` holds what the check found, and
`find` gives it back when the same ``counts`` and ``displs`` objects come again *with the same
values*: the memo keeps the objects (so their ids cannot be reused) and a snapshot of the
values of each mutable one (a list, an ndarray), which `_specs.same_ints` compares in C. A
tuple of ints or an int cannot change, so the same object suffices. The buffer is checked on
every call (its type, layout, writability and that it holds `Layout.end` elements).
"""

from __future__ import annotations

import array
from typing import Any

import numpy as np

from ..runtime.arguments import rows_spanned

try:  # the compiled checks (`_specs.c`); the same in Python below
    from . import _specs
except ImportError:  # pragma: no cover - a build without a C compiler
    _specs = None  # type: ignore[assignment]

#: layouts kept at most; the memo starts again when it is full
LIMIT = 256


def snapshot(values: Any) -> bytes | None:
    """The values of a list or 1-D ndarray of counts or displacements, as `_specs.same_ints`
    compares them (int64s; an array's format, a NUL and its bytes), or None when they are of
    no form the memo keeps (numpy integers in a list, a strided array, …)."""
    if type(values) is list or type(values) is tuple:
        if not all(type(v) is int for v in values):
            return None
        try:
            return array.array("q", values).tobytes()
        except OverflowError:
            return None
    if type(values) is np.ndarray and values.ndim == 1 and values.flags.c_contiguous:
        return values.data.format.encode() + b"\0" + values.tobytes()
    return None


def _same_ints(values: Any, snap: bytes) -> bool:
    """`_specs.same_ints` in Python."""
    return snapshot(values) == snap


same_ints = _same_ints if _specs is None else _specs.same_ints


def _kept(values: Any) -> tuple[bool, bytes | None]:
    """Whether the memo may keep ``values`` and, for a mutable one, its snapshot."""
    if values is None or type(values) is int or (type(values) is tuple and all(
            type(v) is int for v in values)):
        return True, None
    snap = snapshot(values)
    return snap is not None, snap


class Layout:
    """Checked counts and displacements of one v-collective spec, in base elements."""

    __slots__ = ("counts", "displs", "end", "spanned", "total", "contiguous", "placed",
                 "placed_displs")

    def __init__(self, counts: list[int], displs: list[int]) -> None:
        """The layout of blocks of ``counts`` at ``displs`` (base elements)."""
        self.counts, self.displs = counts, displs
        #: base elements the buffer must hold (the end of its last block, empty ones too,
        #: as `buffers.vector` checks them)
        self.end = max((d + c for c, d in zip(counts, displs, strict=True)), default=0)
        #: base elements the blocks span (`rows_spanned`: empty blocks aside)
        self.spanned = rows_spanned(displs, counts)
        #: base elements of all blocks
        self.total = sum(counts)
        #: whether the blocks follow one another in rank order from offset 0
        self.contiguous = displs == [sum(counts[:r]) for r in range(len(counts))]
        #: a receive's ``out`` (the buffer's first `placed` elements) and its displacements
        #: for collops (None: back to back), as `collectives._displaced` gives them
        self.placed = self.total if self.contiguous else self.spanned
        self.placed_displs = None if self.contiguous else displs


#: (id(counts) ^ id(displs)) -> (counts, displs, counts' snapshot, displs' snapshot, size,
#: step, layout); `_specs` reads it too
_memo: dict[int, tuple[Any, Any, bytes | None, bytes | None, int, int, Layout]] = {}


def _holds(values: Any, snap: bytes | None) -> bool:
    return snap is None or same_ints(values, snap)


def _find(counts_of: Any, displs_of: Any, size: int, step: int) -> Layout | None:
    """The remembered layout of these counts and displacements (the caller's objects), if
    they still hold the values it was checked with, for this size and step."""
    entry = _memo.get(id(counts_of) ^ id(displs_of))
    if entry is None:
        return None
    counts, displs, counts_snap, displs_snap, was_size, was_step, layout = entry
    if counts is counts_of and displs is displs_of and was_size == size and (
            was_step == step) and _holds(counts_of, counts_snap) and _holds(displs_of,
                                                                           displs_snap):
        return layout
    return None


find = _find if _specs is None else _specs.find


def remember(counts_of: Any, displs_of: Any, size: int, step: int, counts: list[int],
             displs: list[int]) -> Layout | None:
    """Keep the checked ``counts``/``displs`` of the caller's ``counts_of``/``displs_of``
    (when the memo can tell whether they change); the layout, or None."""
    if counts_of is None or type(counts_of) is int:  # counts from the buffer's size
        return None
    keep_counts, counts_snap = _kept(counts_of)
    keep_displs, displs_snap = _kept(displs_of)
    if not (keep_counts and keep_displs):
        return None
    if len(_memo) >= LIMIT:
        _memo.clear()
    layout = Layout(counts, displs)
    _memo[id(counts_of) ^ id(displs_of)] = (counts_of, displs_of, counts_snap, displs_snap,
                                            size, step, layout)
    return layout
