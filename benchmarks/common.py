"""What the benchmark scripts share: sizes, waiting on handles, a transport under settings."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from collops.bench.cli import parse_size
from collops.transport.base import Handle, Transport

__all__ = ["environment", "parse_size", "timed_calls", "wait"]


def timed_calls(comm: Any, call: Callable[[], object], iterations: int,
                warmup: int = 20) -> list[tuple[float, float]]:
    """``call()`` run ``warmup`` times, then ``iterations`` times timed, each after an untimed
    barrier (as `collops bench` does): the monotonic clock at entry and exit of each (the
    same clock in every process)."""
    for _ in range(warmup):
        comm.barrier()
        call()
    marks = []
    for _ in range(iterations):
        comm.barrier()
        start = time.monotonic()
        call()
        marks.append((start, time.monotonic()))
    return marks


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
