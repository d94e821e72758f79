"""Seeing a dead peer from the survivors' side.

`collops.spawn` raises `RankFailed` for the rank that died, whatever the others did; a test of
*their* behaviour (`PeerFailed` naming the dead rank, soon, rather than a hang until the
launcher kills them) needs them to report it. Each survivor runs its call through
`record_peer_failed`, which writes what it saw to a file, and `peer_failures` collects them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import collops


def record_peer_failed(folder: Path, rank: int, call: Callable[[], Any]) -> None:
    """Run ``call`` and write for ``rank`` what it saw: ``{"failed": r, "seconds": t}``."""
    start = time.monotonic()
    seen: dict[str, Any] = {"failed": None}
    try:
        call()
    except collops.PeerFailed as exc:
        seen = {"failed": exc.failed_rank, "seconds": time.monotonic() - start}
        raise
    finally:
        (folder / f"{rank}.json").write_text(json.dumps(seen))


def peer_failures(fn: Callable[..., Any], nprocs: int, folder: Path,
                  *args: Any) -> dict[int, dict[str, Any]]:
    """Run ``fn(comm, folder, *args)`` on ``nprocs`` shm ranks, one of which dies; return what
    each survivor recorded, by rank."""
    with pytest.raises(collops.RankFailed):
        collops.spawn(fn, nprocs, folder, *args, transport="shm", timeout=50)
    return {int(p.stem): json.loads(p.read_text()) for p in folder.glob("*.json")}



def assert_survivors_name_the_dead(fn: Callable[..., Any], folder: Path, *args: Any) -> None:
    """Run ``fn`` as `peer_failures` does on 3 ranks, where rank 1 dies: ranks 0 and 2 must
    each have raised `PeerFailed` naming rank 1 within 2 s."""
    seen = peer_failures(fn, 3, folder, *args)
    assert sorted(seen) == [0, 2], seen
    for record in seen.values():
        assert record["failed"] == 1 and record["seconds"] < 2.0, record

def outcome(call: Callable[[], Any], expected: type[Exception]) -> str:
    """The text of the ``expected`` error ``call`` raised (``"peer failed: …"`` when the peer
    noticed first, raised and left), or ``"no error"``."""
    try:
        call()
    except expected as exc:
        return str(exc)
    except collops.PeerFailed as exc:
        return "peer failed: " + str(exc)
    return "no error"
