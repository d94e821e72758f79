"""``collops run``: start a program on N ranks over shared memory, like ``mpiexec``."""

from __future__ import annotations

import argparse

from ..transport.placement import BIND_POLICIES


def positive_seconds(text: str) -> float:
    """``text`` as a positive number of seconds (argparse reports the error, naming the option)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text!r}")
    return seconds


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--nprocs", type=int, required=True, help="number of ranks")
    p.add_argument("--timeout", type=positive_seconds, default=None,
                   help="end the job after S seconds (S > 0)")
    p.add_argument("--tag-output", action="store_true",
                   help="prefix each output line with [rank] (lines are forwarded whole "
                   "either way)")
    p.add_argument("--bind-to", choices=BIND_POLICIES, default="auto",
                   help="pin rank r to the (r mod k)-th usable CPU: auto = only when ranks "
                   "outnumber CPUs (default), core = always, none = never")
    p.add_argument("program", help="the Python program to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")


def cmd_run(args: argparse.Namespace) -> int:
    """Run a program on N processes; each gets its world from collops.init()."""
    from .launcher import launch_program
    if args.nprocs < 1:
        print("collops run: -n must be at least 1")
        return 2
    return launch_program(args.nprocs, [args.program, *args.args], timeout=args.timeout,
                          tag_output=args.tag_output, bind_to=args.bind_to)


#: the subcommand this module adds to ``collops``: name, argument set-up, handler
COMMAND = ("run", _run_args, cmd_run)
