"""The ``collops`` command: ``algorithms``, ``demo``, ``run``, ``bench``, ``sim``, ``model``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from .algorithms import COLLECTIVES, Algorithm, algorithms

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


def algorithms_markdown(collective: str | None = None) -> str:
    """The registry as the Markdown page docs/algorithms.md (generated, never edited by hand)."""
    lines = ["# Algorithms", "",
             "Generated from the registry by `collops algorithms --markdown`; a test checks that",
             "this page matches it. Force one with `algorithm=\"name\"` on any call.", ""]
    for c in [collective] if collective else COLLECTIVES:
        lines += [f"## {c}", "", "| algorithm | description | restrictions | parameters |",
                  "|---|---|---|---|"]
        for a in algorithms(c):
            if a.needs:
                continue  # offered by one transport only: listed once, below
            params = ", ".join(f"`{p.name}`={p.default} ({p.description})" for p in a.params)
            lines.append(f"| `{a.name}` | {a.description} | {_restrictions_text(a) or '—'} | "
                         f"{params or '—'} |")
        lines.append("")
    lines += [
        "## Offered by one transport", "",
        "Not schedules, so registered (by `collops.runtime.native`) once a communicator over "
        "the transport that runs them exists, and "
        "absent from the simulator and the cost tables:", "",
        "* `shm_direct` (shared-memory transport, the `collops run` default) — barrier, bcast, "
        "scatter, gather, allgather, alltoall, reduce, allreduce, reduce_scatter_block, scan, "
        "exscan whose per-rank part fits a 64 KiB slot: each rank copies its contribution "
        "into its slot of the communicator's shared area once and reads the others' slots "
        "directly, no messages. Chosen automatically where its cost (half an α plus the "
        "bytes read and folded) is lowest: always for small calls, up to 64 KiB where it "
        "beats the schedules.",
        "* `shm_cma` (shared-memory transport, where cross-memory attach is permitted) — "
        "bcast, scatter, gather, allgather, alltoall, reduce, allreduce, "
        "reduce_scatter_block: each rank publishes the addresses of its buffers in its slot "
        "and the ranks that need its data copy it out of its process with "
        "`process_vm_readv` (allreduce: a reduce-scatter into the receive buffers, then an "
        "allgather out of them). One synchronisation instead of log p or p − 1 message "
        "rounds; chosen by cost for large calls.",
        "* `shm_stream` (shared-memory transport, the first 4 communicator contexts, at most "
        "64 ranks) — bcast, scatter, gather, allgather, alltoall, reduce, "
        "reduce_scatter_block, allreduce: each rank streams "
        "its contribution chunk by chunk into its own ring in the segment (8 chunks of 128 "
        "KiB) while it copies the chunks it needs out of the rings of the ranks it reads, in "
        "C (`collops.shm._stream`, or the same protocol in Python); a reduce is a "
        "gather into the root's scratch, folded there in rank order, a reduce_scatter_block "
        "an alltoall into every rank's scratch, each folding its block, an allreduce that "
        "and an allgather of the blocks (a reduce and a bcast when the count does not "
        "divide). Per-chunk headers "
        "carry the call's number and fingerprint and the mask of the ranks that must read the "
        "chunk; each reader counts the chunks it has drained, and a writer reuses a slot once "
        "the readers of the chunk in it have drained it. Chosen by cost for calls beyond a "
        "direct slot where it measured faster than the schedules and `shm_cma`: at any size "
        "with more ranks than cores, up to a few MiB on 2 ranks.",
        "* `mpi_native` (MPI transport) — every collective: the MPI library's own, after a "
        "16-byte agreement on the call's fingerprint (`check=0` skips it).", ""]
    return "\n".join(lines)


def algorithms_table(collective: str | None = None) -> str:
    """The registry as a text table (one row per algorithm)."""
    rows = [("collective", "algorithm", "restrictions", "parameters", "description")]
    for c in [collective] if collective else COLLECTIVES:
        for a in algorithms(c):
            restr = ", ".join(r.name for r in a.restrictions)
            if a.needs:
                restr = ", ".join(filter(None, [restr, "needs " + "+".join(sorted(a.needs))]))
            if a.resources:
                restr = ", ".join(filter(None, [restr, "wants " + "+".join(sorted(a.resources))]))
            params = ", ".join(f"{p.name}={p.default}" for p in a.params)
            rows.append((c, a.name, restr or "-", params or "-", a.description))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = []
    for i, r in enumerate(rows):
        lines.append("  ".join(r[j].ljust(widths[j]) for j in range(4)) + "  " + r[4])
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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``collops`` console script."""
    _load_optional_commands()
    parser = argparse.ArgumentParser(prog="collops", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (setup, fn) in _COMMANDS.items():
        p = sub.add_parser(name, help=(fn.__doc__ or "").strip().splitlines()[0])
        setup(p)
    args = parser.parse_args(argv)
    return _COMMANDS[args.command][1](args)


def _load_optional_commands() -> None:
    import importlib
    for module in ("collops.runtime.launcher_cli", "collops.bench.cli", "collops.sim.cli",
                   "collops.model.cli"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module and not module.startswith(str(exc.name)):
                raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
