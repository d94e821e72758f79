"""Envelopes: dtype, shape and (when they fit) the data of a bcast or scatter, for non-roots
that do not know them; their header layout, and the caches of headers and specs."""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

from ..algorithms.spec import CallSpec, make_spec
from ..datatypes import dtype_from_token, dtype_token
from ..errors import ArgumentError, CollopsError

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
_TOKENS: dict[np.dtype, bytes] = {}
_DTYPES: dict[bytes, np.dtype] = {}

#: (dtype, shape, inline) -> the envelope header of such an array (None: the header cannot
#: describe it)
_BCAST_HEADS: dict[tuple[np.dtype, tuple[int, ...], bool], np.ndarray | None] = {}


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
    token = _TOKENS.get(dtype)
    if token is None:
        token = _TOKENS[dtype] = dtype_token(dtype).encode()
    return token


def _dtype_of(token: bytes) -> np.dtype:
    """The dtype an envelope's token names, cached."""
    dtype = _DTYPES.get(token)
    if dtype is None:
        dtype = _DTYPES[token] = dtype_from_token(token.decode())
    return dtype


# -- broadcast envelopes and specs, cached by call signature (see `Comm._bcast`) --------------
_ENVELOPE_DTYPE = np.dtype(np.uint8)
_BCAST_CACHE_LIMIT = 256
#: (dtype, shape, envelope bytes) -> the root's envelope of a broadcast too large to travel
#: inline
_BCAST_ENVELOPES: dict[tuple[np.dtype, tuple[int, ...], int], np.ndarray] = {}
#: envelope header bytes -> (inline, dtype, shape, nbytes)
_BCAST_HEADERS: dict[bytes, tuple[bool, np.dtype, tuple[int, ...], int]] = {}
_BCAST_SPECS: dict[tuple[str, int, np.dtype, int, int], CallSpec] = {}


def _bcast_spec(size: int, dtype: np.dtype, count: int, root: int,
                collective: str = "bcast") -> CallSpec:
    """``make_spec(collective, ...)`` of a rooted call with one count (bcast, scatter), cached."""
    key = (collective, size, dtype, count, root)
    spec = _BCAST_SPECS.get(key)
    if spec is None:
        if len(_BCAST_SPECS) >= _BCAST_CACHE_LIMIT:
            _BCAST_SPECS.clear()
        spec = _BCAST_SPECS[key] = make_spec(collective, size, dtype, count=count, root=root)
    return spec


def _bcast_head(dtype: np.dtype, shape: tuple[int, ...], inline: bool) -> np.ndarray | None:
    """The first `_DATA_AT` bytes of an envelope (or of each block of a scatter's) of an array
    of ``shape`` and ``dtype`` (cached); None when the header cannot hold them (a long dtype
    token, > 8 dimensions)."""
    key = (dtype, shape, inline)
    head = _BCAST_HEADS.get(key, _NO_HEAD)
    if head is _NO_HEAD:
        token = _token_bytes(dtype)
        head = None
        if len(token) <= _TOKEN_MAX and len(shape) <= 8:
            head = np.zeros(_DATA_AT, np.uint8)
            _HEADER.pack_into(head, 0, int(inline), len(shape),  # type: ignore[arg-type]
                              len(token), math.prod(shape) * dtype.itemsize, *shape,
                              *_ZEROS[len(shape):])
            head[_HEADER.size: _HEADER.size + len(token)] = np.frombuffer(token, np.uint8)
        if len(_BCAST_HEADS) >= _BCAST_CACHE_LIMIT:
            _BCAST_HEADS.clear()
        _BCAST_HEADS[key] = head
    return head


def _bcast_envelope(data: np.ndarray, rank: int, size: int) -> tuple[np.ndarray, bool]:
    """The root's envelope of ``size`` bytes for ``data`` and whether the data travels in it."""
    inline = data.nbytes <= size - _DATA_AT
    key = (data.dtype, data.shape, size)
    if not inline:
        env = _BCAST_ENVELOPES.get(key)
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
        if len(_BCAST_ENVELOPES) >= _BCAST_CACHE_LIMIT:
            _BCAST_ENVELOPES.clear()
        _BCAST_ENVELOPES[key] = env  # only ever sent (and copied onto itself) from now on
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
    known = _BCAST_HEADERS.get(key)
    if known is None:
        inline, ndim, tlen, nbytes, *dims = _HEADER.unpack_from(key, 0)
        if ndim > 8 or tlen > _TOKEN_MAX:
            raise CollopsError(f"a corrupt envelope header: {key[:16]!r}")
        dtype = _dtype_of(key[_HEADER.size: _HEADER.size + tlen])
        known = (bool(inline), dtype, tuple(dims[:ndim]), nbytes)
        if len(_BCAST_HEADERS) >= _BCAST_CACHE_LIMIT:
            _BCAST_HEADERS.clear()
        _BCAST_HEADERS[key] = known
    return known
