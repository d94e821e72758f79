"""Driving an endpoints client in tests."""

from __future__ import annotations

import time
from typing import Any

from collops.endpoints import Client


def drive(client: Client, done: Any, timeout: float = 30.0) -> None:
    """Advance every context of the task until ``done()`` (or fail after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        if not client.advance():
            client.wait_for_activity(0.001)
