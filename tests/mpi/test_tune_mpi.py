"""`collops tune` under real ``mpiexec``: it measures on the job's own ranks over MPI and rank 0
writes the file; ``--compare-default`` times a file's rows on those ranks too (once, not one
shared-memory job per MPI rank). Timings never decide pass or fail."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("mpi4py")

from collops.algorithms.tuning import load_tuning  # noqa: E402
from tests.mpi.harness import MPIEXEC  # noqa: E402
from tests.mpi.test_mpi import collops_under_mpiexec  # noqa: E402

pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich)")


@pytest.mark.timeout(200)
def test_tune_quick_under_mpiexec_writes_a_file_measured_over_mpi(tmp_path):
    out = tmp_path / "mpi-tuned.toml"
    proc = collops_under_mpiexec(2, "tune", "--quick", "--collectives", "allreduce,barrier",
                                 "--sizes", "8,4K", "--output", str(out), marker=str(out),
                                 timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = load_tuning(str(out))
    assert table.measured["transport"] == "mpi" and table.measured["ranks"] == [2]
    assert table.measured["mpi"]  # the MPI library it ran over
    # the candidates were timed over MPI: MPI's own collective is the default
    assert "default mpi_native" in proc.stdout
    assert proc.stdout.count(f"wrote {out}") == 1  # rank 0 alone writes and reports


@pytest.mark.timeout(200)
def test_compare_default_under_mpiexec_times_the_rows_on_the_job_s_ranks(tmp_path):
    path, out = tmp_path / "hand.toml", tmp_path / "rows.json"
    path.write_text('[[allreduce.rule]]\nalgorithm = "reduce_bcast"\nmin_ranks = 2\n'
                    'max_ranks = 2\nevidence = { sizes = [8, 4096] }\n\n'
                    '[[bcast.rule]]\nalgorithm = "linear"\nmin_ranks = 4\n'
                    'evidence = { sizes = [64] }\n')
    proc = collops_under_mpiexec(2, "tune", "--compare-default", str(path), "--rounds", "3",
                                 "--json", str(out), marker=str(out), timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["ranks"], r["collective"], r["size"]) for r in rows] == [
        (2, "allreduce", 8), (2, "allreduce", 4096)]
    for r in rows:
        # over MPI the built-in table picks MPI's own collective; the file its rule
        assert (r["default_algorithm"], r["tuned_algorithm"]) == ("mpi_native", "reduce_bcast")
        assert len(r["tuned_us"]) == len(r["default_us"]) == 3
    assert proc.stdout.count("tuned/default") == 1  # one table, printed by rank 0
