"""Whether two arrays may share memory: numpy's ``may_share_memory``, without its cost where
each array's memory belongs to an ndarray that owns it (arrays of two owners cannot overlap).

The calls ask it of every ``out=`` that is a view (a slice of a larger buffer: what
``collops.MPI`` passes for a v-spec's receive buffer), where ``np.may_share_memory`` alone
costs about 0.17 µs; `_overlap.c` answers the common case from the arrays' heads. numpy makes a
view of a view point at the array that owns the memory, so ``base`` names the owner.
"""

from __future__ import annotations

import numpy as np

_ndarray = np.ndarray


def python_may_overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` may share memory (`may_overlap` in Python)."""
    owner_a = a if a.flags.owndata else a.base
    owner_b = b if b.flags.owndata else b.base
    if (owner_a is not owner_b and type(owner_a) is _ndarray and type(owner_b) is _ndarray
            and owner_a.flags.owndata and owner_b.flags.owndata):
        return False
    return bool(np.may_share_memory(a, b))


try:  # the same, compiled (`_overlap.c`)
    from . import _overlap
except ImportError:  # pragma: no cover - a build without a C compiler
    _overlap = None  # type: ignore[assignment]
if _overlap is not None:
    _overlap.configure(np.ndarray, np.may_share_memory)

#: whether two arrays may share memory
may_overlap = python_may_overlap if _overlap is None else _overlap.may_overlap
