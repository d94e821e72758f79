"""What the benchmark scripts share: sizes, waiting on handles, a transport under settings."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from collops.bench.cli import parse_size
from collops.transport.base import Handle, Transport

__all__ = ["environment", "parse_size", "wait"]


def wait(t: Transport, handles: list[Handle]) -> None:
    """Block until every handle is done."""
    while not all(h.done for h in handles):
        t.wait_for_activity(1.0)


@contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for the duration of a block, then restore them."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
