"""``collops info``: the JSON report's fields hold this machine's real facts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from collops.algorithms import all_algorithms
from collops.cli import main
from collops.shm.segment import Layout


@pytest.fixture(scope="module")
def report() -> dict:
    out = subprocess.run([sys.executable, "-m", "collops", "info", "--json", "-n", "3"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    return json.loads(out)


def test_versions_are_this_interpreter_and_numpy(report):
    import numpy

    import collops

    assert report["version"] == collops.__version__
    assert report["python"]["version"] == "{}.{}.{}".format(*sys.version_info[:3])
    assert report["numpy"] == numpy.__version__


def test_compiled_runners_are_present_in_this_build(report):
    runners = {r["module"]: r for r in report["compiled"]["runners"]}
    assert set(runners) == {"collops.shm._direct", "collops.shm._stream",
                            "collops.runtime._slots"}
    for runner in runners.values():
        assert runner["present"] and runner["error"] is None


def test_every_extension_setup_py_builds_is_reported(report):
    import re

    built = set(re.findall(r'Extension\("([\w.]+)"',
                           (Path(__file__).resolve().parents[1] / "setup.py").read_text()))
    listed = report["compiled"]["runners"] + report["compiled"]["extensions"]
    assert {r["module"] for r in listed} == built
    for r in report["compiled"]["extensions"]:  # this checkout builds them all (make test)
        assert r["present"], r


def test_transports_threads_shm_and_mpi(report):
    transports = report["transports"]
    assert transports["threads"]["available"] and transports["shm"]["available"]
    mpi = transports["mpi"]
    try:
        from mpi4py import MPI
    except ImportError:
        assert not mpi["available"] and "Error" in mpi["error"]
    else:
        assert mpi["available"] and mpi["library_version"] == MPI.Get_library_version().strip()
        assert mpi["thread_level"] in ("single", "funneled", "serialized", "multiple")


def test_cpus_are_the_affinity_and_the_binding_covers_every_rank(report):
    affinity = sorted(os.sched_getaffinity(0))
    assert report["cpus"]["usable"] == affinity and report["cpus"]["count"] == len(affinity)
    binding = report["binding"]
    assert binding["nprocs"] == 3 and len(binding["cpus"]) == 3
    assert all(cpu is None or cpu in affinity for cpu in binding["cpus"])


def test_shared_memory_grows_with_the_ranks_and_matches_the_layout(report):
    shm = report["shared_memory"]
    assert {"2", "3", "8", "64"} <= set(shm)
    assert shm["2"]["needed_bytes"] < shm["3"]["needed_bytes"] < shm["8"]["needed_bytes"]
    assert shm["8"]["needed_bytes"] == Layout.for_ranks(8).total_bytes
    # linear in the ranks: at most the reserve plus the per-rank budget each (and a header)
    per_rank = report["transports"]["shm"]["per_rank_bytes"]
    reserve = report["transports"]["shm"]["reserve_bytes"]
    assert shm["64"]["needed_bytes"] <= reserve + 64 * per_rank + (1 << 20)
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert 0 < shm["2"]["available_bytes"] <= total
    assert shm["2"]["fits"] == (shm["2"]["needed_bytes"] <= shm["2"]["available_bytes"])


def test_settings_show_the_collops_variables_in_force():
    env = dict(os.environ, COLLOPS_TIMEOUT="30", COLLOPS_TUNING_FILE="/nonexistent.toml")
    out = subprocess.run([sys.executable, "-m", "collops", "info", "--json"], env=env,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    settings = json.loads(out)["settings"]
    assert settings["tuning_file"] == "/nonexistent.toml"
    assert settings["environment"]["COLLOPS_TIMEOUT"] == "30"


def test_algorithms_by_transport_come_from_the_registry(report):
    expected: dict[str, set[str]] = {}
    for a in all_algorithms():
        for transport in a.transports:
            expected.setdefault(transport, set()).add(a.name)
    assert {t: set(names) for t, names in report["algorithms"].items()} == expected
    assert "shm" in expected


def test_text_report_names_the_sections(capsys):
    assert main(["info", "-n", "2"]) == 0
    out = capsys.readouterr().out
    for heading in ("compiled runners", "transports", "cpus usable", "shared memory per job",
                    "tuning file", "algorithms added by transport components"):
        assert heading in out


def test_the_console_script_runs():
    script = Path(sys.executable).parent / "collops"
    out = subprocess.run([str(script), "info"], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert out.startswith("collops ") and "collops.shm._direct: present" in out
