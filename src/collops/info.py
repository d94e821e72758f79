"""``collops info``: what collops found on this machine, for a user and for a bug report.

Version; Python and numpy; the compiled runners (and why one is missing); the transports
(threads, shared memory, MPI with its library and thread level — mpi4py is imported only
here); the CPUs usable and the binding ``collops run -n N`` would use; the shared memory
``-n N`` takes (anonymous memory, not ``/dev/shm``) and whether the machine has it free;
the tuning file and the ``COLLOPS_*`` variables in force; the algorithms each transport
component adds. ``--json`` prints the same as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from typing import Any

import numpy

import collops

from . import config
from .algorithms import COLLECTIVES, algorithms
from .compiled import EXTENSIONS, runner_status
from .errors import TransportError
from .shm.kernel import cross_memory_attach_works
from .shm.segment import DEFAULT_PER_RANK, PAIR_RESERVE, Layout
from .transport.placement import BIND_POLICIES, plan_binding, usable_cpus

#: ranks the shared-memory figures are given for besides ``--nprocs``
SHM_EXAMPLES = (2, 8, 64)
#: MPI's thread levels, by their value
THREAD_LEVELS = ("single", "funneled", "serialized", "multiple")


def _info_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--nprocs", type=int, default=2,
                   help="ranks of the `collops run -n N` job to describe (default 2)")
    p.add_argument("--bind-to", choices=BIND_POLICIES, default="auto",
                   help="binding policy, as for `collops run` (default auto)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of text")


def cmd_info(args: argparse.Namespace) -> int:
    """Print what collops found here: build, transports, CPUs, shared memory, settings."""
    if args.nprocs < 1:
        print("collops info: --nprocs must be at least 1", file=sys.stderr)
        return 2
    report = collect(args.nprocs, args.bind_to)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


def collect(nprocs: int, bind_to: str = "auto") -> dict[str, Any]:
    """Everything ``collops info`` reports, as JSON-ready data."""
    cpus = usable_cpus()
    return {
        "version": collops.__version__,
        "python": {"version": platform.python_version(), "executable": sys.executable,
                   "implementation": platform.python_implementation()},
        "numpy": numpy.__version__,
        "platform": platform.platform(),
        "compiled": {"enabled": config.settings.compiled,
                     "runners": [vars(r) for r in runner_status()],
                     "extensions": [vars(r) for r in runner_status(EXTENSIONS)]},
        "transports": {"threads": {"available": True}, "shm": shm_transport(), "mpi": mpi()},
        "cpus": {"usable": cpus, "count": len(cpus)},
        "binding": {"nprocs": nprocs, "policy": bind_to,
                    "cpus": plan_binding(nprocs, bind_to, cpus, "info")},
        "shared_memory": {str(n): shared_memory(n) for n in sorted({nprocs, *SHM_EXAMPLES})},
        "settings": {"tuning_file": config.settings.tuning_file,
                     "environment": {k: v for k, v in sorted(os.environ.items())
                                     if k.startswith("COLLOPS_")}},
        "algorithms": transport_algorithms(),
    }


def shm_transport() -> dict[str, Any]:
    """Whether the shared-memory transport can run here, and with single copy; the memory
    its jobs take (``COLLOPS_SHM_PER_RANK``)."""
    usable = hasattr(os, "memfd_create")
    return {"available": usable, "memory": "anonymous memory",
            "reserve_bytes": PAIR_RESERVE,
            "per_rank_bytes": config.settings.shm_per_rank or DEFAULT_PER_RANK,
            "single_copy": usable and cross_memory_attach_works()}


def mpi() -> dict[str, Any]:
    """mpi4py, the MPI library it loaded and the thread level it obtained (or why not)."""
    try:
        import mpi4py
        from mpi4py import MPI
    except Exception as exc:  # noqa: BLE001 - any failure to load MPI is the answer
        return {"available": False, "error": f"{type(exc).__name__}: {exc}"}
    level = MPI.Query_thread()
    return {"available": True, "mpi4py": mpi4py.__version__,
            "library_version": MPI.Get_library_version().strip(),
            "standard": "{}.{}".format(*MPI.Get_version()),
            "thread_level": THREAD_LEVELS[level] if 0 <= level < 4 else str(level)}


def shared_memory(nprocs: int) -> dict[str, Any]:
    """The bytes a job of ``nprocs`` ranks takes, and whether the machine has them free (or
    why the per-rank budget cannot hold them)."""
    try:
        needed: int | None = Layout.for_ranks(nprocs).total_bytes
        error = None
    except TransportError as exc:
        needed, error = None, str(exc)
    free = memory_available()
    return {"needed_bytes": needed, "available_bytes": free, "error": error,
            "fits": needed is not None and free is not None and needed <= free}


def memory_available() -> int | None:
    """The memory the kernel says is available for new allocations (MemAvailable), or
    None when it does not say."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def transport_algorithms() -> dict[str, dict[str, list[str]]]:
    """For each transport component, its algorithms and the collectives each runs."""
    found: dict[str, dict[str, list[str]]] = {}
    for collective in COLLECTIVES:
        for a in algorithms(collective):
            for transport in a.transports:
                found.setdefault(transport, {}).setdefault(a.name, []).append(collective)
    return found


def _mib(n: int | None) -> str:
    return "unknown" if n is None else f"{n / (1 << 20):,.1f} MiB"


def render(report: dict[str, Any]) -> str:
    """The report as text, one fact a line."""
    py = report["python"]
    lines = [f"collops {report['version']}",
             f"python {py['version']} ({py['executable']}), numpy {report['numpy']}",
             f"platform {report['platform']}", "", "compiled runners"
             + ("" if report["compiled"]["enabled"] else " (unused: COLLOPS_COMPILED=0)")]
    for r in report["compiled"]["runners"]:
        lines.append(f"  {r['module']}: " + ("present" if r["present"]
                                              else f"MISSING ({r['error']})"))
    lines.append("other compiled extensions (each has a Python twin or an optional role)")
    for r in report["compiled"]["extensions"]:
        lines.append(f"  {r['module']}: " + ("present" if r["present"]
                                              else f"not built ({r['error']})"))
    shm, mpi_info = report["transports"]["shm"], report["transports"]["mpi"]
    lines += ["", "transports", "  threads: available",
              f"  shm: {'available' if shm['available'] else 'unavailable'} ({shm['memory']}"
              f", single copy {'yes' if shm['single_copy'] else 'no'})"]
    if mpi_info["available"]:
        library = " ".join(mpi_info["library_version"].splitlines()[0].split())
        lines.append(f"  mpi: available (mpi4py {mpi_info['mpi4py']}, {library}, MPI "
                     f"{mpi_info['standard']}, thread level {mpi_info['thread_level']})")
    else:
        lines.append(f"  mpi: unavailable ({mpi_info['error']})")
    binding = report["binding"]
    plan = ", ".join("-" if c is None else str(c) for c in binding["cpus"])
    lines += ["", f"cpus usable: {report['cpus']['count']} ({report['cpus']['usable']})",
              f"binding of `collops run -n {binding['nprocs']} --bind-to {binding['policy']}`"
              f": {plan}  (- = left to the kernel)", "",
              f"shared memory per job (at most {_mib(shm['reserve_bytes'])} + "
              f"{_mib(shm['per_rank_bytes'])} a rank: COLLOPS_SHM_PER_RANK)"]
    for n, s in report["shared_memory"].items():
        if s["error"]:
            lines.append(f"  -n {n}: {s['error']}")
            continue
        verdict = "fits" if s["fits"] else "does NOT fit"
        lines.append(f"  -n {n}: {_mib(s['needed_bytes'])}; {_mib(s['available_bytes'])} of "
                     f"memory available: {verdict}")
    env = report["settings"]["environment"]
    lines += ["", f"tuning file: {report['settings']['tuning_file'] or 'none'}",
              "COLLOPS_* variables: " + (", ".join(f"{k}={v}" for k, v in env.items())
                                         or "none")]
    lines += ["", "algorithms added by transport components"]
    for transport, names in report["algorithms"].items():
        lines.append(f"  {transport}:")
        lines += [f"    {name}: {', '.join(cs)}" for name, cs in names.items()]
    return "\n".join(lines)


COMMAND = ("info", _info_args, cmd_info)
