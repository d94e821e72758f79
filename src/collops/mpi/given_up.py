"""Telling the other ranks over MPI that this rank gave a call up (`MpiTransport.give_up`).

A rank that raises before or during a call (an argument only it sees is wrong, a mismatch it
detected) sends each other rank a marker: a message header with the call's tag base, the
fingerprint `fingerprint.GIVEN_UP` and, in its size field, `BY` with the rank that gave the
call up first and the length of that rank's error text, which follows the header. MPI's
non-overtaking rule means that everything the rank sent for that call arrived before its
marker, so a receiver still awaiting a message of that call from it raises
`CollectiveMismatch` quoting the error (`check`), and gives the call up in turn.
"""

from __future__ import annotations

from collections.abc import Iterable
from struct import Struct
from typing import Any

from ..algorithms.fingerprint import GIVEN_UP
from ..errors import CollectiveMismatch
from ..transport.tags import PHASE_BITS, SEQ_BITS, call_of_tag_base
from .board import call_key

#: set in the size field of a marker's header (bit 63 marks a large message's header)
BY = 1 << 62
#: the longest error text a marker carries
TEXT_BYTES = 2000
#: a tag shifted right by this much names its call (context and number), whatever its phase
CALL_SHIFT = SEQ_BITS + PHASE_BITS


def marker(header: Struct, tag_base: int, rank: int, error: BaseException) -> bytes:
    """The marker of the call ``tag_base`` that ``rank`` gave up after ``error`` (which names
    the rank that gave it up first, if it followed from that: `check`)."""
    origin, why = getattr(error, "gave_up", (rank, f"{type(error).__name__}: {error}"))
    text = why.encode()[:TEXT_BYTES]
    return header.pack(tag_base, GIVEN_UP, BY | len(text) << 32 | origin) + text


def is_marker(fingerprint: int, size_field: int) -> bool:
    """Whether a header with these fields is a marker."""
    return fingerprint == GIVEN_UP and bool(size_field & BY)


def read(size_field: int, after_header: memoryview) -> tuple[int, str]:
    """``(the rank that gave the call up first, its error)`` from a marker."""
    length = (size_field & ~BY) >> 32
    return size_field & 0xFFFF_FFFF, bytes(after_header[:length]).decode(errors="replace")


def check(rank: int, awaited: Iterable[tuple[int, int]],
          given_up: dict[tuple[int, int], tuple[int, str]]) -> None:
    """Raise `CollectiveMismatch` if one of the ``(peer, tag)`` messages ``rank`` awaits is of
    a call that peer gave up (``given_up``: ``(peer, tag >> CALL_SHIFT)`` -> `read`'s)."""
    for peer, tag in awaited:
        given = given_up.get((peer, tag >> CALL_SHIFT))
        if given is not None:
            origin, why = given
            how = "it" if origin == peer else f"rank {origin} (world) gave it up first and"
            exc = CollectiveMismatch(
                f"rank {rank} (world) awaits a message from rank {peer} (world), but rank "
                f"{peer} gave the call up: {how} raised {why}")
            exc.gave_up = given  # type: ignore[attr-defined]
            raise exc


def tell(transport: Any, tag_base: int, error: BaseException, header: Struct,
         wire_tag: int) -> None:
    """Tell the peers of ``transport``'s rank (an `MpiTransport`) that it gave up the phase of
    the call ``tag_base`` after ``error``: the call's entry on the boards of its communicator
    holds `fingerprint.GIVEN_UP` where the rank had not posted it (a peer waiting there
    raises `CollectiveMismatch`), and every other rank gets a `marker` (``header``'s, on MPI
    tag ``wire_tag``). The rank's own
    receives of the call are dropped."""
    call = tag_base >> CALL_SHIFT
    for key in [k for k in transport._posted if k[1] >> CALL_SHIFT == call]:
        del transport._posted[key]  # its receives of the call will not be waited for
    context, seq = call_of_tag_base(tag_base)
    phase = (tag_base >> SEQ_BITS) & ((1 << PHASE_BITS) - 1)
    for (_, board_context), board in transport._boards.items():
        if board is not None and board_context == context and phase < 4:
            board.give_up(call_key(seq, phase, False))
    sent = marker(header, tag_base, transport.rank, error)
    transport._sends += 1
    try:
        for peer in range(transport.size):
            if peer != transport.rank:
                request = transport.comm.Isend(sent, peer, wire_tag)
                transport._background.append((request, sent))
    except transport._MPI.Exception:
        pass  # MPI itself failed (the error being handled says so): nobody can be told
