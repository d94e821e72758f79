"""The object collectives' slot codec in Python: what `collops.runtime._slots` does compiled,
used when that extension is missing or ``COLLOPS_COMPILED=0``.

A slot is ``slot`` bytes: an int64 header (the pickle's length, or `TOO_BIG`) and the pickle
after it.
"""

from __future__ import annotations

import pickle
import struct
from collections.abc import Sequence
from typing import Any

#: bytes of a slot's header, and the header of a slot whose object did not fit
HEAD = 8
TOO_BIG = -1

_HEADER = struct.Struct("<q")


def encode(buffer: Any, at: int, slot: int, obj: Any
           ) -> tuple[bytes, list[pickle.PickleBuffer]] | None:
    """``obj`` pickled once (protocol 5; buffers of at most ``slot`` − `HEAD` bytes in band,
    larger ones out of band) into the slot at byte ``at`` of ``buffer`` (None), else that slot
    says `TOO_BIG` and the pickle and its out-of-band buffers come back."""
    buffers: list[pickle.PickleBuffer] = []

    def keep_large(b: pickle.PickleBuffer) -> bool:
        try:
            small = b.raw().nbytes <= slot - HEAD
        except BufferError:  # not contiguous: out of band
            small = False
        if not small:
            buffers.append(b)
        return small

    main = pickle.dumps(obj, protocol=5, buffer_callback=keep_large)
    view = memoryview(buffer).cast("B")
    if at < 0 or slot < HEAD or at + slot > len(view):
        raise ValueError("encode: the slot lies outside the buffer")
    if not buffers and len(main) <= slot - HEAD:
        _HEADER.pack_into(view, at, len(main))
        view[at + HEAD: at + HEAD + len(main)] = main
        return None
    _HEADER.pack_into(view, at, TOO_BIG)
    return main, buffers


def encode_rows(buffer: Any, slot: int, objs: Sequence[Any]
                ) -> list[tuple[bytes, list[pickle.PickleBuffer]] | None] | None:
    """Object j of ``objs`` pickled once into slot j of ``buffer`` (None when they all fit),
    else each one's `encode` result."""
    got = [encode(buffer, j * slot, slot, obj) for j, obj in enumerate(tuple(objs))]
    return None if all(g is None for g in got) else got


def decode(buffer: Any, slot: int, total: int, first: int, count: int) -> list[Any] | None:
    """The objects of slots ``first`` … ``first + count - 1`` of the ``total`` slots at the
    start of ``buffer``, each unpickled once; None when one of the ``total`` says `TOO_BIG`."""
    view = memoryview(buffer).cast("B")
    if (slot < HEAD or total < 0 or first < 0 or count < 0 or first + count > total
            or total * slot > len(view)):
        raise ValueError("decode: the slots lie outside the buffer")
    lengths = [_HEADER.unpack_from(view, r * slot)[0] for r in range(total)]
    if TOO_BIG in lengths:
        return None
    for r, length in enumerate(lengths):
        if not 0 <= length <= slot - HEAD:
            raise ValueError(f"decode: slot {r} has a corrupt length {length}")
    # copy the pickles out first: unpickling runs Python code, which may reuse the buffer
    raws = [bytes(view[r * slot + HEAD: r * slot + HEAD + lengths[r]])
            for r in range(first, first + count)]
    return [pickle.loads(raw) for raw in raws]
