"""``Alltoallw``: a datatype per peer, moved as bytes.

MPI's most general all-to-all gives every peer its own count, byte displacement and
datatype, on both sides. collops moves arrays of one dtype, so each side's blocks become
bytes: the byte positions of peer j's block (its type's elements from byte ``displs[j]``)
are gathered into one packed array before the call (a `Stage` item) and the received bytes
scattered back to the receive blocks' positions after it, leaving every other byte of the
receive buffer as it was. Between them collops' own ``alltoallv`` moves the packed bytes,
block j of length ``counts[j] * types[j].size`` — so a sender's and a receiver's type
signatures need the same number of bytes, as MPI's matching rule implies, and a mismatch is
collops' own error naming the counts.

``MPI.BOTTOM`` as a buffer makes the displacements (and the types' own displacements, as a
``Create_struct`` of ``Get_address`` values gives them) absolute addresses: the bytes between
the lowest and the highest position are then viewed where they are. As in MPI, those
addresses must be the program's own live memory.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from .buffers import _array, _datatype, _error, integers
from .constants import BOTTOM
from .datatypes import Datatype
from .staging import Stage


def _parts(spec: Any, size: int, call: str, argument: str, rank: int | None
           ) -> tuple[Any, list[int], list[int] | None, list[Datatype]]:
    """``(buf, counts, byte displs or None, datatypes)`` of ``[buf, (counts, displs), types]``
    or ``[buf, counts, displs, types]`` (``types`` one datatype per peer, or one for all; a
    count for all; an integer ``displs`` a stride)."""
    if isinstance(spec, (list, tuple)) and len(spec) == 3 and isinstance(spec[1], (list, tuple)) \
            and len(spec[1]) == 2:
        buf, (counts, displs), types = spec
    elif isinstance(spec, (list, tuple)) and len(spec) == 4:
        buf, counts, displs, types = spec
    else:
        raise _error(call, argument, spec, "Alltoallw takes [buf, (counts, displs), datatypes] "
                     "or [buf, counts, displs, datatypes], one datatype per peer", rank)
    if isinstance(types, (Datatype, str)):
        types = [types] * size
    try:
        types = list(types)
    except TypeError:
        raise _error(call, argument, types, "expected a datatype per peer", rank) from None
    if len(types) != size:
        raise _error(call, argument, types, f"needs one datatype per rank ({size})", rank)
    datatypes = [_datatype(t, call, argument, rank) for t in types]
    if isinstance(counts, (int, np.integer)):  # one count for every peer
        counts = [int(counts)] * size
    if isinstance(displs, (int, np.integer)):  # a stride: peer j's block at j * displs
        displs = [int(displs) * j for j in range(size)]
    counts = integers(counts, size, call, argument, rank)
    if displs is not None:
        displs = integers(displs, size, call, argument, rank) if buf is not BOTTOM else \
            [int(d) for d in displs]
    return buf, counts, displs, datatypes


def _byte_positions(counts: list[int], displs: list[int] | None, types: list[Datatype]
                    ) -> list[np.ndarray]:
    """Per peer, the byte positions of its block's elements, in order (back to back from
    byte 0 when ``displs`` is None)."""
    out, at = [], 0
    for j, (count, datatype) in enumerate(zip(counts, types, strict=True)):
        start = at if displs is None else displs[j]
        itemsize = datatype.base.itemsize  # type: ignore[union-attr]
        elements = datatype.positions(count, 0) * itemsize + (start + datatype.shift)
        out.append((elements[:, None] + np.arange(itemsize)).ravel())
        at += count * datatype.tmap.span * itemsize
    return out


def _bytes_of(buf: Any, positions: np.ndarray, call: str, argument: str, rank: int | None,
              writable: bool) -> tuple[np.ndarray, np.ndarray]:
    """The buffer's bytes and the positions to read or write in them (for ``BOTTOM``, the
    memory from the lowest position to the highest, positions made relative to it)."""
    if buf is BOTTOM:
        if not positions.size:
            return np.empty(0, np.uint8), positions
        low, high = int(positions.min()), int(positions.max()) + 1
        memory = (ctypes.c_ubyte * (high - low)).from_address(low)
        return np.ctypeslib.as_array(memory), positions - low
    arr = _array(buf, call, argument, rank, writable)
    raw = arr.view(np.uint8) if arr.dtype.itemsize else arr
    if positions.size and int(positions.max()) >= raw.size:
        raise _error(call, argument, raw.size, f"the blocks reach byte {int(positions.max())} "
                     f"of a buffer of {raw.size} bytes", rank)
    return raw, positions


def alltoallw_call(sendbuf: Any, recvbuf: Any, in_place: bool, size: int, call: str,
                   rank: int | None, stage: Stage
                   ) -> tuple[np.ndarray, list[int], list[int], np.ndarray]:
    """The packed bytes to send, the byte counts sent and received per peer, and the packed
    array the bytes arrive in (`Stage` items of ``stage``: packed before the call, the
    received bytes written back after it)."""
    rbuf, rcounts, rdispls, rtypes = _parts(recvbuf, size, call, "recvbuf", rank)
    received = _byte_positions(rcounts, rdispls, rtypes)
    if in_place:
        sent, sbuf, sargument = received, rbuf, "recvbuf"
    else:
        sbuf, scounts, sdispls, stypes = _parts(sendbuf, size, call, "sendbuf", rank)
        sent, sargument = _byte_positions(scounts, sdispls, stypes), "sendbuf"
    sent_all = np.concatenate(sent) if sent else np.empty(0, np.int64)
    received_all = np.concatenate(received) if received else np.empty(0, np.int64)
    source, sent_at = _bytes_of(sbuf, sent_all, call, sargument, rank, False)
    target, received_at = _bytes_of(rbuf, received_all, call, "recvbuf", rank, True)
    packed_send = stage.add(source, sent_at, written=False)
    packed_recv = stage.add(target, received_at, written=True)
    return packed_send, [p.size for p in sent], [p.size for p in received], packed_recv


def Get_address(location: Any) -> int:
    """The address of a buffer's memory (what ``MPI.BOTTOM``'s displacements are)."""
    if location is BOTTOM:
        return 0
    arr = _array(location, "Get_address", "location", None, False)
    return int(arr.__array_interface__["data"][0])


def Aint_add(base: int, disp: int) -> int:
    """``base + disp``, an address plus a displacement."""
    return int(base) + int(disp)


def Aint_diff(addr1: int, addr2: int) -> int:
    """``addr1 - addr2``, the displacement between two addresses."""
    return int(addr1) - int(addr2)
