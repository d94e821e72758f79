"""Judging fault trials against the must-holds, and the per-kind summary table.

A trial passes when it did not hang, nobody returned a wrong result or completed a call that
should have failed, no process and no shared memory was left, every rank that should have
raised did so naming the cause (the failed rank, or the mismatch) within `MAX_SECONDS` of the
fault, and an interrupted launcher exited with 130 within that time.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import asdict, fields
from typing import Any

from .calls import P2P
from .campaign import Outcome

#: the issue's bounds on the time from a fault to each survivor's error
MEDIAN_SECONDS = 0.5
MAX_SECONDS = 2.0
EXIT_INTERRUPTED = 130


def _survivors(o: Outcome) -> list[int]:
    """The ranks that must raise: all but the one that died, raised or returned (every
    rank in a mismatch, none when the launcher was interrupted)."""
    if o.kind.startswith("sigint"):
        return []
    if o.kind.startswith("mismatch"):
        return list(range(o.ranks))
    return [r for r in range(o.ranks) if r != o.victim]


#: how ``mpiexec`` (MPICH's Hydra) ends a job on its own when one of its ranks is SIGKILLed:
#: it reports the signal as its exit code, or its process manager fails on the dead rank's
#: closed pipe (exit 255) — either way before the survivors could say a word
LAUNCHER_KILLED, LAUNCHER_FAILED = 9, 255
HYDRA_FAILURE = "process manager error"


def ended_by_launcher(o: Outcome) -> bool:
    """Whether ``mpiexec`` itself ended MPI trial ``o`` after its victim was killed (issue 15
    asks collops to notice a dead rank only "where the launcher does not end the job
    itself"); no collops message aborted it."""
    return (o.transport.startswith("mpi") and o.kind == "kill" and o.aborted_by is None
            and (o.exit_code == LAUNCHER_KILLED
                 or (o.exit_code == LAUNCHER_FAILED and HYDRA_FAILURE in o.stderr_tail)))


def _names_the_cause(o: Outcome, record: dict[str, Any] | None) -> bool:
    """Whether a rank's error names what went wrong (on MPI, the job may instead have been
    aborted by the faulty rank, which collops' message on stderr names, or ended by the
    launcher itself)."""
    if record is None:
        if o.aborted_by is None:
            return ended_by_launcher(o)
        if o.abort_named is not None:  # a rank aborted the job naming a dead peer
            return o.abort_named == o.victim
        aborter = o.records.get(o.aborted_by)
        if aborter is None:
            return o.kind == "raise" and o.aborted_by == o.victim
        return aborter.get("status") == "raised" or _names_the_cause(o, aborter)
    if record.get("status") != "error":
        return False
    if o.kind.startswith("mismatch"):
        if record["error"] == "CollectiveMismatch":
            return True
        other = o.records.get(record.get("failed_rank"))  # type: ignore[arg-type]
        return (record["error"] == "PeerFailed" and other is not None
                and other.get("error") == "CollectiveMismatch")
    return record["error"] == "PeerFailed" and record.get("failed_rank") == o.victim


def describe(o: Outcome, rank: int) -> str:
    """How a rank ended in a few words: ``PeerFailed(1)``, ``completed``, ``no record``."""
    record = o.records.get(rank)
    if record is None:
        if o.aborted_by is not None:
            return f"aborted by {o.aborted_by}"
        return "ended by mpiexec" if ended_by_launcher(o) else "no record"
    if record.get("status") != "error":
        return str(record.get("status"))
    failed = record.get("failed_rank")
    return record["error"] + (f"({failed})" if failed is not None else "")


def error_seconds(o: Outcome) -> list[float]:
    """Seconds from the fault to each survivor's error (to the job's end for SIGINT, and for
    the ranks of an aborted MPI job); timeouts are left out."""
    if o.fault_time is None:
        return []
    if o.kind.startswith("sigint"):
        return [o.end_time - o.fault_time]
    found = []
    for r in _survivors(o):
        rec = o.records.get(r)
        if rec and rec.get("status") == "error" and rec["error"] != "CollectiveTimeout":
            found.append(max(0.0, rec["t"] - o.fault_time))
        elif rec is None and o.aborted_by is not None:  # ended with the aborted MPI job
            found.append(o.end_time - o.fault_time)
    return found


def problems(o: Outcome) -> list[str]:
    """What went wrong in trial ``o`` (empty when it passed)."""
    found = []
    if o.hung:
        found.append(f"hung: still running after {o.seconds:.0f} s")
    for r, rec in o.records.items():
        if rec and rec.get("wrong"):
            found.append(f"rank {r}: wrong results at calls {rec['wrong']}")
    for r in _survivors(o):
        rec = o.records.get(r)
        if not _names_the_cause(o, rec):
            found.append(f"rank {r}: {describe(o, r)} does not name the cause"
                         + (f" ({rec.get('message', '')[:160]})" if rec else ""))
    if o.kind.startswith("sigint") and not o.hung and o.exit_code != EXIT_INTERRUPTED:
        found.append(f"exit code {o.exit_code}, not {EXIT_INTERRUPTED}")
    if not o.kind.startswith("sigint") and o.exit_code == 0:
        found.append("exit code 0 after a fault")
    slow = [s for s in error_seconds(o) if s > MAX_SECONDS]
    if slow:
        found.append(f"error after {max(slow):.2f} s > {MAX_SECONDS} s")
    if o.processes_left:
        found.append(f"{o.processes_left} processes left")
    if o.shm_left:
        found.append(f"{sum(o.shm_left.values())} bytes left in /dev/shm: {sorted(o.shm_left)}")
    return found


def summarise(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    """One row per (transport, kind): trials, failures, hangs, silent results, errors by
    rank role, time to error, exit codes, what was left."""
    groups: dict[tuple[str, str], list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault((o.transport, o.kind), []).append(o)
    rows = []
    for (transport, kind), group in groups.items():
        seconds = [s for o in group for s in error_seconds(o)]
        survivors, victims = Counter[str](), Counter[str]()
        for o in group:
            for r in range(o.ranks):
                role = survivors if r in _survivors(o) else victims
                role[describe(o, r)] += 1
        failed = [o for o in group if problems(o)]
        rows.append({
            "transport": transport, "kind": kind, "trials": len(group), "failed": len(failed),
            "hangs": sum(o.hung for o in group),
            "silent": sum(any("wrong results" in p or "completed" in p for p in problems(o))
                          for o in group),
            "survivor_errors": dict(survivors), "faulty_rank_ends": dict(victims),
            "median_s": statistics.median(seconds) if seconds else None,
            "max_s": max(seconds) if seconds else None,
            "exit_codes": dict(Counter(str(o.exit_code) for o in group)),
            "at_p2p": sum(o.fault_call in P2P for o in group),
            "processes_left": sum(o.processes_left for o in group),
            "shm_bytes_left": sum(sum(o.shm_left.values()) for o in group),
            "problems": dict(Counter(p.split(" (")[0] for o in failed for p in problems(o))),
        })
    return rows


def holds(row: dict[str, Any]) -> bool:
    """Whether a summary row meets the must-holds (no failed trial, median time bound)."""
    median = row["median_s"]
    return row["failed"] == 0 and (median is None or median <= MEDIAN_SECONDS)


def _counts(counter: dict[str, int]) -> str:
    return ", ".join(f"{k} ×{v}" for k, v in sorted(counter.items(), key=lambda kv: -kv[1]))


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def table(rows: list[dict[str, Any]], markdown: bool = False) -> str:
    """The summary as a plain-text or Markdown table."""
    head = ["transport", "kind", "trials", "at p2p", "failed", "hangs", "silent",
            "survivors' errors", "median s", "max s", "exit codes", "procs left", "shm left",
            "holds"]
    body = [[r["transport"], r["kind"], str(r["trials"]), str(r.get("at_p2p", "—")),
             str(r["failed"]), str(r["hangs"]),
             str(r["silent"]), _counts(r["survivor_errors"]) or "—", _seconds(r["median_s"]),
             _seconds(r["max_s"]), _counts(r["exit_codes"]), str(r["processes_left"]),
             str(r["shm_bytes_left"]), "yes" if holds(r) else "NO"] for r in rows]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(b) + " |" for b in body])
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    return "\n".join("  ".join(x.ljust(w) for x, w in zip(line, widths, strict=True)).rstrip()
                     for line in [head, *body])


def as_json(outcomes: list[Outcome]) -> dict[str, Any]:
    """The summary and every trial (with its problems), for ``--json``."""
    return {"summary": summarise(outcomes),
            "trials": [{**asdict(o), "problems": problems(o)} for o in outcomes]}


def from_json(saved: dict[str, Any]) -> list[Outcome]:
    """The trials of an `as_json` record, to judge and summarise again."""
    names = {f.name for f in fields(Outcome)}
    outcomes = []
    for trial in saved["trials"]:
        o = Outcome(**{k: v for k, v in trial.items() if k in names})
        o.records = {int(r): rec for r, rec in o.records.items()}
        outcomes.append(o)
    return outcomes
