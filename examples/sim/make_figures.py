"""Regenerate the golden outputs (examples/sim/*.json, *.txt) and the pictures (docs/img/*.png)
of docs/simulation.md by running the documented ``collops`` commands in-process.

    .venv/bin/python examples/sim/make_figures.py            # everything
    .venv/bin/python examples/sim/make_figures.py --golden   # only the JSON/text outputs
    .venv/bin/python examples/sim/make_figures.py --figures  # only the pictures

``GOLDEN`` maps a name to the arguments of one command; its JSON records go to
``examples/sim/<name>.json`` (``--json`` is appended here) and what it prints to
``<name>.txt``. tests/sim/test_golden.py re-runs the same commands and compares the JSON.
``FIGURES`` are the commands that draw the pictures (some on larger instances).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
IMG = ROOT / "docs" / "img"

ORDER = ("random_chunked:chunk=16384,random_chunked:chunk=4096,linear:rank_order=1,"
         "linear,pairwise")

GOLDEN: dict[str, list[str]] = {
    # seed 000, random vs rank order: alltoallv on the torus and on a binary tree
    "alltoallv_torus": ["sim", "--topology", "torus:8x8x8", "--size", "16K",
                        "--compare", ORDER, "--hotspots"],
    "alltoallv_tree": ["sim", "--topology", "tree:2:64", "--size", "16K",
                       "--compare", ORDER, "--hotspots"],
    # ... across chunk sizes in the packet-level model
    "alltoallv_torus_packet": ["sim", "--model", "packet", "--topology", "torus:4x4x4",
                               "--size", "4K", "--compare",
                               "random_chunked:chunk=512,random_chunked:chunk=1024,"
                               "random_chunked:chunk=4096,linear:rank_order=1,linear"],
    "alltoallv_tree_packet": ["sim", "--model", "packet", "--topology", "tree:2:16",
                              "--size", "16K", "--compare",
                              "random_chunked:chunk=1024,random_chunked:chunk=4096,"
                              "random_chunked:chunk=16384,linear:rank_order=1,linear"],
    # seed 000, allgather through alltoallv
    "allgather_torus": ["sim", "--collective", "allgather", "--topology", "torus:8x8x8",
                        "--size", "16K", "--compare", "alltoallv:chunk=16384,ring,bruck,"
                        "recursive_doubling"],
    # seed 000, routing around an excluded node
    "exclude_none": ["sim", "--collective", "alltoall", "--algorithm", "pairwise",
                     "--topology", "torus:4x4x4", "--size", "4K"],
    "exclude_21": ["sim", "--collective", "alltoall", "--algorithm", "pairwise",
                   "--topology", "torus:4x4x4", "--size", "4K", "--exclude", "21"],
    # seed 002, gather by OR on a combining tree vs binomial gather on the torus
    "gather_combining_tree": ["sim", "--collective", "gather", "--topology",
                              "combining-tree:2:64", "--sizes", "64,1K,16K",
                              "--compare", "or_combine,binomial,linear"],
    "gather_torus": ["sim", "--collective", "gather", "--topology", "torus:4x4x4",
                     "--sizes", "64,1K,16K", "--compare", "binomial,linear"],
    # reductions on a combining tree: the named algorithms' schedules, and --in-network
    "allreduce_combining_tree": ["sim", "--collective", "allreduce", "--topology",
                                 "combining-tree:2:64", "--sizes", "64,16K", "--compare",
                                 "recursive_doubling,ring", "--in-network"],
    # seed 004, closed forms against the simulators
    "seed004_ring": ["sim", "--collective", "allgather", "--algorithm", "ring",
                     "--topology", "ring:16", "--sizes", "1K,64K", "--gamma", "0"],
    "seed004_hypercube": ["sim", "--collective", "allgather", "--algorithm",
                          "recursive_doubling", "--topology", "hypercube:4",
                          "--sizes", "1K,64K", "--gamma", "0"],
    "seed004_pairwise_packet": ["sim", "--collective", "alltoall", "--algorithm", "pairwise",
                                "--topology", "hypercube:4", "--model", "packet",
                                "--sizes", "1K,64K", "--gamma", "0"],
    "seed004_torus_alltoall": ["sim", "--collective", "alltoall", "--topology", "torus:8x8",
                               "--size", "4K", "--compare", "pairwise,linear,bruck",
                               "--gamma", "0"],
    "seed004_torus_allgather": ["sim", "--collective", "allgather", "--topology", "torus:8x8",
                                "--size", "4K", "--compare", "ring,bruck,recursive_doubling",
                                "--gamma", "0"],
    "model_torus": ["model", "--topology", "torus:8x8", "--size", "4K",
                    "--collective", "alltoall"],
    "model_cluster": ["model", "--topology", "switch:16", "--sizes", "1K,64K,1M",
                      "--net", "bandwidth=12.5e6,packet_size=1500,header_bytes=78,overhead=5e-5",
                      "--ts1", "1e-8"],
    "model_loggp": ["model", "--topology", "hypercube:4", "--sizes", "1K,64K", "--loggp"],
}

FIGURES: dict[str, list[str]] = {
    "alltoallv-torus-hotspots.png": GOLDEN["alltoallv_torus"][:-1] + [
        "--plot-kind", "hotspots"],
    "alltoallv-tree-hotspots.png": GOLDEN["alltoallv_tree"][:-1] + ["--plot-kind", "hotspots"],
    "alltoallv-torus-sizes.png": [
        "sim", "--topology", "torus:8x8x8", "--sizes", "1K,4K,16K",
        "--compare", "random_chunked,linear:rank_order=1,linear,pairwise"],
    "alltoallv-tree-packet-sizes.png": [
        "sim", "--model", "packet", "--topology", "tree:2:16", "--sizes", "1K,4K,16K",
        "--compare", "random_chunked:chunk=1024,random_chunked:chunk=4096,"
        "linear:rank_order=1,linear"],
    "exclude-heatmap.png": GOLDEN["exclude_21"] + ["--plot-kind", "heatmap",
                                                   "--plane-axis", "0"],
    "gather-combining-tree.png": GOLDEN["gather_combining_tree"],
    "alltoall-flow-hotspots.png": [
        "sim", "--collective", "alltoall", "--model", "flow", "--topology", "torus:4x4x4",
        "--net", "tie_break=simgrid", "--placement", "column-major", "--window", "1",
        "--size", "64K", "--gamma", "0", "--algorithm", "linear:order=shift",
        "--compare", "linear:order=random,linear:order=plain", "--plot-kind", "hotspots"],
}


def run(argv: list[str]) -> tuple[int, str]:
    """Run one ``collops`` command in-process; its exit status and what it printed."""
    from collops.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(argv)
    return status, out.getvalue()


def golden_argv(name: str) -> list[str]:
    """The command of golden output ``name`` with its ``--json`` file (under examples/sim)."""
    return GOLDEN[name] + ["--json", str(HERE / f"{name}.json")]


def command_line(argv: list[str]) -> str:
    """The shell form of a command, as docs/simulation.md shows it."""
    import shlex
    return "collops " + " ".join(shlex.quote(a) for a in argv)


def make_golden() -> None:
    """Write examples/sim/<name>.json and <name>.txt for every golden command."""
    for name in GOLDEN:
        start = time.monotonic()
        status, text = run(golden_argv(name))
        if status:
            sys.exit(f"{name}: exit status {status}")
        shown = "$ " + command_line(GOLDEN[name]) + "\n" + text
        (HERE / f"{name}.txt").write_text(shown)
        print(f"{name}: {time.monotonic() - start:.1f} s", file=sys.stderr)


def make_figures() -> None:
    """Write every picture of docs/simulation.md under docs/img."""
    IMG.mkdir(parents=True, exist_ok=True)
    for file, argv in FIGURES.items():
        start = time.monotonic()
        status, _ = run(argv + ["--plot", str(IMG / file)])
        if status:
            sys.exit(f"{file}: exit status {status}")
        print(f"{file}: {time.monotonic() - start:.1f} s", file=sys.stderr)


def main() -> None:
    """Regenerate what the options ask for (everything by default)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden", action="store_true", help="only the golden outputs")
    parser.add_argument("--figures", action="store_true", help="only the pictures")
    args = parser.parse_args()
    both = not (args.golden or args.figures)
    if args.golden or both:
        make_golden()
    if args.figures or both:
        make_figures()


if __name__ == "__main__":
    main()
