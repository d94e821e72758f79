"""`collops tune`: with a fake clock on threads it picks the expected winners and never an
ineligible algorithm; its file parses and decides calls; tables are read from the user's
default place; a stale or malformed table is a warning or an error naming the line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import collops
from collops.algorithms.selection import select
from collops.algorithms.tuning import load_tuning
from collops.config import Settings, user_tuning_file
from collops.errors import ArgumentError, TuningWarning
from collops.tune.grid import measure_job
from collops.tune.measure import QUICK, spec_for
from collops.tune.table import machine, write_table

#: µs per call of each algorithm by message bytes: the fake clock's world
FAKE = {
    "allreduce": lambda alg, nbytes: {"ring": 40 if nbytes >= 4096 else 90,
                                      "recursive_doubling": 30 if nbytes < 4096 else 80,
                                      "rabenseifner": 5}.get(alg, 70),
    "allgather": lambda alg, nbytes: {"recursive_doubling": 1, "bruck": 20}.get(alg, 60),
}


def fake_timer(collective: str):
    def timer(algorithm, size, call, iterations):
        nbytes = spec_for(collective, size, 3).message_bytes()
        return FAKE[collective](algorithm, nbytes) * 1e-6 * iterations
    return timer


@pytest.mark.timeout(120)
def test_on_threads_with_a_fake_clock_the_expected_winners_and_never_an_ineligible_one():
    def body(comm, collective):
        return measure_job(comm, [collective], [8, 64 * 1024], QUICK, fake_timer(collective))

    allreduce = collops.spawn(body, 3, "allreduce")[0]["allreduce"]
    # rabenseifner is fastest everywhere in the fake world, and eligible on 3 ranks
    assert {d.best.algorithm for d in allreduce} == {"rabenseifner"}
    assert all(d.changed for d in allreduce if d.default.algorithm != "rabenseifner")
    allgather = collops.spawn(body, 3, "allgather")[0]["allgather"]
    # recursive doubling would be fastest but needs a power of two: never timed, never chosen
    for d in allgather:
        assert d.best.algorithm == "bruck"
        assert "recursive_doubling" not in (d.best.algorithm, d.default.algorithm)


@pytest.mark.timeout(120)
def test_the_written_file_parses_and_decides_the_calls_it_covers(tmp_path: Path) -> None:
    def body(comm):
        return measure_job(comm, ["allreduce"], [8, 64 * 1024], QUICK,
                           fake_timer("allreduce"))

    results = {3: collops.spawn(body, 3)[0]}
    path = tmp_path / "tuned.toml"
    path.write_text(write_table(results, machine("inproc", [3], "collops tune -n 3"),
                                "inproc"))
    table = load_tuning(str(path))
    assert table.measured["ranks"] == [3] and table.measured["command"] == "collops tune -n 3"
    (rule,) = table.rules["allreduce"]
    assert rule.algorithm == "rabenseifner" and rule.bounds.min_ranks == 3
    spec = collops.make_spec("allreduce", 3, np.float64, count=1000, op=collops.SUM)
    assert select(spec, tuning_file=str(path),
                  resources=frozenset({"inproc"})).algorithm.name == "rabenseifner"
    other = collops.make_spec("allreduce", 4, np.float64, count=1000, op=collops.SUM)
    assert select(other, tuning_file=str(path),
                  resources=frozenset({"inproc"})).algorithm.name != "rabenseifner"


@pytest.mark.timeout(300)
def test_the_command_writes_a_file_that_parses_and_a_report(tmp_path: Path) -> None:
    out, png = tmp_path / "t.toml", tmp_path / "r.png"
    done = subprocess.run([sys.executable, "-m", "collops", "tune", "-n", "2", "--quick",
                           "--transport", "inproc", "--collectives", "allreduce,barrier",
                           "--sizes", "8,4K", "--output", str(out), "--report", str(png)],
                          capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "collops tune: pass 1/3: allreduce 8 B" in done.stderr  # progress, pass by pass
    table = load_tuning(str(out))
    assert table.measured["transport"] == "inproc" and table.measured["ranks"] == [2]
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert f"wrote {out}" in done.stdout


def test_the_user_s_file_is_read_from_the_config_directory_unless_the_variable_says(
        tmp_path: Path) -> None:
    home = tmp_path / "config"
    env = {"XDG_CONFIG_HOME": str(home)}
    assert user_tuning_file(env) == str(home / "collops" / "tuning.toml")
    assert Settings.from_env(env).tuning_file is None  # no file there yet
    (home / "collops").mkdir(parents=True)
    (home / "collops" / "tuning.toml").write_text("")
    assert Settings.from_env(env).tuning_file == user_tuning_file(env)
    assert Settings.from_env({**env, "COLLOPS_TUNING_FILE": ""}).tuning_file is None
    assert Settings.from_env({**env, "COLLOPS_TUNING_FILE": "/x.toml"}).tuning_file == "/x.toml"


def test_a_rule_naming_a_vanished_algorithm_warns_and_the_defaults_decide(tmp_path: Path):
    path = tmp_path / "stale.toml"
    path.write_text('[[allreduce.rule]]\nalgorithm = "ring"\n\n'
                    '[[allreduce.rule]]\nalgorithm = "gone_since"\nmax_bytes = 64\n')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = load_tuning(str(path))
    assert [r.algorithm for r in table.rules["allreduce"]] == ["ring"]
    (w,) = [w for w in caught if issubclass(w.category, TuningWarning)]
    assert "line 4" in str(w.message) and "gone_since" in str(w.message)


@pytest.mark.parametrize("text, line", [
    ('[allreduce]\nalgorithm = "ring"\n\n[[allreduce.rule]]\nmax_bytes = -1\n'
     'algorithm = "ring"\n', 4),
    ('# a comment\n[[bcast.rule]]\nalgorithm = "linear"\n[[bcast.rule]]\nper = "word"\n'
     'algorithm = "linear"\n', 4),
    ('[allreducex]\nalgorithm = "ring"\n', 1),
    ('[[allreduce.rule]]\nalgorithm = ring\n', 2),
])
def test_a_malformed_table_is_an_error_naming_the_line(tmp_path: Path, text: str,
                                                       line: int) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ArgumentError, match=rf"line {line}"):
        load_tuning(str(path))


@pytest.mark.timeout(120)
def test_explain_says_which_file_and_that_it_was_measured_elsewhere(tmp_path: Path) -> None:
    path = tmp_path / "far.toml"
    path.write_text('[measured]\nhost = "elsewhere.example"\ncpu = "X"\nranks = [8]\n'
                    'transport = "shm"\ndate = "2026-01-01"\n\n'
                    '[[allreduce.rule]]\nalgorithm = "ring"\nsource = "far away"\n')
    code = ("import collops, numpy as np\n"
            "print(collops.spawn(lambda c: c.explain('allreduce', np.zeros(4)), 2)[0])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=100, env={**os.environ, "COLLOPS_TUNING_FILE": str(path)})
    assert done.returncode == 0, done.stderr
    assert f"tuning file in force: {path}, measured on elsewhere.example" in done.stdout
    assert "measured elsewhere: this host is" in done.stdout
    assert "this call has 2 ranks" in done.stdout
    assert "far away" in done.stdout  # the deciding rule, with its source


@pytest.mark.timeout(300)
def test_compare_default_times_each_row_of_a_file_with_it_in_force_and_without(
        tmp_path: Path) -> None:
    path, out = tmp_path / "hand.toml", tmp_path / "rows.json"
    path.write_text('[[allreduce.rule]]\nalgorithm = "reduce_bcast"\nmin_ranks = 2\n'
                    'max_ranks = 2\nevidence = { sizes = [8, 4096] }\n\n'
                    '[[bcast.rule]]\nalgorithm = "linear"\nmin_ranks = 4\n'
                    'evidence = { sizes = [64] }\n')
    done = subprocess.run([sys.executable, "-m", "collops", "tune", "-n", "2",
                           "--transport", "inproc", "--compare-default", str(path),
                           "--rounds", "3", "--json", str(out)],
                          capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    # the bcast rule is for 4 ranks and up: not a row of a 2-rank check
    assert [(r["collective"], r["size"]) for r in rows] == [("allreduce", 8),
                                                            ("allreduce", 4096)]
    for r in rows:
        assert r["tuned_algorithm"] == "reduce_bcast" != r["default_algorithm"]
        assert len(r["tuned_us"]) == len(r["default_us"]) == 3
        assert f"allreduce {r['size']} B" in done.stdout
