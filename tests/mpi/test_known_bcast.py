"""A bcast whose data the envelope cannot carry runs in one phase under ``mpi_native`` when
every rank knows the data's dtype and shape (the root from ``x``, the others from ``out=``),
and in the envelope's two otherwise — decided from the same board entries on every rank.
Under real ``mpiexec`` on 2 and 3 ranks (`scripts/known_bcast.py`), with the compiled runner
and without, against numpy."""

from __future__ import annotations

import pytest

pytest.importorskip("mpi4py")

from tests.mpi.harness import MPIEXEC, by_rank, mpirun  # noqa: E402

pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich)")


@pytest.mark.timeout(150)
@pytest.mark.parametrize("ranks,route", [(2, "compiled"), (3, "compiled"), (2, "python"),
                                         (3, "python")])
def test_a_bcast_every_rank_knows_runs_in_one_phase_and_any_other_in_two(ranks, route):
    # the compiled runner posts and broadcasts inline; the Python route does the same
    options = ("-genv", "COLLOPS_COMPILED", "0") if route == "python" else ()
    proc = mpirun(ranks, "known_bcast.py", timeout=120, options=options)
    assert proc.returncode == 0, proc.stderr[-3000:]
    reports = by_rank(proc, ranks)
    last = ranks - 1
    for rank, report in reports.items():
        assert report["wrong"] == [], (rank, report)
        ended = report["ended"]
        if route == "python":
            # every repeated call of the five signatures at every root went in one phase
            assert ended.get("True", 0) >= 10 * ranks, (rank, report)
            assert report["route"] == "python" and "rest False" not in ended, (rank, report)
        else:
            # the second call of each bound it, the third ran as one compiled call, in one
            # phase (its Python rest, if a rank was late, found every signature the same)
            assert ended.get("True", 0) >= 5 * ranks, (rank, report)
            assert report["route"] == "compiled" and report["rests"] == 0, (rank, report)
            # a compiled call that met a rank without the signature (the last rank with no
            # out=, then a root with a time limit): its rest, two phases, on every rank
            assert ended.get("rest False", 0) > 0, (rank, report)
        # a rank without out=, with another shape, or a root with a time limit: two phases
        assert report["mixed_ones"] == 0, (rank, report)
        error, message = report["errors"]["wrong"]
        if rank == last:
            assert error == "ArgumentError" and "out" in message, report
        else:
            assert error is None, report
        error, message = report["errors"]["mismatch"]
        assert error == "CollectiveMismatch" and "root: " in message, report
