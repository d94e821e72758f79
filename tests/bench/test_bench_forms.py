"""`collops bench` measures what users call: object forms, v-variants with counts given,
exscan; and compares with several MPI libraries in one invocation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from collops.bench.measure import OBJECTS, VECTORS
from collops.bench.peers import launcher, parse_peers

FORMS = [*OBJECTS, *VECTORS, "exscan"]


def _bench(*args: str, tmp: Path) -> list[dict]:
    out = tmp / "bench.json"
    done = subprocess.run([sys.executable, "-m", "collops", "bench", *args, "--json", str(out)],
                          capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.timeout(420)
def test_every_object_and_vector_form_is_measured(tmp_path: Path) -> None:
    rows = _bench("-n", "3", "--transport", "inproc", "--collectives", ",".join(FORMS),
                  "--sizes", "8,1K", "--iterations", "5", tmp=tmp_path)
    by = {(r["collective"], r["size"]) for r in rows}
    for form in OBJECTS:
        assert (form, 0) in by  # one row: a small object
    for form in [*VECTORS, "exscan"]:
        assert {(form, 8), (form, 1024)} <= by
    assert all(r["latency_us"] > 0 and r["algorithm"] for r in rows)


@pytest.mark.timeout(420)
def test_objects_compared_with_mpi4py_s_lowercase_methods(tmp_path: Path) -> None:
    rows = _bench("-n", "2", "--collectives", "allreduce_object,gather_object,allgatherv",
                  "--sizes", "8", "--iterations", "20", "--compare", "mpich", tmp=tmp_path)
    assert len(rows) == 3
    for r in rows:
        assert r["mpi_latency_us"] > 0 and r["ratio"] > 0
        assert r["openmpi_latency_us"] is None


def test_peers_are_named_once_and_open_mpi_runs_from_its_own_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_peers("mpich,mpi,openmpi") == ["mpi", "openmpi"]
    with pytest.raises(ValueError, match="'lam'"):
        parse_peers("lam")
    home = tmp_path / "ompi"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "mpiexec").write_text("")
    monkeypatch.setenv("COLLOPS_PEER_OPENMPI", str(home))
    prefix, env = launcher("openmpi", 4)
    assert prefix[0] == str(home / "bin" / "mpiexec") and prefix[-1] == str(home / "bin" /
                                                                              "python")
    assert "--oversubscribe" in prefix and prefix[prefix.index("-n") + 1] == "4"
    import collops
    assert str(Path(collops.__file__).parents[1]) in env["PYTHONPATH"].split(os.pathsep)


def test_the_barrier_is_timed_as_the_mpi_side_times_its_own():
    """No wrapper of the harness's own around collops' barrier: the MPI side times
    ``comm.Barrier`` itself, so a lambda with ``**{}`` here weighed on collops alone."""
    from collops.bench.measure import collops_call
    from collops.bench.mpi_worker import mpi_call

    class Recorder:
        def barrier(self, **kw):
            return kw

        def Barrier(self):  # noqa: N802 - mpi4py's name
            return None

    comm, none = Recorder(), np.empty(0)
    assert collops_call(comm, "barrier", none, none, None) == comm.barrier
    assert mpi_call(comm, None, "barrier", none, none) == comm.Barrier
    assert collops_call(comm, "barrier", none, none, "dissemination")() == {
        "algorithm": "dissemination"}


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "gather", "scatter",
                                        "pingpong", "scatterv"])
def test_buffers_start_on_a_page_and_hold_the_rank(collective: str) -> None:
    from collops.bench.measure import PAGE, buffers, element_count

    for size in (8, 65536, 1 << 20):
        for rank in (0, 1):
            send, recv = buffers(collective, size, 4, rank)
            assert send.size == element_count(collective, size, 4)
            assert np.all(send == rank + 1)
            for buf in (send, recv):
                assert buf.dtype == np.float64 and buf.flags.c_contiguous
                assert buf.size == 0 or buf.ctypes.data % PAGE == 0
