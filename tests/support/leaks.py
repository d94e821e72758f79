"""What a test may leave behind: shared-memory segments that no live process uses.

Other jobs may run on the machine at the same time (another test session, a benchmark), so
a collops segment that appears during a test is counted as left behind only if no process
has it mapped or open — checked twice, a moment apart, as a job being started holds its
segment by name only until its ranks attach.
"""

from __future__ import annotations

import os
import time

SHM = "/dev/shm"


def collops_segments() -> set[str]:
    """Names under /dev/shm that belong to collops."""
    return {name for name in os.listdir(SHM) if "collops" in name}


def _in_use() -> set[str]:
    """Paths under /dev/shm that some process has mapped or open."""
    used: set[str] = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/maps") as maps:
                for line in maps:
                    fields = line.split(None, 5)
                    if len(fields) == 6 and fields[5].startswith(SHM):
                        used.add(fields[5].strip())
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith(SHM):
                    used.add(target)
        except OSError:
            continue
    return used


def left_behind(before: set[str]) -> set[str]:
    """Collops segments created since ``before`` that no live process uses."""
    for attempt in range(2):
        new = collops_segments() - before
        orphans = {n for n in new if f"{SHM}/{n}" not in _in_use()}
        if not orphans:
            return set()
        if attempt == 0:
            time.sleep(1.0)
    return orphans
