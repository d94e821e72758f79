"""Point-to-point tests run on threads and on processes over shared memory, there with the
envelopes in the cell rings (the selection table's choice) and without them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import collops
from collops import config

#: transport, and over shm whether envelopes take the cell rings (`collops.shm.cells`)
ROUTES = {"inproc": ("inproc", None), "shm": ("shm", None), "shm-no-cells": ("shm", "0")}
TRANSPORTS = tuple(ROUTES)


@pytest.fixture(params=TRANSPORTS)
def run(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
        ) -> Iterator[Callable[..., list[Any]]]:
    """``run(fn, p, *args)``: ``fn(comm, *args)`` on ``p`` ranks of the transport."""
    transport, cells = ROUTES[request.param]
    if cells is None:
        monkeypatch.delenv("COLLOPS_SHM_P2P_CELLS", raising=False)
    else:
        monkeypatch.setenv("COLLOPS_SHM_P2P_CELLS", cells)
    config.reload_settings()

    def runner(fn: Callable[..., Any], p: int, *args: Any) -> list[Any]:
        return collops.spawn(fn, p, *args, transport=transport, timeout=90)

    runner.transport = transport  # type: ignore[attr-defined]
    yield runner
    monkeypatch.undo()
    config.reload_settings()
