"""A 64-bit fingerprint of a collective call, carried in every message's header.

It packs the collective, a hash of the algorithm's name, the root, the operator, the dtype and
the count, so a receiver can tell — at the cost of one integer compare — that its peer called
something else at the same point, and say what in words. The fields are packed reversibly
(the dtype by a table of the built-in ones, the count as a number while it fits in 21 bits;
anything else as a hash) and the packed word goes through an invertible mix, so the
fingerprint's low bits (which the shared-memory slots fold into 24) depend on every field.
Fingerprints made in this process are also remembered with their fields, so a peer's call that
this process prepared too (always, on threads) is described in full.
"""

from __future__ import annotations

import zlib
from typing import NamedTuple

import numpy as np

from ..ops import Op
from .registry import algorithms
from .spec import COLLECTIVES, ROOTED

_OPS = ("SUM", "PROD", "MIN", "MAX", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR", "MINLOC",
        "MAXLOC")
_USER_OP = 15
_SIZED = [("i", 2), ("i", 4), ("i", 8), ("u", 2), ("u", 4), ("u", 8), ("f", 2), ("f", 4),
          ("f", 8), ("f", 16), ("c", 8), ("c", 16), ("c", 32)]
#: the dtypes packed exactly (by position + 1); others by a 9-bit hash above ``_HASHED_DTYPE``
_DTYPES = ("|b1", "|i1", "|u1", *(f"{order}{kind}{size}" for order in "<>"
                                  for kind, size in _SIZED))
_HASHED_DTYPE = 1 << 9
_HASHED_COUNT = 1 << 21
_ENVELOPE = _HASHED_COUNT  # a bcast's or scatter's envelope phase: no count, dtype of bytes
_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_MASK = (1 << 64) - 1
_REMEMBERED = 4096


class Fields(NamedTuple):
    """A call's fields in words, as a mismatch message shows them."""

    collective: str
    algorithm: str
    root: str
    op: str
    dtype: str
    counts: str


_known: dict[int, Fields] = {}

#: the fingerprint a rank leaves for a call it gave up before taking part (an argument only it
#: saw was invalid, `collops.runtime.abandon`): its top bit is clear, so no call packs to it
GIVEN_UP = 0x61B4_D0E5_6A77_0000


def given_up(fp: int | None = None) -> int:
    """The fingerprint a rank leaves for a call it gave up: `GIVEN_UP`, or, when it knows its
    own call's fingerprint ``fp`` (it saw a mismatch, or failed mid-call), that call's twin
    with the packed word's top bit cleared — never a real call's, and decoded back to it."""
    if fp is None:
        return GIVEN_UP
    return _mix(_unmix(fp & _MASK) & ~(1 << 63))


def is_given_up(fp: int) -> bool:
    """Whether ``fp`` is a given-up call's word (`given_up`)."""
    return fp == GIVEN_UP or not _unmix(fp & _MASK) >> 63


def called_of(fp: int) -> int | None:
    """The call a given-up word was made from, if it names one (None for a real call's)."""
    return _called(fp)


def _called(fp: int) -> int | None:
    """The call a given-up word was made from, if it names one."""
    if fp == GIVEN_UP or not is_given_up(fp):
        return None
    return _mix(_unmix(fp & _MASK) | (1 << 63))


def _h(text: str, bits: int) -> int:
    return zlib.crc32(text.encode()) & ((1 << bits) - 1)


def _mix(x: int) -> int:
    """splitmix64's finaliser: a bijection of 64-bit words that spreads every bit."""
    x = (x ^ (x >> 30)) * _M1 & _MASK
    x = (x ^ (x >> 27)) * _M2 & _MASK
    return x ^ (x >> 31)


def _unshift(x: int, shift: int) -> int:
    """The inverse of ``x ^ (x >> shift)`` on 64 bits."""
    out = x
    for _ in range(64 // shift + 1):
        out = x ^ (out >> shift)
    return out


def _unmix(x: int) -> int:
    """The inverse of `_mix`."""
    x = _unshift(x, 31)
    x = _unshift(x * pow(_M2, -1, 1 << 64) & _MASK, 27)
    return _unshift(x * pow(_M1, -1, 1 << 64) & _MASK, 30)


def dtype_words(dtype: np.dtype) -> str:
    """A dtype as a user writes it: its name in native byte order (``float64``), else ``>f8``."""
    if dtype.names is not None or dtype.subdtype is not None:
        return str(dtype)
    return dtype.name if dtype.isnative else dtype.str


def _op_code(op: Op | str | None) -> tuple[int, str | None]:
    name = op.name if isinstance(op, Op) else op
    if name is None:
        return 0, None
    return (_OPS.index(name) + 1 if name in _OPS else _USER_OP), name


def _counts_code(signature: object, op_name: str | None, builtin_op: bool) -> tuple[int, str]:
    """The count field and its words: the count itself when the signature is one count (with
    at most the v-form of equal counts and a built-in operator's name beside it), else a hash."""
    if signature == "envelope":
        return _ENVELOPE, "envelope"
    items = list(signature) if isinstance(signature, tuple) else [signature]
    if builtin_op and op_name in items:
        items.remove(op_name)
    first = items[0] if items else None
    if isinstance(first, int) and 0 <= first < _HASHED_COUNT and all(
            x is None or (isinstance(x, tuple) and all(c == first for c in x))
            for x in items[1:]):
        return first, str(first)
    shown = items[0] if len(items) == 1 else tuple(items)
    return _HASHED_COUNT | (_h(repr(signature), 21) or 1), repr(shown)


def fingerprint(collective: str, algorithm: str, root: int, dtype: np.dtype,
                counts_signature: object, op: Op | str | None = None) -> int:
    """The fingerprint of a call (never 0); ``op`` is the reduction operator, if any."""
    c = COLLECTIVES.index(collective) & 0x1F
    op_code, op_name = _op_code(op)
    d = _DTYPES.index(dtype.str) + 1 if dtype.str in _DTYPES else _HASHED_DTYPE | _h(
        dtype.str + str(dtype.descr), 9)
    n, count_words = _counts_code(counts_signature, op_name, op_code not in (0, _USER_OP))
    packed = ((1 << 63) | (c << 58) | (_h(algorithm, 10) << 48) | ((root & 0xFFF) << 36)
              | (op_code << 32) | (d << 22) | n)
    result = _mix(packed)
    if result not in _known:
        if len(_known) >= _REMEMBERED:
            del _known[next(iter(_known))]
        _known[result] = Fields(collective, algorithm, str(root),
                                op_name.lower() if op_name else "", dtype_words(dtype),
                                count_words)
    return result


def fields(fp: int) -> Fields:
    """The fields of a fingerprint in words: remembered if this process made it, else decoded
    (an algorithm by its hash among the collective's, a dtype or count outside the packed
    range as ``#hash``)."""
    known = _known.get(fp)
    if known is not None:
        return known
    packed = _unmix(fp & _MASK)
    if not packed >> 63:
        return Fields(f"call {fp:#x}", "?", "?", "?", "?", "?")
    c = (packed >> 58) & 0x1F
    collective = COLLECTIVES[c] if c < len(COLLECTIVES) else f"collective#{c}"
    a = (packed >> 48) & 0x3FF
    names = [x.name for x in algorithms(collective)] if c < len(COLLECTIVES) else []
    algorithm = next((n for n in names if _h(n, 10) == a), f"algorithm#{a}")
    op_code = (packed >> 32) & 0xF
    op = ("" if op_code == 0 else _OPS[op_code - 1].lower() if op_code <= len(_OPS)
          else "a user-defined op")
    d = (packed >> 22) & 0x3FF
    dtype = (dtype_words(np.dtype(_DTYPES[d - 1])) if 0 < d <= len(_DTYPES)
             else f"a structured or other dtype (#{d & 0x1FF:03x})")
    n = packed & 0x3FFFFF
    counts = ("envelope" if n == _ENVELOPE else str(n) if n < _HASHED_COUNT
              else f"counts#{n & (_HASHED_COUNT - 1):06x}")
    return Fields(collective, algorithm, str((packed >> 36) & 0xFFF), op, dtype, counts)


def describe(fp: int) -> str:
    """A call in words: ``allreduce[ring] op=sum dtype=float64 count=8``."""
    if is_given_up(fp):
        called = _called(fp)
        return ("nothing: it gave the call up, raising an error of its own" if called is None
                else f"{describe(called)}, then gave the call up")
    f = fields(fp)
    words = [f"{f.collective}[{f.algorithm}]"]
    if f.collective in ROOTED:
        words.append(f"root={f.root}")
    if f.op:
        words.append(f"op={f.op}")
    if f.counts == "envelope":
        words.append("(its envelope: dtype and shape come from the root)")
    else:
        words.append(f"dtype={f.dtype}")
        words.append(f"count={f.counts}" if f.counts.isdigit() else f"counts={f.counts}")
    return " ".join(words)


#: what `differences` says of two fingerprints whose packed fields agree
_SAME = "the calls' signatures differ"
#: where each field sits in the packed word: (shift, bits)
_PLACES = {"collective": (58, 5), "algorithm": (48, 10), "root": (36, 12), "op": (32, 4),
           "dtype": (22, 10), "counts": (0, 22)}


def differences(mine: int, theirs: int) -> str:
    """The fields two calls differ in, each as ``field: mine vs theirs`` (a given-up word
    stands for the call it was made from)."""
    mine, theirs = (_called(x) or x for x in (mine, theirs))
    a, b = fields(mine), fields(theirs)
    packed = _unmix(mine & _MASK), _unmix(theirs & _MASK)
    names = ["algorithm", "root", "op", "dtype", "counts"]
    if a.collective != b.collective:  # the other fields mean other things: both are shown
        names = ["collective", "root"]
    if a.collective not in ROOTED or b.collective not in ROOTED:
        names.remove("root")
    out = []
    for name in names:
        shift, bits = _PLACES[name]
        if (packed[0] >> shift) & ((1 << bits) - 1) != (packed[1] >> shift) & ((1 << bits) - 1):
            x, y = getattr(a, name), getattr(b, name)
            label = "count" if name == "counts" and x.isdigit() and y.isdigit() else name
            out.append(f"{label}: {x or 'none'} vs {y or 'none'}")
    return "; ".join(out) or _SAME


def mismatch(mine: int, theirs: int, who: str) -> str:
    """What a mismatch message says: both calls in words, then the fields that differ."""
    if is_given_up(theirs):
        called = _called(theirs)
        differ = _SAME if called is None else differences(mine, called)
        if differ == _SAME:
            return (f"called {describe(mine)} but {who} gave the call up: it raised an error "
                    f"of its own before taking part (see {who}'s error)")
        return (f"called {describe(mine)} but {who} called {describe(theirs)} at the same "
                f"point ({differ})")
    return (f"called {describe(mine)} but {who} called {describe(theirs)} at the same point "
            f"({differences(mine, theirs)})")
