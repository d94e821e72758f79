"""What a call signature needs, worked out once: its template (spec, result shape, prepared
algorithm, bound runner)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..algorithms.registry import Algorithm
from ..algorithms.spec import CallSpec
from .cache import BoundedCache
from .engine import CallInfo, Plan
from .envelope import VIEWS_LIMIT

#: a compiled whole call bound to one signature: (op, root, call, algorithm name, template)
BoundEntry = tuple[Any, int, Callable[..., Any], "str | None", "_Template"]


class _Template:
    """What a blocking single-phase call needs, worked out once per call signature."""

    __slots__ = ("spec", "signature", "shape", "receives", "n_out", "none_on_this_rank",
                 "prepared", "runner", "alg_name", "scratch", "send", "recv", "header", "head",
                 "views", "compiled", "hot")

    def __init__(self, spec: CallSpec, signature: object, shape: tuple[int, ...],
                 receives: bool, none_on_this_rank: bool = False) -> None:
        self.spec = spec
        self.signature = signature
        self.shape = shape
        self.receives = receives
        self.n_out = int(np.prod(shape, dtype=np.int64)) if receives else 0
        self.none_on_this_rank = none_on_this_rank
        self.prepared: tuple[Algorithm, Plan | None, CallInfo, dict] | None = None
        #: the algorithm's blocking fast path for this signature (native algorithms with `run`)
        self.runner: Callable[..., None] | None = None
        #: the name of the prepared algorithm (for `Comm.last_algorithm`)
        self.alg_name: str | None = None
        #: an envelope the call reuses (bcast, scatter), the parts of it sent and received,
        #: the header last written into it and typed views into it
        self.scratch: np.ndarray | None = None
        self.send: np.ndarray | None = None
        self.recv: np.ndarray | None = None
        self.header: np.ndarray | None = None
        self.head: np.ndarray | None = None
        self.views = BoundedCache(VIEWS_LIMIT)
        #: the compiled runner behind ``runner``, when it can run whole calls of this
        #: signature (`Comm._bind_call`, `Comm._bind_bcast`), and the entry of `Comm._bound_calls`
        #: that calls it
        self.compiled: Any = None
        self.hot: BoundEntry | None = None
