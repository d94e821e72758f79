"""Schedules: the step table, its builder, the validator and the reference executor."""

from .reference import run_reference
from .table import (
    OP_BOR_BYTES,
    OP_CALL,
    OP_ZERO,
    RECV,
    SEND,
    TMP,
    Buffer,
    Region,
    Schedule,
    ScheduleBuilder,
    StepKind,
)
from .validate import validate

__all__ = [
    "OP_BOR_BYTES", "OP_CALL", "OP_ZERO", "RECV", "SEND", "TMP", "Buffer", "Region", "Schedule",
    "ScheduleBuilder", "StepKind", "run_reference", "validate",
]
