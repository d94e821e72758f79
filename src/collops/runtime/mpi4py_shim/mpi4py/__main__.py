"""``python -m mpi4py prog.py [args]`` / ``-m module`` / ``-c code``: run it (mpi4py's form)."""

import runpy
import sys


def main() -> None:
    """Run the program named on the command line as ``__main__``."""
    args = sys.argv[1:]
    if not args:
        sys.exit("usage: python -m mpi4py <program.py> | -m <module> | -c <code> [args]")
    if args[0] == "-m" and len(args) > 1:
        sys.argv = args[1:]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    elif args[0] == "-c" and len(args) > 1:
        sys.argv = ["-c", *args[2:]]
        exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__"})
    else:
        sys.argv = args
        runpy.run_path(args[0], run_name="__main__")


main()
