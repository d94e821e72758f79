"""Over MPI, a mismatch names in words each field in which the ranks' calls differ, with MPI's
own collectives and with schedules."""

from __future__ import annotations

import pytest

pytest.importorskip("mpi4py")

from tests.mpi.harness import MPIEXEC, by_rank, mpirun  # noqa: E402

pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich)")

WORDS = {"op": ("op: sum vs max", "op: max vs sum"),
         "dtype": ("dtype: float64 vs >f8", "dtype: >f8 vs float64"),
         "count": ("count: 8 vs 16", "count: 16 vs 8")}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("algorithm", ["auto", "ring"])
def test_a_mismatch_over_mpi_names_the_fields_that_differ(algorithm):
    proc = mpirun(2, "mismatch_words.py", algorithm, timeout=100)
    got = by_rank(proc, 2)
    for case, words in WORDS.items():
        results = [next(r for r in got[rank]["results"] if r[0] == case) for rank in (0, 1)]
        assert all(error is not None for _, error, _ in results), results
        named = [text for _, error, text in results if error == "CollectiveMismatch"]
        assert named, results
        assert all(any(w in text for w in words) for text in named), results
    assert proc.returncode == 0, proc.stderr[-3000:]
