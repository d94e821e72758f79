"""``collops run``: start a program on N ranks over shared memory, like ``mpiexec``."""

from __future__ import annotations

import argparse
import os
import re
import sys

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
    p.add_argument("--mpi4py", action="store_true",
                   help="make `import mpi4py` / `from mpi4py import MPI` in the ranks give "
                   "collops.MPI, so an unmodified mpi4py program runs on collops")
    p.add_argument("program", help="the Python program to run (or `python prog.py`, "
                   "`python -m module`)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")


def cmd_run(args: argparse.Namespace) -> int:
    """Run a program on N processes; each gets its world from collops.init()."""
    from .launcher import launch_program
    if args.nprocs < 1:
        print("collops run: -n must be at least 1", file=sys.stderr)
        return 2
    arguments = python_arguments([args.program, *args.args])
    if not arguments[0].startswith("-") and not os.path.isfile(arguments[0]):
        # said once, before any rank starts, rather than by every rank's interpreter
        print(f"collops run: no such program file: {arguments[0]!r}", file=sys.stderr)
        return 2
    return launch_program(args.nprocs, arguments,
                          timeout=args.timeout, tag_output=args.tag_output,
                          bind_to=args.bind_to,
                          environment=mpi4py_environment() if args.mpi4py else None)


#: a command naming a Python interpreter (``python``, ``python3.12``, a path to one)
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")


def python_arguments(command: list[str]) -> list[str]:
    """The interpreter's arguments for ``command``: ``prog.py args`` as it is, and ``python
    prog.py`` / ``python -m module`` without the interpreter (the ranks run the launcher's
    own, where collops is installed)."""
    first = command[0]
    if first == sys.executable or _PYTHON.match(os.path.basename(first)):
        return command[1:] or ["-c", ""]
    return command


#: the directory holding the ``mpi4py`` package that is ``collops.MPI`` (`collops.facade`)
SHIM_PATH = os.path.join(os.path.dirname(__file__), "mpi4py_shim")
#: set in the ranks by ``--mpi4py``: there ``import mpi4py`` is the facade
SHIM_VARIABLE = "COLLOPS_MPI4PY_SHIM"


def mpi4py_environment() -> dict[str, str]:
    """The ranks' environment additions for ``--mpi4py``: the ``mpi4py`` shim first on
    their path, and the variable saying it is there."""
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": SHIM_PATH + (os.pathsep + path if path else ""), SHIM_VARIABLE: "1"}


#: the subcommand this module adds to ``collops``: name, argument set-up, handler
COMMAND = ("run", _run_args, cmd_run)
