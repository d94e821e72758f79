"""collops over MPI: the transport, features and failure modes, under real ``mpiexec``.

Each test launches one MPI job (``mpiexec -n 2`` or ``-n 4``; MPICH's launcher allows more
ranks than cores) on a script in ``scripts/`` that prints JSON, and checks what it printed.
The tests are skipped only when mpi4py or mpiexec is missing (``pip install 'collops[mpi]'``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

pytest.importorskip("mpi4py")

from tests.mpi.harness import MPIEXEC, by_rank, environment, mpirun  # noqa: E402
from tests.mpi.scripts.root_mismatch import root_of  # noqa: E402
from tests.support.leaks import left_behind, shm_names, still_running, tagged  # noqa: E402

pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich)")


@pytest.mark.timeout(90)
@pytest.mark.parametrize("n", [2, 4])
def test_transport_matches_by_engine_tag_and_reports_sizes(n):
    proc = mpirun(n, "transport.py")
    for rank, report in by_rank(proc, n).items():
        assert "error" not in report, report
        assert report["checked"] == 6 * (n - 1) + 2, (rank, report)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("n", [2, 4])
def test_init_picks_mpi_and_features_work_over_it(n):
    proc = mpirun(n, "features.py")
    for report in by_rank(proc, n).values():
        assert "error" not in report, report["error"]
        assert len(report["passed"]) == 9, report
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.timeout(90)
def test_an_uncaught_exception_aborts_the_job_with_that_ranks_traceback():
    proc = mpirun(4, "failures.py", "raises")
    assert proc.returncode != 0
    assert "uncaught RuntimeError on MPI rank 3 of 4" in proc.stderr, proc.stderr
    assert "Traceback" in proc.stderr and "rank 3 gives up" in proc.stderr


@pytest.mark.timeout(90)
@pytest.mark.parametrize("scenario,algorithm", [("timeout", "recursive_doubling"),
                                                ("native_timeout", "mpi_native"),
                                                ("native_comm_timeout", "mpi_native")])
def test_a_late_rank_makes_the_collective_time_out(scenario, algorithm):
    proc = mpirun(2, "failures.py", scenario)
    got = by_rank(proc, 2)
    assert got[0]["error"] == "CollectiveTimeout", got[0]
    assert f"allreduce[{algorithm}]" in got[0]["message"]
    if algorithm == "recursive_doubling":
        assert "not heard from ranks [1]" in got[0]["message"]
    assert got[1]["error"] is None, got[1]
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("scenario", ["mismatch", "schedule_mismatch"])
def test_mismatched_calls_raise_collective_mismatch_saying_what_each_called(scenario):
    proc = mpirun(2, "failures.py", scenario)
    got = by_rank(proc, 2)
    detected = [r for r in got.values() if r["error"] == "CollectiveMismatch"]
    assert detected, got
    for report in detected:
        assert "allreduce[" in report["message"] and "bcast[" in report["message"]
    if scenario == "mismatch":  # automatic selection: MPI's own, checked on every rank
        assert len(detected) == 2 and "mpi_native" in detected[0]["message"]
    assert all(r["error"] in ("CollectiveMismatch", "CollectiveTimeout") for r in got.values())
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.timeout(60)
def test_collops_transport_mpi_without_a_launcher_is_a_world_of_one():
    code = ("import collops, numpy as np; c = collops.init(); "
            "print(c.transport_name, c.size, c.allreduce(np.arange(3)).tolist())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=50, env={**environment(), "COLLOPS_TRANSPORT": "mpi"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["mpi", "1", "[0,", "1,", "2]"]


def collops_under_mpiexec(n: int, *args: str, marker: str,
                          timeout: float = 80) -> subprocess.CompletedProcess:
    """Run ``python -m collops ARGS`` on ``n`` ranks; ``marker`` (an argument unique to this
    job) finds leftover processes. Fails (not hangs) past ``timeout`` seconds."""
    assert MPIEXEC is not None and marker in args
    before, env = shm_names(""), tagged(environment())
    proc = subprocess.run([MPIEXEC, "-n", str(n), sys.executable, "-m", "collops", *args],
                          capture_output=True, text=True, timeout=timeout, env=env)
    assert not still_running(marker, env), f"processes left behind: {still_running(marker, env)}"
    assert not left_behind(before, ""), f"shared memory left behind: {left_behind(before, '')}"
    return proc


BENCH_FIELDS = {"collective", "algorithm", "nprocs", "size", "latency_us", "min_us", "max_us",
                "algbw_GBps", "busbw_GBps", "mpi_latency_us", "ratio", "transport",
                "openmpi_latency_us", "openmpi_ratio"}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("algorithm,collectives,compare", [
    (None, "allreduce,bcast,barrier", True),
    ("mpi_native", "allreduce,bcast", True),
    ("ring", "allreduce,allgather", False),
], ids=["auto-compare", "mpi_native-compare", "ring"])
def test_collops_bench_under_mpiexec_measures_in_place(tmp_path, algorithm, collectives,
                                                       compare):
    # timings never decide pass or fail: only the shape of the report and its arithmetic
    out = tmp_path / "bench.json"
    sizes = [8, 1024, 65536]
    args = ["bench", "--collectives", collectives, "--sizes", "8,1K,64K", "--iterations", "20",
            "--json", str(out)]
    args += ["--algorithm", algorithm] if algorithm else []
    args += ["--compare", "mpi"] if compare else []
    proc = collops_under_mpiexec(2, *args, marker=str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = json.loads(out.read_text())
    names = collectives.split(",")
    expected = [(c, s) for c in names for s in ([0] if c == "barrier" else sizes)]
    assert [(r["collective"], r["size"]) for r in records] == expected
    assert len({(r["collective"], r["algorithm"], r["size"]) for r in records}) == len(records)
    for r in records:
        assert set(r) == BENCH_FIELDS, r
        assert r["transport"] == "mpi" and r["nprocs"] == 2, r
        assert r["latency_us"] > 0 and 0 < r["min_us"] <= r["max_us"], r
        if algorithm:
            assert r["algorithm"] == algorithm, r
        if compare:
            assert r["mpi_latency_us"] > 0, r
            assert r["ratio"] == pytest.approx(r["latency_us"] / r["mpi_latency_us"]), r
        else:
            assert r["mpi_latency_us"] is None and r["ratio"] is None, r
        assert r["openmpi_latency_us"] is None and r["openmpi_ratio"] is None, r
    # rank 0 alone prints: one header, one line per record
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("collective") and len(lines) == 1 + len(records), proc.stdout
    assert ("MPI µs" in lines[0]) == compare


@pytest.mark.timeout(60)
def test_collops_bench_under_mpiexec_refuses_what_it_cannot_do(tmp_path):
    marker = str(tmp_path / "never.json")
    proc = collops_under_mpiexec(2, "bench", "--transport", "shm", "--json", marker,
                                 marker=marker)
    assert proc.returncode != 0
    assert proc.stderr.count("--transport shm: started by an MPI launcher") == 1, proc.stderr
    proc = collops_under_mpiexec(2, "bench", "--algorithm", "no_such", "--json", marker,
                                 marker=marker)
    assert proc.returncode != 0 and proc.stderr.count("no_such") == 1, proc.stderr
    assert not (tmp_path / "never.json").exists() and proc.stdout == ""


@pytest.mark.timeout(150)
@pytest.mark.parametrize("n,algorithm", [(2, "mpi_native"), (2, "auto"), (2, "mixed"),
                                         (4, "mpi_native"), (4, "mixed")])
def test_many_non_blocking_collectives_in_flight_complete_in_any_wait_order(n, algorithm):
    # 20 calls per round (more than the 8 MPI communicators a collops communicator has for
    # MPI's own collectives), waited last-first, in a random order per rank, and by test();
    # before the fix, calls sharing an MPI communicator started their later phases in
    # different orders on different ranks and ended in CollectiveTimeout
    proc = mpirun(n, "in_flight.py", algorithm, str(n), timeout=120)
    for rank, report in by_rank(proc, n).items():
        assert "error" not in report, (rank, report.get("message"), report.get("traceback"))
        assert report["failures"] == [], report["failures"]
        assert report["calls"] == 80 and report["checked"] == 84, report
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.timeout(150)
@pytest.mark.parametrize("n,algorithm", [(2, "mpi_native"), (3, "mixed"), (4, "mpi_native")])
def test_calls_in_flight_across_nodes_each_take_their_own_agreement(n, algorithm):
    # a node per rank: every call's agreement runs on the channel's point-to-point, many at
    # once, each taking its own words whatever order the waits poll them in
    proc = mpirun(n, "in_flight.py", algorithm, str(n), timeout=120,
                  options=("-genv", "COLLOPS_RANKS_PER_NODE", "1"))
    for rank, report in by_rank(proc, n).items():
        assert "error" not in report, (rank, report.get("message"), report.get("traceback"))
        assert report["failures"] == [], report["failures"]
        assert report["calls"] == 80 and report["checked"] == 84, report
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.timeout(60)
def test_ranks_pinned_one_cpu_each_are_not_taken_for_oversubscribed(tmp_path):
    # mpiexec -bind-to core gives each rank a one-CPU mask; whether the ranks outnumber the
    # CPUs is judged from the union of the node's masks, so 2 ranks on 2 CPUs still spin
    assert MPIEXEC is not None
    script = tmp_path / "spin.py"
    script.write_text(
        "import json, os\n"
        "from collops.mpi.transport import MpiTransport\n"
        "t = MpiTransport()\n"
        "print(json.dumps({'rank': t.rank, 'mask': sorted(os.sched_getaffinity(0)),\n"
        "                  'spins': t._spin_seconds > 0}), flush=True)\n"
        "t.close()\n")
    proc = subprocess.run([MPIEXEC, "-n", "2", "-bind-to", "core", sys.executable, str(script)],
                          capture_output=True, text=True, timeout=50, env=environment())
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = by_rank(proc, 2)
    cpus = set().union(*(set(r["mask"]) for r in got.values()))
    assert all(len(r["mask"]) == 1 for r in got.values())
    assert all(r["spins"] == (2 <= len(cpus)) for r in got.values())


@pytest.mark.timeout(240)
@pytest.mark.parametrize("ranks,scenario", [(2, "each its own"), (3, "no root"),
                                            (3, "a third rank")])
def test_a_root_disagreement_is_a_mismatch_naming_both_roots_over_mpi(ranks, scenario):
    # bcast, scatter, scatterv, gather and reduce at 8 B and 8 MiB: every rank is told
    proc = mpirun(ranks, "root_mismatch.py", scenario, timeout=200)
    got = by_rank(proc, ranks)
    for rank, report in got.items():
        assert report["after"] == float(ranks), report  # the communicator is still usable
        assert len(report["results"]) == (20 if scenario == "each its own" else 10), report
        for collective, n, algorithm, error, message in report["results"]:
            case = (rank, collective, n, algorithm)
            assert error == "CollectiveMismatch", (case, error, message)
            roots = re.search(r"root: (\d) vs (\d)", message)  # this rank's, then the other's
            assert roots and int(roots[1]) == root_of(scenario, rank) != int(roots[2]), (
                case, message)
    assert proc.returncode == 0, proc.stderr[-3000:]
