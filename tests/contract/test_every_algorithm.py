"""One contract over transport × registry: every algorithm, on every transport that runs it.

The algorithm axis is the registry (`collops.algorithms.all_algorithms()`), schedules and the
transport components' native collectives alike, each run where its ``transports`` and
``needs`` allow, plus automatic selection; the transport axis is threads (``inproc``) at 1 to
4 ranks, shared-memory processes (``shm``) at 2 and 3, and an MPI job at 2. One job per
(transport, ranks) runs every call (`tests.support.contract`), each checked against numpy.
"""

from __future__ import annotations

import importlib.util

import pytest

import collops
from tests.mpi.harness import MPIEXEC, mpirun, reports
from tests.support.contract import check_reports, run_contract

SEED = 3
JOBS = [("inproc", 1), ("inproc", 2), ("inproc", 3), ("inproc", 4), ("shm", 2), ("shm", 3)]


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("transport", "p"), JOBS, ids=lambda v: str(v))
def test_every_algorithm_against_numpy(transport, p):
    got = collops.spawn(run_contract, p, SEED, transport=transport, timeout=220)
    check_reports(got, transport, p, SEED)


@pytest.mark.timeout(240)
@pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None or MPIEXEC is None,
                    reason="no mpi4py or mpiexec (pip install 'collops[mpi]')")
def test_every_algorithm_against_numpy_over_mpi():
    p = 2
    proc = mpirun(p, "contract.py", str(SEED), timeout=220)
    assert proc.returncode == 0, proc.stderr[-3000:]
    chosen = check_reports(reports(proc.stdout)[-1]["reports"], "mpi", p, SEED)
    assert "mpi_native" in chosen, "selection never chose MPI's own collective"
