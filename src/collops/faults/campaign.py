"""Fault trials: one fresh job per trial, one fault injected, everything it left observed.

A trial starts a job of `rank_program` (``collops run`` for shm, ``mpiexec`` for MPI, a
Python process running ``collops.spawn`` for threads) in its own session, with a marker in
its environment. It injects the fault (the ranks cause theirs; SIGINT, once or twice, is sent
to the launcher from here), waits for the job to end — a job still running after the trial's
limit is a hang and is killed — and then collects what each rank recorded, the exit status,
the processes still carrying the marker and the files its ranks mapped in /dev/shm that
outlive the job.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import rank_program
from .rank_program import RANK_FAULTS, Plan, plan_json

#: every fault kind, and the ones each transport can take (a thread cannot be killed)
KINDS = ("kill", "sigint", "sigint-twice", "raise", "return", "mismatch-root", "mismatch-op",
         "mismatch-dtype", "mismatch-count", "mismatch-collective")
#: ``mpi-nodes``: MPI with every rank a node of its own (``COLLOPS_RANKS_PER_NODE=1``), so
#: the ranks agree on each call across nodes (`collops.mpi.spanning`), as on a cluster
TRANSPORTS = ("shm", "threads", "mpi", "mpi-nodes")
_MPI_KINDS = tuple(k for k in KINDS if not k.startswith("sigint"))
#: (SIGINT of ``mpiexec`` tests MPICH's launcher, not collops)
TRANSPORT_KINDS = {"shm": KINDS, "mpi": _MPI_KINDS, "mpi-nodes": _MPI_KINDS,
                   "threads": tuple(k for k in KINDS if k != "kill")}
#: what collops prints on stderr when an uncaught exception makes it abort an MPI job
MPI_ABORT = re.compile(r"collops: uncaught \w+ on MPI rank (\d+) of")
#: what collops prints when a rank aborts an MPI job because a peer of its node died: (dead,
#: aborting rank) — at exit (`MpiTransport.close`) or blocked in MPI's own call (the guards)
MPI_DEAD_ABORT = re.compile(r"collops: MPI rank (\d+) \(pid \d+\) (?:is gone; rank (\d+) "
                            r"aborts the job|died while rank (\d+) was blocked)")
MARKER = "COLLOPS_FAULT_TRIAL"
SHM = "/dev/shm"


@dataclass
class Trial:
    """One trial's set-up."""

    transport: str
    kind: str
    ranks: int
    plan: Plan
    limit: float


@dataclass
class Outcome:
    """What one trial did: per rank its record (None if it wrote none), the fault's time, the
    job's exit status, whether it hung, what it left, and on MPI the rank whose uncaught
    exception aborted the job (its peers are then ended without a word of their own)."""

    transport: str
    kind: str
    ranks: int
    seed: int
    victim: int
    at: int
    exit_code: int | None
    hung: bool
    seconds: float
    fault_time: float | None
    end_time: float
    records: dict[int, dict[str, Any] | None]
    processes_left: int = 0
    shm_left: dict[str, int] = field(default_factory=dict)
    aborted_by: int | None = None
    stderr_tail: str = ""
    #: the call the faulty rank made when it caused the fault (None: SIGINT, or unknown)
    fault_call: str | None = None
    #: the rank a collops abort named dead, when a rank aborted the job because of it
    abort_named: int | None = None


def mpiexec() -> str | None:
    """The ``mpiexec`` beside this Python (the MPICH wheel's), else on PATH."""
    beside = Path(sys.executable).with_name("mpiexec")
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def plan_trial(rng: np.random.Generator, transport: str, kind: str, ranks: int,
               calls: int, call_timeout: float, limit: float, folder: str) -> Trial:
    """A random trial of ``kind``: seed, victim, the call and moment of the fault."""
    if kind not in TRANSPORT_KINDS[transport]:
        raise ValueError(f"{transport} cannot take fault kind {kind!r}")
    plan = Plan(folder=folder, seed=int(rng.integers(2**31)), calls=calls,
                kind=kind if kind in RANK_FAULTS else "none",
                victim=int(rng.integers(ranks)), at=int(rng.integers(1, max(2, calls - 5))),
                delay=float(rng.uniform(0, 0.002)), call_timeout=call_timeout,
                repeat=kind.startswith("sigint"))
    return Trial(transport, kind, ranks, plan, limit)


def _command(trial: Trial) -> list[str]:
    program = [rank_program.__file__, plan_json(trial.plan)]
    n = str(trial.ranks)
    if trial.transport == "shm":
        return [sys.executable, "-m", "collops", "run", "-n", n, *program]
    if trial.transport == "threads":
        return [sys.executable, *program, "--threads", n]
    launcher = mpiexec()
    if launcher is None:
        raise RuntimeError("no mpiexec: pip install 'collops[mpi]'")
    # without auto clean-up mpiexec leaves the survivors of a dead rank running, so what
    # collops itself does about the dead rank is what the trial sees
    nodes = ("-genv", "COLLOPS_RANKS_PER_NODE", "1") if trial.transport == "mpi-nodes" else ()
    return [launcher, "-disable-auto-cleanup", *nodes, "-n", n, sys.executable, *program]


def _environment(trial: Trial, marker: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("COLLOPS_")}
    return {**keep, MARKER: marker}


def run_trial(trial: Trial, rng: np.random.Generator) -> Outcome:
    """Run ``trial`` in a fresh job and observe it (see the module's docstring)."""
    folder = Path(trial.plan.folder)
    marker = uuid.uuid4().hex
    with open(folder / "stderr", "wb") as err:
        start = time.monotonic()
        job = subprocess.Popen(_command(trial), env=_environment(trial, marker),
                               stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL,
                               start_new_session=True, preexec_fn=_default_sigint)
        fault_time = None
        if trial.kind.startswith("sigint"):
            fault_time = _interrupt(job, trial, folder, rng, start)
        hung = False
        try:
            job.wait(timeout=max(0.0, start + trial.limit - time.monotonic()))
        except subprocess.TimeoutExpired:
            hung = True
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
        end = time.monotonic()
    records = {r: _read(folder / f"rank{r}.json") for r in range(trial.ranks)}
    stderr = (folder / "stderr").read_text(errors="replace")
    fault = _read(folder / "fault.json")
    if fault is not None:
        fault_time = fault["t"]
    left = processes_with(marker)
    for pid in left:
        _kill(pid)
    # only the files this job's ranks mapped: other jobs on the machine come and go meanwhile
    leaked = shm_left(_mapped_by_ranks(folder, trial.ranks))
    for name in leaked:  # reported, then removed: the campaign itself leaves nothing
        Path(SHM, name).unlink(missing_ok=True)
    aborted_by, named = abort_of(stderr)
    return Outcome(trial.transport, trial.kind, trial.ranks, trial.plan.seed, trial.plan.victim,
                   trial.plan.at, None if hung else _shell_status(job.returncode), hung,
                   end - start, fault_time, end, records, len(left), leaked, aborted_by,
                   stderr[-2000:], None if fault is None else fault.get("call"), named)


def abort_of(stderr: str) -> tuple[int | None, int | None]:
    """From collops' messages on an MPI job's stderr: the rank that aborted the job, and the
    rank it named dead when it aborted over a dead peer."""
    dead = MPI_DEAD_ABORT.search(stderr)
    if dead is not None:
        return int(dead[2] or dead[3]), int(dead[1])
    abort = MPI_ABORT.search(stderr)
    return (int(abort[1]) if abort else None), None


def _default_sigint() -> None:
    """In the job, before exec: SIGINT's default action, even if the campaign itself was
    started with SIGINT ignored (as a shell's background job is), so Python in the job
    turns it into KeyboardInterrupt as it would for a user's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt(job: subprocess.Popen[bytes], trial: Trial, folder: Path,
               rng: np.random.Generator, start: float) -> float | None:
    """Once every rank's loop runs, SIGINT the launcher (twice for ``sigint-twice``); the
    moment of the first, or None if the job ended first."""
    while not all((folder / f"ready{r}").exists() for r in range(trial.ranks)):
        if job.poll() is not None or time.monotonic() - start > trial.limit:
            return None
        time.sleep(0.01)
    time.sleep(float(rng.uniform(0, 0.3)))
    first = time.monotonic()
    job.send_signal(signal.SIGINT)
    if trial.kind == "sigint-twice":
        time.sleep(float(rng.uniform(0.005, 0.1)))
        if job.poll() is None:
            job.send_signal(signal.SIGINT)
    return first


def _shell_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return None


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def processes_with(marker: str, grace: float = 2.0) -> list[int]:
    """Pids whose environment carries ``MARKER=marker``, still there after ``grace`` s."""
    needle = f"{MARKER}={marker}".encode()
    deadline = time.monotonic() + grace
    while True:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/environ", "rb") as env:
                    if needle in env.read().split(b"\0"):
                        found.append(int(pid))
            except OSError:
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def _mapped_or_open() -> set[str]:
    """Paths under /dev/shm some live process maps or holds open (another job's)."""
    used: set[str] = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/maps") as maps:
                used.update(line.split(None, 5)[5].strip() for line in maps
                            if line.count(" ") >= 5 and f" {SHM}/" in line)
            for fd in os.listdir(f"/proc/{pid}/fd"):
                used.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except (OSError, IndexError):
            continue
    return used


def _mapped_by_ranks(folder: Path, ranks: int) -> set[str]:
    """The /dev/shm files the job's ranks said they map (in their ``ready`` files)."""
    names: set[str] = set()
    for r in range(ranks):
        ready = _read(folder / f"ready{r}")
        names.update(ready["shm"] if ready else [])
    return names


def shm_left(candidates: set[str]) -> dict[str, int]:
    """Those of ``candidates`` still in /dev/shm that no live process uses, with the bytes
    each holds (checked twice, a moment apart: a file may be in the midst of removal)."""
    left: dict[str, int] = {}
    for attempt in range(2):
        if not any(os.path.exists(f"{SHM}/{name}") for name in candidates):
            return {}
        used = _mapped_or_open()
        left = {}
        for name in candidates:
            try:
                if f"{SHM}/{name}" not in used:
                    left[name] = os.stat(f"{SHM}/{name}").st_blocks * 512
            except OSError:
                continue
        if not left:
            return left
        if attempt == 0:
            time.sleep(0.5)
    return left


def run_campaign(transports: list[str], kinds: list[str], trials: int, *, ranks: int = 3,
                 calls: int = 40, call_timeout: float = 5.0, limit: float = 30.0,
                 seed: int = 0, progress: Any = None) -> list[Outcome]:
    """``trials`` trials of every kind each transport can take (of ``kinds``)."""
    rng = np.random.default_rng(seed)
    outcomes = []
    for transport in transports:
        for kind in kinds:
            if kind not in TRANSPORT_KINDS[transport]:
                continue
            for _ in range(trials):
                with tempfile.TemporaryDirectory(prefix="collops-faults-") as folder:
                    trial = plan_trial(rng, transport, kind, ranks, calls, call_timeout, limit,
                                       folder)
                    outcomes.append(run_trial(trial, rng))
                if progress is not None:
                    progress(outcomes[-1])
    return outcomes
