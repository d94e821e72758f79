"""One job of a fault trial: every rank runs random collectives checked against numpy, one
rank causes the trial's fault, and every rank writes down what happened to it.

Run as a program, with the trial's `Plan` as JSON: under ``collops run`` (shm), under
``mpiexec`` (MPI), or with ``--threads K`` (``collops.spawn`` on K threads in this process).
Rank r writes ``rank<r>.json`` (how its loop ended: completed, or which error at which call
and when, and the calls whose result differed from numpy's for the call it made: a rank may
finish its part of a mismatched call, e.g. a gather's non-root, but never with a wrong
result), ``ready<r>`` (with the /dev/shm files it maps) once its loop runs, and
the rank that causes the fault writes ``fault.json`` with the moment it did and the call it
did it in.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass
from itertools import count
from pathlib import Path
from typing import Any

import collops
from collops.faults.calls import MISMATCHABLE, Deviation, expected, invoke, make_calls, same_result

#: faults a rank causes itself (the launcher's SIGINT comes from outside)
RANK_FAULTS = ("kill", "raise", "return") + tuple(f"mismatch-{m}" for m in MISMATCHABLE)


@dataclass
class Plan:
    """What a trial's ranks do: ``calls`` random calls from ``seed`` (cycled while
    ``repeat``), and at call ``at`` the rank ``victim`` causes ``kind`` (a `RANK_FAULTS`
    entry or ``none``); ``delay`` is how long after entering that call a kill comes."""

    folder: str
    seed: int
    calls: int
    kind: str = "none"
    victim: int = 0
    at: int = 0
    delay: float = 0.0
    call_timeout: float | None = None
    repeat: bool = False
    large: bool = True
    #: point-to-point calls among the collectives (`calls.P2P`)
    p2p: bool = True

    def mismatch(self) -> Deviation | None:
        """The deviation the victim makes at call ``at`` (None unless a mismatch trial)."""
        return Deviation(self.kind.split("-", 1)[1]) if self.kind.startswith("mismatch") else None

    def call_list(self, size: int) -> list[Any]:
        """The calls of this plan on ``size`` ranks (the faulty call forced to one the fault
        can be made in)."""
        deviation = self.mismatch()
        forced = {self.at: MISMATCHABLE[deviation.kind][self.seed % len(
            MISMATCHABLE[deviation.kind])]} if deviation else {}
        return make_calls(self.seed, self.calls, size, forced=forced, large=self.large,
                          p2p=self.p2p)


class InjectedFault(RuntimeError):
    """The exception a rank raises on purpose in a ``raise`` trial."""


def _write(path: Path, record: dict[str, Any]) -> None:
    path.write_text(json.dumps(record))


def _shm_files() -> list[str]:
    """The names of the files under /dev/shm this process maps (its job's segment, MPI's)."""
    try:
        with open("/proc/self/maps") as maps:
            return sorted({line.split("/dev/shm/", 1)[1].split()[0] for line in maps
                           if "/dev/shm/" in line})
    except OSError:
        return []


def _note_fault(plan: Plan, rank: int, call: str) -> None:
    _write(Path(plan.folder) / "fault.json", {"rank": rank, "kind": plan.kind, "call": call,
                                              "t": time.monotonic()})


def _kill_later(plan: Plan, rank: int, call: str) -> threading.Timer:
    """SIGKILL this process ``plan.delay`` seconds from now, whatever it is doing then."""
    def die() -> None:
        _note_fault(plan, rank, call)
        os.kill(os.getpid(), signal.SIGKILL)
    timer = threading.Timer(plan.delay, die)
    timer.daemon = True
    timer.start()
    return timer


def run_rank(comm: Any, plan: Plan) -> None:
    """Run the plan's loop on this rank and write ``rank<r>.json``; an error is recorded
    and raised on, as a user's program would let it end the job."""
    rank, folder = comm.rank, Path(plan.folder)
    calls = plan.call_list(comm.size)
    record: dict[str, Any] = {"rank": rank, "status": "completed", "calls": 0, "wrong": []}
    victim = rank == plan.victim
    timer = None
    i = 0
    try:
        for i in range(len(calls)) if not plan.repeat else count():
            call = calls[i % len(calls)]
            deviation = None
            if i == plan.at and plan.kind != "none":
                if victim and plan.kind == "kill":
                    timer = _kill_later(plan, rank, call.collective)
                elif victim and plan.kind == "raise":
                    record["status"] = "raised"
                    _note_fault(plan, rank, call.collective)
                    raise InjectedFault(f"rank {rank} raises on purpose at call {i}")
                elif victim and plan.kind == "return":
                    record["status"] = "returned"
                    _note_fault(plan, rank, call.collective)
                    return
                elif victim:
                    deviation = plan.mismatch()
                    _note_fault(plan, rank, call.collective)
            got = invoke(comm, call, deviation, plan.call_timeout)
            made = deviation.applied(call, comm.size) if deviation else call
            if not same_result(got, expected(made, rank, comm.size)):
                record["wrong"].append(i)
            record["calls"] = i + 1
            if i == 0:
                _write(folder / f"ready{rank}", {"shm": _shm_files()})
        if timer is not None:
            timer.join()  # the loop ended before the kill: it still comes
    except Exception as exc:  # any error, collops' or not (a foreign one is a finding)
        if not isinstance(exc, InjectedFault):
            record.update(status="error", error=type(exc).__name__, message=str(exc)[:600],
                          failed_rank=getattr(exc, "failed_rank", None), at=i,
                          t=time.monotonic())
        raise
    finally:
        _write(folder / f"rank{rank}.json", record)


def main(argv: list[str] | None = None) -> int:
    """Run one trial's job: this process's rank, or ``--threads K`` ranks on threads."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("plan", help="the Plan as JSON")
    parser.add_argument("--threads", type=int, default=0, help="run K ranks on threads")
    args = parser.parse_args(argv)
    plan = Plan(**json.loads(args.plan))
    if args.threads:
        try:
            collops.spawn(run_rank, args.threads, plan)
        except collops.RankFailed as exc:
            sys.stderr.write(f"{str(exc).splitlines()[0]}\n")
            return 1
        return 0
    run_rank(collops.init(), plan)
    return 0


def plan_json(plan: Plan) -> str:
    """``plan`` as the program's argument."""
    return json.dumps(asdict(plan))


if __name__ == "__main__":
    sys.exit(main())
