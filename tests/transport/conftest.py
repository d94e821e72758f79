"""Fixtures of the multi-process transport tests: nothing may outlive a test."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.leaks import collops_segments, left_behind


def child_pids() -> list[int]:
    """Processes (zombies included) whose parent is this process."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as status:
                for line in status:
                    if line.startswith("PPid:"):
                        if int(line.split()[1]) == me:
                            found.append(int(entry))
                        break
        except OSError:
            continue
    return found


@pytest.fixture(autouse=True)
def leaves_nothing_behind() -> Iterator[None]:
    """After the test: no child process and no new collops segment remain."""
    before = collops_segments()
    yield
    assert child_pids() == []
    assert left_behind(before) == set()
