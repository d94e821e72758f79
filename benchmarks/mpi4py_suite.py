"""mpi4py's own test files run against ``collops.MPI`` (``collops run --mpi4py``).

Usage: .venv/bin/python benchmarks/mpi4py_suite.py [--nprocs 2] [--dir /tmp/mpi4py-suite]
           [--files test_cco_buf,test_p2p_obj] [--timeout 600] [--details]

Downloads the sdist of the installed mpi4py version (``pip download mpi4py==V --no-binary
:all: --no-deps``) into ``--dir`` unless it is there, runs each test file as
``collops run -n N --mpi4py python -m unittest -v <file>`` in its ``test/`` directory, and
prints per file the tests passed, failed, in error and skipped (rank 0's report; a job that
fails on another rank counts as failed), and with ``--details`` the failing tests and the last
line of their reasons. The test files are never copied into collops.

mpi4py's tests loop over array backends, two of which are "fake GPU" arrays (host memory
behind ``__cuda_array_interface__``). collops has no device buffers and refuses them by name,
so by default they are left out of the loop (`SKIP_DEVICE`, applied when the tests are
loaded); ``--with-device-buffers`` runs the files exactly as shipped.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path

#: the files of the areas the facade covers: collectives, point-to-point, communicators,
#: groups, requests, status (and the operators and datatypes they use)
FILES = ["test_cco_buf", "test_cco_nb_buf", "test_cco_pr_buf", "test_cco_vec",
         "test_cco_nb_vec", "test_cco_pr_vec", "test_cco_obj", "test_p2p_buf",
         "test_p2p_obj", "test_p2p_buf_matched", "test_p2p_obj_matched", "test_comm",
         "test_group", "test_request", "test_grequest", "test_status", "test_op"]
_RESULT = re.compile(r"^\[0\] (test\w+) \(([\w.]+)\)(?:\n\[0\] .*)?.*\.\.\. (ok|FAIL|ERROR|"
                     r"skipped|expected failure|unexpected success)", re.M)
_LINE = re.compile(r"^\[0\] (test\w+) \(([\w.]+)\).*?\.\.\. ?(.*)$")


def test_directory(where: Path) -> Path:
    """The ``test/`` directory of the installed mpi4py's sdist, downloaded if missing."""
    version = importlib.metadata.version("mpi4py")
    root = where / f"mpi4py-{version}"
    if not (root / "test").is_dir():
        where.mkdir(parents=True, exist_ok=True)
        tarball = where / f"mpi4py-{version}.tar.gz"
        if not tarball.exists():
            subprocess.run([sys.executable, "-m", "pip", "download", f"mpi4py=={version}",
                            "--no-binary", ":all:", "--no-deps", "--no-build-isolation",
                            "-d", str(where)], check=True)
        with tarfile.open(tarball) as tar:
            tar.extractall(where, filter="data")
    return root / "test"


#: run before the tests load: the array backends without device (GPU) buffers
SKIP_DEVICE = ("import sys, unittest; sys.path.insert(0, '.'); import arrayimpl; "
               "arrayimpl.ArrayBackends[:] = [b for b in arrayimpl.ArrayBackends "
               "if 'GPU' not in b.__name__]; unittest.main(module=None, argv=sys.argv)")


def run_file(test_dir: Path, name: str, nprocs: int, timeout: float,
             device: bool = False) -> tuple[Counter, dict]:
    """Run one test file; the outcome counts and ``{failing test: reason}``."""
    runner = ["-m", "unittest"] if device else ["-c", SKIP_DEVICE]
    command = [sys.executable, "-m", "collops", "run", "-n", str(nprocs), "--tag-output",
               "--timeout", str(timeout), "--mpi4py", "python", *runner, "-v", name]
    proc = subprocess.run(command, cwd=test_dir, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout + 60)
    text = proc.stdout + proc.stderr
    counts: Counter = Counter()
    pending: dict[str, str] = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if match is None or not match.group(3):
            continue
        verdict = match.group(3).split()[0] if match.group(3).split() else ""
        verdict = {"ok": "passed", "FAIL": "failed", "ERROR": "error",
                   "skipped": "skipped", "expected": "skipped"}.get(verdict, "")
        if verdict:
            counts[verdict] += 1
            if verdict in ("failed", "error"):
                pending[f"{match.group(2)}"] = ""
    reasons = _reasons(text, pending)
    if proc.returncode != 0 and not (counts["failed"] or counts["error"]):
        counts["job failed"] += 1
        reasons["(job)"] = _last_error(text)
    return counts, reasons


def _reasons(text: str, failing: dict[str, str]) -> dict[str, str]:
    """Each failing test's last traceback line (rank 0's report)."""
    blocks = re.split(r"^\[0\] ={20,}$", text, flags=re.M)
    for block in blocks[1:]:
        head = re.search(r"^\[0\] (?:FAIL|ERROR): (test\w+) \(([\w.]+)\)", block, re.M)
        if head is None:
            continue
        lines = [line[4:] for line in block.splitlines() if line.startswith("[0] ")
                 and line[4:].strip() and not line[4:].startswith("-" * 20)]
        last = [line for line in lines if re.match(r"^\w[\w.]*(Error|Exception|Exit)", line)]
        failing[head.group(2)] = (last[-1] if last else lines[-1] if lines else "")[:160]
    return failing


def _last_error(text: str) -> str:
    lines = [line for line in text.splitlines() if re.search(r"(Error|Exception):", line)]
    return lines[-1][:160] if lines else text.strip().splitlines()[-1][:160] if text else ""


def main() -> None:
    """Run the files; print the table (and the reasons with --details)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nprocs", type=int, default=2)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/mpi4py-suite"))
    parser.add_argument("--files", default=",".join(FILES))
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--details", action="store_true")
    parser.add_argument("--with-device-buffers", action="store_true",
                        help="keep mpi4py's fake-GPU array backends (collops refuses them)")
    args = parser.parse_args()
    test_dir = test_directory(args.dir)
    print(f"| file ({args.nprocs} ranks) | passed | failed | errors | skipped |")
    print("|---|---|---|---|---|")
    details = {}
    for name in args.files.split(","):
        counts, reasons = run_file(test_dir, name, args.nprocs, args.timeout,
                                   args.with_device_buffers)
        failed = counts["failed"] + counts["job failed"]
        print(f"| {name} | {counts['passed']} | {failed} | {counts['error']} | "
              f"{counts['skipped']} |", flush=True)
        details[name] = reasons
    if args.details:
        for name, reasons in details.items():
            for test, reason in reasons.items():
                print(f"{name}: {test}: {reason}")


if __name__ == "__main__":
    main()
