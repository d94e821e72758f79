"""The meaning of the local steps (copy, reduce), shared by every executor."""

from __future__ import annotations

import numpy as np

from ..ops import Op
from .table import FLAG_REVERSE, OP_BOR_BYTES, OP_ZERO


def apply_reduce(op: Op, dst: np.ndarray, src: np.ndarray, opcode: int, flags: int) -> None:
    """Combine ``src`` into ``dst`` in place as a reduce step with ``opcode``/``flags`` says."""
    if opcode == OP_ZERO:
        dst.view(np.uint8)[...] = 0
    elif opcode == OP_BOR_BYTES:
        out = dst.view(np.uint8)
        np.bitwise_or(out, src.view(np.uint8), out=out)
    elif flags & FLAG_REVERSE:
        op.combine_into(dst, src, dst)
    else:
        op.combine_into(dst, dst, src)
