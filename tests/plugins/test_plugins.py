"""Users' algorithms: the public decorator, loading plug-ins (file, module, COLLOPS_PLUGINS,
entry points), and the algorithm taking part everywhere a built-in one does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import collops

FILES = Path(__file__).parent / "files"
RING = FILES / "user_ring.py"


def _collops(*args: str, env: dict[str, str] | None = None,
             cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "collops", *args], capture_output=True,
                          text=True, timeout=240, env={**os.environ, **(env or {})}, cwd=cwd)


@pytest.mark.timeout(200)
def test_a_plugin_algorithm_runs_on_threads_and_is_offered_by_geometries() -> None:
    """In a process of its own, so the registry of this one keeps only collops' algorithms."""
    done = subprocess.run([sys.executable, str(FILES / "in_process.py"), str(RING)],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


@pytest.mark.timeout(240)
def test_a_plugin_algorithm_runs_on_shared_memory_ranks_against_numpy() -> None:
    done = _collops("run", "-n", "3", "--timeout", "120", "--plugin", str(RING),
                    str(FILES / "ring_rank.py"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(done.stdout.split("\n"))[-3:] == ["rank 0 ok", "rank 1 ok", "rank 2 ok"]


@pytest.mark.timeout(240)
def test_the_algorithms_listing_and_the_checker_see_a_plugin() -> None:
    listed = _collops("algorithms", "allgather", "--plugin", str(RING))
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if "user_ring" in line)
    assert "user_ring.py" in row
    checked = _collops("check", "--plugin", str(RING), "--collective", "allgather",
                       "--algorithm", "user_ring", "--nprocs", "1-9", "--sizes", "0,1,6")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("ok    allgather.user_ring:")


@pytest.mark.timeout(240)
def test_a_plugin_algorithm_simulates_on_a_torus() -> None:
    sim = _collops("sim", "--plugin", str(RING), "--collective", "allgather", "--algorithm",
                   "user_ring", "--compare", "ring", "--topology", "torus:2x2x2", "--size", "4K")
    assert sim.returncode == 0, sim.stderr[-3000:]
    assert "user_ring" in sim.stdout and "ring" in sim.stdout


@pytest.mark.timeout(120)
def test_explain_and_a_tuning_file_name_a_plugin_algorithm(tmp_path: Path) -> None:
    table = tmp_path / "tuning.toml"
    table.write_text('[[allgather.rule]]\nalgorithm = "user_ring"\nsource = "a test"\n')
    script = (f"import collops, numpy as np\ncollops.load_plugin({str(RING)!r})\n"
              "def body(comm):\n"
              "    got = comm.allgather(np.array([comm.rank]))\n"
              "    text = comm.explain('allgather', np.zeros(1))\n"
              "    return comm.last_algorithm, got.tolist(), text\n"
              "for name, got, text in collops.spawn(body, 2):\n"
              "    assert name == 'user_ring' and got == [0, 1], (name, got)\n"
              "    assert 'user_ring' in text, text\n"
              "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=100, env={**os.environ, "COLLOPS_TUNING_FILE": str(table)})
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


@pytest.mark.timeout(120)
def test_collops_plugins_loads_files_and_modules_in_every_process(tmp_path: Path) -> None:
    (tmp_path / "my_algos.py").write_text(RING.read_text().replace('"user_ring"', '"mod_ring"'))
    env = {"COLLOPS_PLUGINS": f"{RING},my_algos", "PYTHONPATH": str(tmp_path)}
    code = ("import collops\nnames = [a.name for a in collops.algorithms('allgather')]\n"
            "print('user_ring' in names, 'mod_ring' in names)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=100, env={**os.environ, **env})
    assert done.stdout.split() == ["True", "True"], done.stderr[-2000:]


@pytest.mark.timeout(120)
def test_an_installed_package_declares_algorithms_by_entry_point(tmp_path: Path) -> None:
    (tmp_path / "ep_algos.py").write_text(RING.read_text().replace('"user_ring"', '"ep_ring"'))
    info = tmp_path / "ep_algos-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-algos\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[collops.algorithms]\nring = ep_algos\n")
    code = "import collops\nprint('ep_ring' in [a.name for a in collops.algorithms('allgather')])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=100, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert done.stdout.strip() == "True", done.stderr[-2000:]


@pytest.mark.timeout(120)
def test_a_plugin_that_fails_to_import_is_an_error_naming_its_file_and_line() -> None:
    done = _collops("algorithms", "--plugin", str(FILES / "fails_on_import.py"))
    assert done.returncode == 2
    assert f"{FILES / 'fails_on_import.py'}, line 5" in done.stderr
    assert "allgatherx" in done.stderr and "Traceback" not in done.stderr
    missing = _collops("algorithms", "--plugin", "no_such_module_anywhere")
    assert missing.returncode == 2 and "no_such_module_anywhere" in missing.stderr


@pytest.mark.parametrize("kwargs, argument", [
    ({"collectives": "allgatherx"}, "collectives"),
    ({"name": "ring"}, "name"),
    ({"name": "has space"}, "name"),
    ({"description": ""}, "description"),
    ({"params": ["k"]}, "params"),
])
def test_the_decorator_names_what_is_wrong(kwargs: dict, argument: str) -> None:
    given = {"collectives": "allgather", "name": "fine_name", "description": "d", **kwargs}
    with pytest.raises(collops.ArgumentError) as info:
        collops.algorithm(given.pop("collectives"), given.pop("name"), given.pop("description"),
                          **given)(lambda rank, spec, params: None)
    assert info.value.argument == argument


def test_a_builder_of_the_wrong_shape_is_refused() -> None:
    with pytest.raises(collops.ArgumentError, match=r"must take \(rank, spec, params\)"):
        collops.algorithm("allgather", "two_args", "d")(lambda rank, spec: None)
