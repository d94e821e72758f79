"""The release artefacts: `python -m build` makes an sdist and, from it, a binary wheel that
carries both compiled runners; the wheel installs into a fresh environment where no compiler
can run and executes an 8-byte allreduce on the compiled path; the metadata is complete."""

from __future__ import annotations

import email.parser
import fcntl
import os
import re
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

import collops

ROOT = Path(__file__).resolve().parents[2]
#: every compiled extension setup.py names (a wheel without one runs slower), but
#: ``collops.mpi._native``, built only where an ``mpi.h`` is at hand (not in the isolated build)
RUNNERS = tuple(name.replace(".", "/") + "." for name in re.findall(
    r'Extension\("([\w.]+)"', (ROOT / "setup.py").read_text()) if name != "collops.mpi._native")


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The sdist and wheel built from this checkout (the wheel is built from the sdist), once
    per test session: pytest-xdist workers that run this module's tests at once share one
    build, under a lock (two builds at once write the same checkout's build files)."""
    if worker_id == "master":
        return _built(tmp_path_factory.mktemp("dist"))
    shared = tmp_path_factory.getbasetemp().parent / "dist"  # the session's, every worker's
    shared.mkdir(exist_ok=True)
    with open(shared / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not (shared / ".built").exists():
                _built(shared)
                (shared / ".built").touch()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return shared


def _built(out: Path) -> Path:
    """``out``, holding the sdist and the wheel `python -m build` made of this checkout."""
    done = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "COLLOPS_REQUIRE_COMPILED": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def _one(dist: Path, pattern: str) -> Path:
    found = sorted(dist.glob(pattern))
    assert len(found) == 1, found
    return found[0]


@pytest.mark.timeout(900)
def test_the_sdist_carries_the_c_sources_and_the_documents(dist: Path) -> None:
    with tarfile.open(_one(dist, "collops-*.tar.gz")) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    # every C source and header the build names (setup.py), and the documents
    sources = set(re.findall(r'"(src/collops/[\w/]+\.[ch])"', (ROOT / "setup.py").read_text()))
    on_disk = {str(c.relative_to(ROOT)) for c in (ROOT / "src/collops").rglob("*.c")}
    assert on_disk <= sources, f"C sources setup.py does not build: {on_disk - sources}"
    assert "collops/shm/_direct." in RUNNERS and "collops/sim/_flowsim." in RUNNERS
    for needed in (*sorted(sources), "src/collops/mpi/_native.pyi", "LICENSE", "CHANGELOG.md",
                   "README.md",
                   "setup.py", "pyproject.toml", "src/collops/algorithms/defaults.toml"):
        assert needed in names, needed


@pytest.mark.timeout(900)
def test_the_wheel_carries_both_runners_and_complete_metadata(dist: Path) -> None:
    wheel = _one(dist, "collops-*.whl")
    assert not wheel.name.endswith("-none-any.whl"), "a pure wheel would run the slow path"
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = email.parser.Parser().parsestr(zf.read(meta_name).decode())
    for runner in RUNNERS:
        assert any(n.startswith(runner) and n.endswith(".so") for n in names), runner
    assert "collops/algorithms/defaults.toml" in names and "collops/py.typed" in names
    assert meta["Version"] == collops.__version__
    assert meta["Requires-Python"] == ">=3.11"
    assert meta["License-Expression"] == "Apache-2.0"
    assert set(meta.get_all("Provides-Extra")) >= {"mpi", "plot", "test"}
    classifiers = meta.get_all("Classifier")
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert any(c.startswith("Development Status") for c in classifiers)
    assert meta["Summary"] and "numpy" in " ".join(meta.get_all("Requires-Dist"))


@pytest.mark.usefixtures("compiled_on")  # a test of the compiled route
@pytest.mark.timeout(900)
def test_the_wheel_runs_the_compiled_path_where_no_compiler_can_run(
        dist: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "env"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    no_compiler = {**os.environ, "CC": "false", "CXX": "false", "LDSHARED": "false"}
    no_compiler.pop("PYTHONPATH", None)
    install = subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--only-binary",
                              ":all:", str(_one(dist, "collops-*.whl"))],
                             capture_output=True, text=True, timeout=600, env=no_compiler)
    assert install.returncode == 0, install.stderr[-3000:]
    run = subprocess.run([str(env_dir / "bin" / "collops"), "run", "-n", "2", "--timeout", "60",
                          str(Path(__file__).with_name("wheel_rank.py"))],
                         capture_output=True, text=True, timeout=300, env=no_compiler,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.stdout.count(f"{collops.__version__} compiled ok") == 2, run.stdout
    version = subprocess.run([str(env_dir / "bin" / "collops"), "--version"],
                             capture_output=True, text=True, timeout=60, env=no_compiler)
    assert version.stdout.strip() == f"collops {collops.__version__}"


@pytest.mark.timeout(900)
def test_a_release_build_without_a_compiler_fails_instead_of_shipping_the_slow_path(
        dist: Path, tmp_path: Path) -> None:
    with tarfile.open(_one(dist, "collops-*.tar.gz")) as sdist:
        sdist.extractall(tmp_path / "src", filter="data")
    source = next((tmp_path / "src").iterdir())
    env = {**os.environ, "COLLOPS_REQUIRE_COMPILED": "1", "CC": "false", "LDSHARED": "false"}
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir",
                           str(tmp_path / "out"), str(source)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode != 0
    assert "COLLOPS_REQUIRE_COMPILED=1" in done.stdout + done.stderr
    assert not list((tmp_path / "out").glob("*.whl"))
