"""A tuning file in the selection table's format, with its evidence and provenance.

A rule is an algorithm rule (``[[allreduce.rule]]``) or a protocol rule for the default
algorithm (``[[protocols.shm_stream.by_reference]]`` with ``collective``). Every rule carries
its ``source`` (``collops tune`` on which host, when) and an ``evidence`` table — the benchmark
sizes and message bytes it was measured at, the winner's and the default's medians, their
spreads, the repetitions, and the tuned / default ratios of the final verification — and the
file a ``[measured]`` table naming the machine (host, CPU model,
cores, sockets, kernel), the transport and its MPI library, the ranks, the date and the
command, which `comm.explain` compares with where it runs.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ..bench.measure import REGISTRY_NAME
from ..version import __version__
from .across import worst_ratio
from .decide import Decision, Range, ranges
from .jobs import JobRule, rule_lines
from .protocols import setting_rule, toml_value
from .verify import Check, Checks

#: transports a rule can be bounded to (a resource of theirs bears the name); threads offer
#: none, so a file measured on threads bounds its rules by rank count alone
BOUND_TRANSPORTS = ("shm", "mpi")

HEADER = """\
# collops tuning file, written by `collops tune` on the machine named in [measured].
# The selection table's format (collops.algorithms.tuning); these rules are tried before the
# built-in ones, each only where a measured winner beat the default by more than the noise.
"""


def machine(transport: str, ranks: Sequence[int], command: str,
            mpi: str | None = None) -> dict[str, Any]:
    """Where and how the measurement runs, as the ``[measured]`` table."""
    cpu, sockets = _cpu()
    found: dict[str, Any] = {
        "host": socket.gethostname(), "cpu": cpu, "cores": os.cpu_count() or 0,
        "sockets": sockets, "kernel": platform.release(),
        "python": platform.python_version(), "collops": __version__,
        "transport": transport, "ranks": list(ranks),
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": command}
    if mpi:
        found["mpi"] = mpi
    return found


def _cpu() -> tuple[str, int]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return platform.processor() or "unknown", 1
    models = [line.split(":", 1)[1].strip() for line in text.splitlines()
              if line.startswith("model name")]
    sockets = {line.split(":", 1)[1].strip() for line in text.splitlines()
               if line.startswith("physical id")}
    return (models[0] if models else "unknown"), max(1, len(sockets))


def write_table(results: Mapping[int, Mapping[str, Sequence[Decision]]],
                measured: Mapping[str, Any], transport: str,
                checks: Mapping[int, Checks] | None = None,
                job_rules: Mapping[int, Sequence[JobRule]] | None = None) -> str:
    """The TOML text: ``results`` maps a rank count to each collective's decisions; with
    ``checks`` (by rank count, `verify.verify_job`), only the rules verified are written, with
    their verification, and the dropped ones are listed in comments; ``job_rules`` (by rank
    count, `jobs.tune_job_settings`) adds the job-wide settings the same way."""
    lines = [HEADER]
    if measured:
        lines.append("[measured]")
        lines += [f"{key} = {toml_value(value)}" for key, value in measured.items()]
    source = (f"collops tune on {measured.get('host', '?')}, "
              f"{str(measured.get('date', ''))[:10]}")
    for ranks, per_collective in sorted(results.items()):
        for collective, decisions in per_collective.items():
            name = REGISTRY_NAME.get(collective, collective)
            for r in ranges(decisions):
                check = None if checks is None else checks.get(ranks, {}).get((collective,
                                                                               r.low))
                if checks is not None and (check is None or not check.kept):
                    lines += ["", _dropped(name, ranks, r, check)]
                    continue
                lines += [""] + _rule(name, ranks, r, transport, source, check)
        for rule in (job_rules or {}).get(ranks, ()):
            lines += [""] + rule_lines(rule, source)
    return "\n".join(lines) + "\n"


def _rule(name: str, ranks: int, r: Range, transport: str, source: str,
          check: Check | None) -> list[str]:
    """One range's rule: an algorithm rule, or a protocol rule for the default algorithm."""
    d = r.decisions
    evidence: dict[str, Any] = {
        "sizes": [x.size for x in d if x.size is not None],
        "bytes": [x.nbytes for x in d],
        "median_us": [round(x.best.median * 1e6, 3) for x in d],
        "spread": [round(x.best.spread, 3) for x in d],
        "default": d[0].default.algorithm,
        "default_median_us": [round(x.default.median * 1e6, 3) for x in d],
        "repetitions": len(d[0].best.samples)}
    if check is not None:
        evidence["verified_ratio"] = [round(row.ratio, 3) for row in check.rows]
        evidence["verified_rounds"] = len(check.rows[0].tuned) if check.rows else 0
        evidence["verified_won"] = [row.rounds_won for row in check.rows]
        if check.jobs:  # rounds of a job without the rules and one with them
            evidence["verified_in_jobs"] = True
            evidence["worst_mode_ratio"] = [round(worst_ratio(row), 3) for row in check.rows]
    if r.setting is None:
        lines = [f"[[{name}.rule]]", f"algorithm = {toml_value(r.algorithm)}",
                 f"min_bytes = {r.low}"]
        if r.high is not None:
            lines.append(f"max_bytes = {r.high}")
        lines += [f"min_ranks = {ranks}", f"max_ranks = {ranks}"]
    else:
        component, key = r.setting[0].split(".", 1)
        lines = setting_rule(component, key, r.setting[1], name, ranks, r.low, r.high)
    if transport in BOUND_TRANSPORTS:
        lines.append(f"transport = {toml_value(transport)}")
    return lines + [f"source = {toml_value(source)}", f"evidence = {_inline(evidence)}"]


def _dropped(name: str, ranks: int, r: Range, check: Check | None) -> str:
    """A comment naming a rule the verification dropped, and why."""
    top = "" if r.high is None else str(r.high)
    why = ("not verified" if check is None or not check.rows else
           "tuned / default " + ", ".join(
               f"{row.ratio:.2f} ({row.tuned_algorithm}, faster in {row.rounds_won} of "
               f"{len(row.tuned)} {'jobs' if check.jobs else 'rounds'})"
               for row in check.rows))
    if check is not None and check.refused:
        why = "verified, then refused: " + check.refused
    elif check is not None and check.jobs:
        why += " in jobs of their own; slowest mode " + ", ".join(
            f"{worst_ratio(row):.2f}" for row in check.rows)
    return (f"# dropped after verification: {name} {r.decisions[0].best.label}, "
            f"{r.low}-{top} B, {ranks} ranks: {why}")


def _inline(table: Mapping[str, Any]) -> str:
    return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in table.items()) + " }"


def command_line() -> str:
    """How this process was started, as a shell would show it."""
    return " ".join(["collops", *sys.argv[1:]]) if sys.argv else "collops tune"
