"""Envelopes: dtype, shape and (when they fit) the data of a bcast or scatter, for non-roots
that do not know them; their header layout, and the caches of headers and specs."""

from __future__ import annotations

import hashlib
import math
import struct
from typing import Any

import numpy as np

from ..algorithms.spec import CallSpec, make_spec
from ..datatypes import dtype_from_token, dtype_token
from ..errors import ArgumentError, CollopsError
from .abandon import raise_if_abandoned_header
from .cache import SHARED

# -- envelopes: dtype, shape and (when they fit) the data, for calls whose non-roots do not
# know them (bcast, scatter). An envelope (a scatter's: each rank's block of it) starts with a
# `_DATA_AT`-byte header — inline flag, ndim, token length, nbytes, shape[8], the dtype token —
# followed by the data when it fits.
#: bytes of an envelope sent by messages (a scatter's: of each rank's block)
ENVELOPE = 256
#: on a communicator with direct areas (within a direct slot): the data a broadcast's envelope
#: carries (every non-root copies the whole envelope, so it stays small) and the bytes of all
#: blocks of a scatter's envelope together (each non-root copies its own block only)
DIRECT_BCAST_INLINE = 1024
DIRECT_SCATTER_ENVELOPE = 4096
_HEADER = struct.Struct("<B B H Q 8q")  # inline flag, ndim, token length, nbytes, shape[8]
#: where the data starts (8-byte aligned, so typed views of it are aligned too)
_DATA_AT = 128
#: byte offset in `_HEADER` of ``nbytes`` (the data bytes that follow the header)
_NBYTES_AT = struct.calcsize("<B B H")
_TOKEN_MAX = _DATA_AT - _HEADER.size
#: what the fast paths of bcast and scatter move (anything else goes the general way)
_FAST_KINDS = frozenset("biufc")

_ZEROS = (0,) * 8
_NO_HEAD = np.zeros(0, np.uint8)



def _envelope_view(env: np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """The inline data of ``env`` (an envelope or one block of one) as ``dtype`` and ``shape``."""
    n = math.prod(shape) * dtype.itemsize
    return env[_DATA_AT: _DATA_AT + n].view(dtype).reshape(shape)


def _blocks_view(env: np.ndarray, p: int, block: int, dtype: np.dtype,
                 shape: tuple[int, ...]) -> np.ndarray:
    """The inline data of the ``p`` blocks of ``block`` bytes of a scatter envelope ``env``, as
    one array of ``dtype`` and shape ``(p, *shape)`` (a view: block j's data is ``[j]``)."""
    strides = [dtype.itemsize] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return np.ndarray((p, *shape), dtype, env, _DATA_AT, (block, *strides))


def _token_bytes(dtype: np.dtype) -> bytes:
    """``dtype_token(dtype)`` encoded, cached."""
    token = SHARED.get(("token", dtype))
    if token is None:
        token = SHARED.put(("token", dtype), dtype_token(dtype).encode())
    return token  # type: ignore[no-any-return]


def _dtype_of(token: bytes) -> np.dtype:
    """The dtype an envelope's token names, cached."""
    dtype = SHARED.get(("dtype", token))
    if dtype is None:
        dtype = SHARED.put(("dtype", token), dtype_from_token(token.decode()))
    return dtype  # type: ignore[no-any-return]


# -- broadcast envelopes and specs, cached by call signature (see `Comm._bcast`) --------------
_ENVELOPE_DTYPE = np.dtype(np.uint8)
#: the received headers an envelope's `PreparedCall` keeps views of (`FastPaths._received`)
VIEWS_LIMIT = 256


def _bcast_spec(size: int, dtype: np.dtype, count: int, root: int,
                collective: str = "bcast") -> CallSpec:
    """``make_spec(collective, ...)`` of a rooted call with one count (bcast, scatter), cached."""
    key = ("spec", collective, size, dtype, count, root)
    spec = SHARED.get(key)
    if spec is None:
        spec = SHARED.put(key, make_spec(collective, size, dtype, count=count, root=root))
    return spec  # type: ignore[no-any-return]


def _bcast_head(dtype: np.dtype, shape: tuple[int, ...], inline: bool) -> np.ndarray | None:
    """The first `_DATA_AT` bytes of an envelope (or of each block of a scatter's) of an array
    of ``shape`` and ``dtype`` (cached); None when the header cannot hold them (a long dtype
    token, > 8 dimensions)."""
    key = ("head", dtype, shape, inline)
    head = SHARED.get(key, _NO_HEAD)
    if head is _NO_HEAD:
        token = _token_bytes(dtype)
        head = None
        if len(token) <= _TOKEN_MAX and len(shape) <= 8:
            head = np.zeros(_DATA_AT, np.uint8)
            _HEADER.pack_into(head, 0, int(inline), len(shape),  # type: ignore[arg-type]
                              len(token), math.prod(shape) * dtype.itemsize, *shape,
                              *_ZEROS[len(shape):])
            head[_HEADER.size: _HEADER.size + len(token)] = np.frombuffer(token, np.uint8)
        SHARED.put(key, head)
    return head  # type: ignore[no-any-return]


def _known_signature(dtype: np.dtype, shape: tuple[int, ...], size: int) -> int:
    """What a rank that knows a bcast's data has ``dtype`` and ``shape`` says of it where the
    envelope (``size`` bytes) cannot carry the data: a non-zero 56-bit hash of the envelope
    header the root would send, the same on every rank (cached); 0 where the data would go in
    the envelope, or the fast path does not take the array."""
    key = ("signature", dtype, shape, size)
    signature = SHARED.get(key)
    if signature is None:
        head = None
        if dtype.kind in _FAST_KINDS and math.prod(shape) * dtype.itemsize > size - _DATA_AT:
            head = _bcast_head(dtype, shape, False)
        signature = SHARED.put(key, 0 if head is None else int.from_bytes(
            hashlib.blake2b(head.tobytes(), digest_size=7).digest(), "little") | 1)
    return signature  # type: ignore[no-any-return]


def _bcast_envelope(data: np.ndarray, rank: int, size: int) -> tuple[np.ndarray, bool]:
    """The root's envelope of ``size`` bytes for ``data`` and whether the data travels in it."""
    inline = data.nbytes <= size - _DATA_AT
    key = ("root envelope", data.dtype, data.shape, size)
    if not inline:
        env = SHARED.get(key)
        if env is not None:
            return env, False
    head = _bcast_head(data.dtype, data.shape, inline)
    if head is None:
        raise ArgumentError("bcast", "x", data.shape, "at most 8 dimensions", rank)
    env = np.zeros(size, np.uint8)
    env[:_DATA_AT] = head
    if inline:
        env[_DATA_AT: _DATA_AT + data.nbytes] = data.reshape(-1).view(np.uint8)
    else:
        SHARED.put(key, env)  # only ever sent (and copied onto itself) from now on
    return env, inline


def _bcast_out(out: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
    """``out`` when it can take a broadcast of ``shape`` and ``dtype`` as it is, else None."""
    if (type(out) is np.ndarray and out.dtype == dtype and out.size == math.prod(shape)
            and out.flags.c_contiguous and out.flags.writeable):
        return out
    return None


def _bcast_header(env: np.ndarray) -> tuple[bool, np.dtype, tuple[int, ...], int]:
    """``(inline, dtype, shape, nbytes)`` of a received envelope or scatter block."""
    return _parse_header(env[:_DATA_AT].tobytes())


def _parse_header(key: bytes) -> tuple[bool, np.dtype, tuple[int, ...], int]:
    """``(inline, dtype, shape, nbytes)`` of the `_DATA_AT` header bytes ``key`` (cached)."""
    known = SHARED.get(("header", key))
    if known is None:
        raise_if_abandoned_header(key)
        inline, ndim, tlen, nbytes, *dims = _HEADER.unpack_from(key, 0)
        if ndim > 8 or tlen > _TOKEN_MAX:
            raise CollopsError(f"a corrupt envelope header: {key[:16]!r}")
        dtype = _dtype_of(key[_HEADER.size: _HEADER.size + tlen])
        known = (bool(inline), dtype, tuple(dims[:ndim]), nbytes)
        SHARED.put(("header", key), known)
    return known  # type: ignore[no-any-return]
