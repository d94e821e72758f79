"""A 64-bit fingerprint of a collective call, carried in every message's header.

It packs the collective, a hash of the algorithm's name, the root, a hash of the dtype and a
hash of the counts, so a receiver can tell — at the cost of one integer compare — that its
peer called something else at the same point, and say what.
"""

from __future__ import annotations

import zlib

import numpy as np

from .registry import algorithms
from .spec import COLLECTIVES

_COMMON_DTYPES = ["b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8",
                  "c8", "c16"]


def _h(text: str, bits: int) -> int:
    return zlib.crc32(text.encode()) & ((1 << bits) - 1)


def fingerprint(collective: str, algorithm: str, root: int, dtype: np.dtype,
                counts_signature: object) -> int:
    """The fingerprint of a call (never 0)."""
    c = COLLECTIVES.index(collective) & 0x1F
    a = _h(algorithm, 10)
    r = root & 0xFFF
    d = _h(dtype.str, 12)
    n = _h(repr(counts_signature), 24)
    return (1 << 63) | (c << 58) | (a << 48) | (r << 36) | (d << 24) | n


def describe(fp: int) -> str:
    """Decode a fingerprint into words (algorithm and dtype recovered by hash lookup)."""
    c = (fp >> 58) & 0x1F
    collective = COLLECTIVES[c] if c < len(COLLECTIVES) else f"collective#{c}"
    a = (fp >> 48) & 0x3FF
    names = [x.name for x in algorithms(collective)] if c < len(COLLECTIVES) else []
    algorithm = next((n for n in names if _h(n, 10) == a), f"algorithm#{a}")
    root = (fp >> 36) & 0xFFF
    d = (fp >> 24) & 0xFFF
    dtype = next((np.dtype(t).str for t in _COMMON_DTYPES if _h(np.dtype(t).str, 12) == d),
                 f"dtype#{d}")
    return f"{collective}[{algorithm}] root={root} dtype={dtype} counts#{fp & 0xFFFFFF:06x}"
