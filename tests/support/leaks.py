"""What a test may leave behind: shared-memory files no live process uses, and processes.

Other jobs may run on the machine at the same time (another test session, a benchmark), so
a file that appears in /dev/shm during a test is counted as left behind only if no process
has it mapped or open — checked twice, a moment apart, as a job being started holds its
segment by name only until its ranks attach. ``match`` picks the files: collops' own
segments by default, everything (MPICH's too) with ``match=""``.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Mapping

SHM = "/dev/shm"


def shm_names(match: str = "collops") -> set[str]:
    """Names under /dev/shm containing ``match``."""
    if not os.path.isdir(SHM):
        return set()
    return {name for name in os.listdir(SHM) if match in name}


def collops_segments() -> set[str]:
    """Names under /dev/shm that belong to collops."""
    return shm_names("collops")


def _in_use() -> set[str]:
    """Paths under /dev/shm that some process has mapped or open."""
    used: set[str] = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
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


def left_behind(before: set[str], match: str = "collops") -> set[str]:
    """Files matching ``match`` created since ``before`` that no live process uses."""
    orphans: set[str] = set()
    for attempt in range(2):
        new = shm_names(match) - before
        orphans = {n for n in new if f"{SHM}/{n}" not in _in_use()
                   and os.path.exists(f"{SHM}/{n}")}
        if not orphans:
            return set()
        if attempt == 0:
            time.sleep(1.0)
    return orphans


#: the environment variable naming one job's processes (`tagged`, `still_running`)
TAG = "LEAKCHECK_TAG"


def tagged(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with a tag unique to one job, inherited by every
    process the job starts: `still_running` counts only those (tests running side by side
    may run the same script)."""
    return {**(os.environ if env is None else env), TAG: uuid.uuid4().hex}


def _carries(pid: str, entry: bytes) -> bool:
    """Whether process ``pid``'s environment holds ``entry`` (False once it is gone)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return entry in environ.read().split(b"\0")
    except OSError:
        return False


def still_running(pattern: str, env: Mapping[str, str], grace: float = 3.0) -> list[str]:
    """Pids of the job started with ``env`` (from `tagged`) whose command line contains
    ``pattern``, still alive ``grace`` seconds on (an aborted job's ranks are killed by their
    launcher, which may take a moment)."""
    entry = f"{TAG}={env[TAG]}".encode()
    end = time.monotonic() + grace
    while True:
        found = [pid for pid in subprocess.run(["pgrep", "-f", pattern], capture_output=True,
                                               text=True).stdout.split()
                 if _carries(pid, entry)]
        if not found or time.monotonic() > end:
            return found
        time.sleep(0.1)
