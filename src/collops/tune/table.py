"""A tuning file in the selection table's format, with its evidence and provenance.

Every rule carries its ``source`` (``collops tune`` on which host, when) and an ``evidence``
table — the sizes it was measured at, the winner's and the default's medians, their spreads and
the repetitions — and the file a ``[measured]`` table naming the machine (host, CPU model,
cores, sockets, kernel), the transport and its MPI library, the ranks, the date and the
command, which `comm.explain` compares with where it runs.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ..bench.measure import REGISTRY_NAME
from ..version import __version__
from .decide import Decision, ranges

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
                measured: Mapping[str, Any], transport: str) -> str:
    """The TOML text: ``results`` maps a rank count to each collective's decisions."""
    lines = [HEADER, "[measured]"]
    lines += [f"{key} = {_value(value)}" for key, value in measured.items()]
    source = f"collops tune on {measured['host']}, {str(measured['date'])[:10]}"
    for ranks, per_collective in sorted(results.items()):
        for collective, decisions in per_collective.items():
            name = REGISTRY_NAME.get(collective, collective)
            for r in ranges(decisions):
                d = r.decisions
                evidence = {
                    "bytes": [x.nbytes for x in d],
                    "median_us": [round(x.best.median * 1e6, 3) for x in d],
                    "spread": [round(x.best.spread, 3) for x in d],
                    "default": d[0].default.algorithm,
                    "default_median_us": [round(x.default.median * 1e6, 3) for x in d],
                    "repetitions": len(d[0].best.samples)}
                lines += ["", f"[[{name}.rule]]", f"algorithm = {_value(r.algorithm)}",
                          f"min_bytes = {r.low}"]
                if r.high is not None:
                    lines.append(f"max_bytes = {r.high}")
                lines += [f"min_ranks = {ranks}", f"max_ranks = {ranks}",
                          f"transport = {_value(transport)}", f"source = {_value(source)}",
                          f"evidence = {_inline(evidence)}"]
    return "\n".join(lines) + "\n"


def _value(v: Any) -> str:
    """A TOML value (strings as JSON strings, which TOML reads the same)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return json.dumps(str(v), ensure_ascii=False)


def _inline(table: Mapping[str, Any]) -> str:
    return "{ " + ", ".join(f"{k} = {_value(v)}" for k, v in table.items()) + " }"


def command_line() -> str:
    """How this process was started, as a shell would show it."""
    return " ".join(["collops", *sys.argv[1:]]) if sys.argv else "collops tune"
