"""The ``collops`` command: ``algorithms``, ``demo``, ``run``, ``bench``, ``sim``, ``model``,
``info``, ``check``, ``show``, ``msccl``, ``tune``, ``faults``; ``--plugin`` on each loads
users' algorithms."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from .algorithms import COLLECTIVES, Algorithm, algorithms
from .errors import PluginError
from .plugins import export_to_ranks, load_plugins

Command = Callable[[argparse.Namespace], int]
_COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Command]] = {}


def command(name: str, setup: Callable[[argparse.ArgumentParser], None]) -> Callable[[Command],
                                                                                        Command]:
    """Register a subcommand: ``setup`` adds its arguments, the function runs it."""
    def decorate(fn: Command) -> Command:
        _COMMANDS[name] = (setup, fn)
        return fn
    return decorate


def _algorithms_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("collective", nargs="?", choices=COLLECTIVES, help="only this collective")
    p.add_argument("--markdown", action="store_true", help="a Markdown table (docs/algorithms.md)")


@command("algorithms", _algorithms_args)
def cmd_algorithms(args: argparse.Namespace) -> int:
    """Print the registry as a table."""
    if args.markdown:
        print(algorithms_markdown(args.collective), end="")
    else:
        print(algorithms_table(args.collective))
    return 0


def _restrictions_text(a: Algorithm) -> str:
    parts = [r.description for r in a.restrictions]
    if a.needs:
        parts.append("needs " + ", ".join(sorted(a.needs)))
    if a.resources:
        parts.append("best with " + ", ".join(sorted(a.resources)))
    return "; ".join(parts)


def _transports_text(a: Algorithm) -> str:
    """The transports that run ``a`` ("any" for a schedule)."""
    return ", ".join(a.transports) if a.transports else "any"


def _origin_text(a: Algorithm) -> str:
    """`` (plug-in FILE)`` for a user's algorithm, nothing for collops' own."""
    if not a.origin:
        return ""
    here = os.getcwd()
    shown = os.path.relpath(a.origin, here) if a.origin.startswith(here + os.sep) else a.origin
    return f" (plug-in {shown})"


def algorithms_markdown(collective: str | None = None) -> str:
    """The registry as the Markdown page docs/algorithms.md (generated, never edited by hand)."""
    lines = ["# Algorithms", "",
             "Generated from the registry by `collops algorithms --markdown`; a test checks that",
             "this page matches it. Force one with `algorithm=\"name\"` on any call.", "",
             "An algorithm for *any* transport is a schedule; one for a named transport is that",
             "transport component's own (`collops.shm`, `collops.mpi`): not a schedule, so absent",
             "from the simulator and the cost tables, and offered only where the transport has",
             "the resources it needs.", ""]
    for c in [collective] if collective else COLLECTIVES:
        lines += [f"## {c}", "",
                  "| algorithm | transports | description | restrictions | parameters |",
                  "|---|---|---|---|---|"]
        for a in algorithms(c):
            params = ", ".join(f"`{p.name}`={p.default} ({p.description})" for p in a.params)
            lines.append(f"| `{a.name}` | {_transports_text(a)} | {a.description}"
                         f"{_origin_text(a)} | "
                         f"{_restrictions_text(a) or '—'} | {params or '—'} |")
        lines.append("")
    return "\n".join(lines + _native_summary(collective))


def _native_summary(collective: str | None) -> list[str]:
    """One line per transport component's algorithm: its transports, collectives and the
    module that documents it."""
    natives: dict[str, list[Algorithm]] = {}
    for c in [collective] if collective else COLLECTIVES:
        for a in algorithms(c):
            if a.native is not None:
                natives.setdefault(a.name, []).append(a)
    if not natives:
        return []
    lines = ["## The transport components' own algorithms", ""]
    for name, records in natives.items():
        first = records[0]
        module = getattr(first.native.start, "__module__", "") if first.native else ""
        lines.append(f"* `{name}` ({_transports_text(first)}; described in `{module}`) — "
                     + ", ".join(a.collective for a in records))
    return lines + [""]


def algorithms_table(collective: str | None = None) -> str:
    """The registry as a text table (one row per algorithm)."""
    rows = [("collective", "algorithm", "transports", "restrictions", "parameters",
             "description")]
    for c in [collective] if collective else COLLECTIVES:
        for a in algorithms(c):
            restr = ", ".join(r.name for r in a.restrictions)
            if a.needs:
                restr = ", ".join(filter(None, [restr, "needs " + "+".join(sorted(a.needs))]))
            if a.resources:
                restr = ", ".join(filter(None, [restr, "wants " + "+".join(sorted(a.resources))]))
            params = ", ".join(f"{p.name}={p.default}" for p in a.params)
            rows.append((c, a.name, _transports_text(a), restr or "-", params or "-",
                         a.description + _origin_text(a)))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = []
    for i, r in enumerate(rows):
        lines.append("  ".join(r[j].ljust(widths[j]) for j in range(5)) + "  " + r[5])
        if i == 0:
            lines.append("  ".join("-" * w for w in widths) + "  " + "-" * 11)
    return "\n".join(lines)


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--nprocs", type=int, default=4, help="ranks (default 4)")
    p.add_argument("--transport", default="inproc", choices=["inproc", "shm"])
    p.add_argument("--count", type=int, default=1000, help="elements per rank")
    p.add_argument("--section", default="all", choices=["all", "collectives", "endpoints"],
                   help="which part to run (default all)")


@command("demo", _demo_args)
def cmd_demo(args: argparse.Namespace) -> int:
    """Every collective verified against numpy; then endpoints, geometries and affinity."""
    status = 0
    if args.section in ("all", "collectives"):
        from .demo import run_demo
        status = run_demo(args.nprocs, args.transport, args.count)
    if args.section in ("all", "endpoints"):
        from .endpoints_demo import run_endpoints_demo
        if args.section == "all":
            print()
        status = status or run_endpoints_demo()
    return status


PLUGIN_HELP = ("a Python file or module of your own algorithms (collops.algorithm); "
               "repeatable; the ranks a launcher starts load it too")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``collops`` console script."""
    _load_optional_commands()
    parser = argparse.ArgumentParser(prog="collops", description=__doc__)
    from . import __version__
    parser.add_argument("--version", action="version", version=f"collops {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (setup, fn) in _COMMANDS.items():
        p = sub.add_parser(name, help=(fn.__doc__ or "").strip().splitlines()[0])
        p.add_argument("--plugin", action="append", default=[], metavar="FILE.py|MODULE",
                       help=PLUGIN_HELP)
        setup(p)
    args = parser.parse_args(argv)
    try:  # before the command reads the registry; the ranks it starts load them too
        load_plugins(args.plugin)
    except PluginError as exc:
        print(f"collops: error: {exc}", file=sys.stderr)
        return 2
    export_to_ranks(args.plugin)
    return _COMMANDS[args.command][1](args)


def _load_optional_commands() -> None:
    """Add the subcommands of the packages' front ends (each module's ``COMMAND``)."""
    import importlib
    for module in ("collops.runtime.launcher_cli", "collops.bench.cli", "collops.sim.cli",
                   "collops.model_command", "collops.info", "collops.check.cli",
                   "collops.show.cli", "collops.msccl.cli",
                   "collops.tune.cli", "collops.faults.cli"):
        try:
            front_end = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module and not module.startswith(str(exc.name)):
                raise
            continue
        name, setup, run = front_end.COMMAND
        command(name, setup)(run)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
