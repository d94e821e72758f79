"""Switching the compiled runners on or off for a test (``COLLOPS_COMPILED``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from collops import config
from collops.shm import direct


@contextmanager
def compiled_runners(on: bool) -> Iterator[None]:
    """``COLLOPS_COMPILED`` set for the block (ranks spawned in it inherit the setting) and
    the settings reloaded; both as they were afterwards."""
    before = os.environ.get("COLLOPS_COMPILED")
    os.environ["COLLOPS_COMPILED"] = "1" if on else "0"
    config.reload_settings()
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLLOPS_COMPILED"]
        else:
            os.environ["COLLOPS_COMPILED"] = before
        config.reload_settings()


def compiled_route() -> bool:
    """Whether shared-memory calls take the compiled runners here (not with
    ``COLLOPS_COMPILED=0`` or without a C compiler: the same calls then run in Python)."""
    return direct._direct is not None and config.settings.compiled
