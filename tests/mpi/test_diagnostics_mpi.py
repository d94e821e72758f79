"""Diagnostics over MPI, with MPI's own collectives and with schedules: a mismatch names in words
each field in which the ranks' calls differ; a mistake only a root sees ends the call on every
rank."""

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


@pytest.mark.timeout(120)
def test_a_root_s_mistake_ends_the_call_on_every_rank_over_mpi():
    proc = mpirun(3, "root_gives_up.py", timeout=100)
    got = by_rank(proc, 3)
    for i, (case, algorithm, error, text) in enumerate(got[0]["results"]):
        assert error == "ArgumentError" and "on rank 0" in text, got[0]
        quoted = text[:40]
        for rank in (1, 2):
            _, _, theirs, their_text = got[rank]["results"][i]
            assert theirs == "CollectiveMismatch", (case, algorithm, got[rank])
            assert quoted in their_text, (case, algorithm, their_text)
    assert all(got[r]["after"] == 3.0 for r in range(3)), got
    assert proc.returncode == 0, proc.stderr[-3000:]
