"""The bit layout of a message tag: context | call sequence | phase | message sequence.

Every collective call on a communicator has a private tag space: the communicator's context,
the call's number and the phase of the call sit above the sequence number of a message in
the schedule. The engine makes tags from it, and the transports' own collectives read a
call's number back out of a tag (to tell which call an unmatched message belongs to).

A context is never masked away: `collops.runtime.context_ids` hands out ids below
`CONTEXT_LIMIT` only (reusing freed ones), so two live communicators that share a rank never
share tags. The call field wraps (it only has to tell apart the calls of one communicator in
flight at once); the tag fits 63 bits, which every transport carries (shm and MPI headers
hold 64-bit tags).
"""

from __future__ import annotations

SEQ_BITS = 24
PHASE_BITS = 3
CALL_BITS = 20
CONTEXT_BITS = 16
#: communicator contexts a job can hold at once (ids 0 … CONTEXT_LIMIT - 1)
CONTEXT_LIMIT = 1 << CONTEXT_BITS
#: the phase no collective uses: point-to-point messages' own tag space in every context
P2P_PHASE = (1 << PHASE_BITS) - 1


def make_tag_base(context: int, call_seq: int, phase: int) -> int:
    """The tag of message 0 of a phase of a call on a communicator context."""
    ctx = context & (CONTEXT_LIMIT - 1)  # the allocator keeps it below the limit
    call = call_seq & ((1 << CALL_BITS) - 1)
    return ((((ctx << CALL_BITS) | call) << PHASE_BITS) | phase) << SEQ_BITS


def call_of_tag_base(tag_base: int) -> tuple[int, int]:
    """``(context, call number mod 2**CALL_BITS)`` of a phase's tag base."""
    call = tag_base >> (SEQ_BITS + PHASE_BITS)
    return (call >> CALL_BITS) & ((1 << CONTEXT_BITS) - 1), call & ((1 << CALL_BITS) - 1)


def is_point_to_point(tag: int) -> bool:
    """Whether ``tag`` is a point-to-point message's (phase `P2P_PHASE`)."""
    return (tag >> SEQ_BITS) & P2P_PHASE == P2P_PHASE


def call_tag(context: int, seq: int, phase: int) -> tuple[int, int]:
    """``(value, shift)``: the messages of this phase of a call have ``tag >> shift == value``."""
    return make_tag_base(context, seq, phase) >> SEQ_BITS, SEQ_BITS
