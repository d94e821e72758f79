"""Point-to-point tests run on threads and on processes over shared memory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import collops

TRANSPORTS = ("inproc", "shm")


@pytest.fixture(params=TRANSPORTS)
def run(request: pytest.FixtureRequest) -> Callable[..., list[Any]]:
    """``run(fn, p, *args)``: ``fn(comm, *args)`` on ``p`` ranks of the transport."""
    transport = request.param

    def runner(fn: Callable[..., Any], p: int, *args: Any) -> list[Any]:
        return collops.spawn(fn, p, *args, transport=transport, timeout=90)

    runner.transport = transport  # type: ignore[attr-defined]
    return runner
