"""The bit layout of a message tag: context | call sequence | phase | message sequence.

Every collective call on a communicator has a private tag space: the communicator's context,
the call's number and the phase of the call sit above the sequence number of a message in
the schedule. The engine makes tags from it, and the transports' own collectives read a
call's number back out of a tag (to tell which call an unmatched message belongs to).
"""

from __future__ import annotations

SEQ_BITS = 24
PHASE_BITS = 3
CALL_BITS = 24
CONTEXT_BITS = 12


def make_tag_base(context: int, call_seq: int, phase: int) -> int:
    """The tag of message 0 of a phase of a call on a communicator context."""
    ctx = context & ((1 << CONTEXT_BITS) - 1)
    call = call_seq & ((1 << CALL_BITS) - 1)
    return ((((ctx << CALL_BITS) | call) << PHASE_BITS) | phase) << SEQ_BITS


def call_of_tag_base(tag_base: int) -> tuple[int, int]:
    """``(context, call number mod 2**CALL_BITS)`` of a phase's tag base."""
    call = tag_base >> (SEQ_BITS + PHASE_BITS)
    return (call >> CALL_BITS) & ((1 << CONTEXT_BITS) - 1), call & ((1 << CALL_BITS) - 1)


def call_tag(context: int, seq: int, phase: int) -> tuple[int, int]:
    """``(value, shift)``: the messages of this phase of a call have ``tag >> shift == value``."""
    return make_tag_base(context, seq, phase) >> SEQ_BITS, SEQ_BITS
