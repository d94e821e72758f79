"""``collops msccl export`` and ``collops msccl import``: schedules as MSCCL-IR XML and back."""

from __future__ import annotations

import argparse
import sys

from ..algorithms.spec import COLLECTIVES
from ..errors import CollopsError
from .export import to_xml
from .load import import_file


def _msccl_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True)
    out = sub.add_parser("export", help="write an algorithm's schedule as MSCCL-IR XML")
    out.add_argument("--collective", required=True, choices=COLLECTIVES)
    out.add_argument("--algorithm", required=True)
    out.add_argument("-n", "--nprocs", type=int, required=True, help="ranks (MSCCL's ngpus)")
    out.add_argument("--count", type=int, default=None,
                     help="elements per block, one chunk each (default: as many as ranks)")
    out.add_argument("--root", type=int, default=0, help="root of a rooted collective")
    out.add_argument("--param", action="append", default=[], metavar="K=V")
    out.add_argument("--name", default=None, help="the <algo name=…> (default COLL_ALGORITHM)")
    out.add_argument("--ordered", action="store_true",
                     help="a reduction's schedule for non-commutative operators (rank order)")
    out.add_argument("-o", "--output", default=None, help="file to write (default stdout)")
    into = sub.add_parser("import", help="check an MSCCL-IR file as a collops algorithm")
    into.add_argument("file", help="the MSCCL-IR XML file")
    for parser in (out, into):
        parser.add_argument("--plugin", action="append", default=[], metavar="FILE.py|MODULE",
                            help="a plug-in of your own algorithms (repeatable)")


def cmd_msccl(args: argparse.Namespace) -> int:
    """Write a schedule as MSCCL-IR XML, or check an MSCCL-IR file as a collops algorithm."""
    try:
        if args.action == "export":
            if not 0 <= args.root < args.nprocs:
                raise CollopsError(f"collops msccl export: --root {args.root} is not a rank of "
                                   f"{args.nprocs}")
            params = dict(kv.split("=", 1) for kv in args.param)
            xml = to_xml(args.collective, args.algorithm, args.nprocs, args.count, args.root,
                         params, args.name, args.ordered)
            if args.output:
                with open(args.output, "w") as f:
                    f.write(xml)
                print(f"wrote {args.output} (MSCCL-IR, {args.nprocs} gpus)")
            else:
                sys.stdout.write(xml)
            return 0
        alg = import_file(args.file)
    except (CollopsError, ValueError) as exc:
        print(f"collops: error: {exc}", file=sys.stderr)
        return 2
    print(f"ok    {alg.collective}.{alg.name}: passes collops check; load it with "
          f"--plugin {args.file} (or COLLOPS_PLUGINS)")
    return 0


COMMAND = ("msccl", _msccl_args, cmd_msccl)
