"""Seeing the buffers a communicator hands to a schedule's execution."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np


@contextmanager
def schedule_send_areas() -> Iterator[list[np.ndarray]]:
    """Within the block, the send area of every schedule execution a `Comm` starts, in
    order (in this process: call it in a rank)."""
    from collops.runtime import prepared as prepared_module

    seen: list[np.ndarray] = []
    original = prepared_module.Execution

    class Recording(original):  # type: ignore[misc, valid-type]
        def __init__(self, plan: Any, areas: Any, *args: Any, **kwargs: Any) -> None:
            seen.append(areas[0])
            super().__init__(plan, areas, *args, **kwargs)

    prepared_module.Execution = Recording  # type: ignore[misc]
    try:
        yield seen
    finally:
        prepared_module.Execution = original  # type: ignore[misc]
