"""MSCCL-IR in and out: every built-in schedule survives export → import → numpy; a program
written as MSCCL writes them (fused steps, in place) runs on threads, shm and in the
simulator; malformed programs are errors naming what is wrong."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from collops.algorithms.registry import all_algorithms
from collops.check.checker import check_algorithm
from collops.errors import PluginError
from collops.msccl import parse, to_xml
from collops.msccl.export import REDUCING, export_spec
from collops.msccl.load import to_algorithm

FILES = Path(__file__).parent / "files"
RING = FILES / "ring_fused.xml"
SCHEDULES = [a for a in all_algorithms() if a.native is None and not a.needs]


def _collops(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "collops", *args], capture_output=True,
                          text=True, timeout=240, env=dict(os.environ), cwd=cwd)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("alg", SCHEDULES, ids=lambda a: f"{a.collective}.{a.name}")
def test_every_built_in_schedule_survives_export_import_and_numpy(alg) -> None:
    ran = 0
    for p in range(2, 9):
        for ordered in ([False, True] if alg.collective in REDUCING else [False]):
            if not alg.eligible(export_spec(alg.collective, p, p, ordered=ordered)):
                continue
            back = to_algorithm(parse(to_xml(alg.collective, alg.name, p, ordered=ordered)))
            report = check_algorithm(back, [p], [p, 2 * p])
            assert report.ok, f"n={p} ordered={ordered}: " + "; ".join(
                str(x) for x in report.problems) + f" skipped {report.skipped}"
            ran += 1
    assert ran >= 3  # every algorithm runs at three or more of the sizes 2…8


def test_an_export_is_msccl_ir_each_thread_block_with_one_send_and_one_receive_peer() -> None:
    algo = ET.fromstring(to_xml("allreduce", "recursive_doubling", 4, count=4))
    assert (algo.tag, algo.get("coll"), algo.get("ngpus"), algo.get("proto")) == (
        "algo", "allreduce", "4", "Simple")
    for gpu in algo.findall("gpu"):
        for tb in gpu.findall("tb"):
            steps = tb.findall("step")
            assert steps and [int(s.get("s")) for s in steps] == list(range(len(steps)))
            kinds = {s.get("type") for s in steps}
            assert kinds <= {"s", "r", "cpy", "re", "nop"}
            if "s" in kinds:
                assert int(tb.get("send")) >= 0 and tb.get("recv") == "-1"
            if "r" in kinds:
                assert int(tb.get("recv")) >= 0 and tb.get("send") == "-1"
            for s in steps:
                if s.get("depid") != "-1":
                    target = gpu.find(f"tb[@id='{s.get('depid')}']")
                    assert target is not None and int(s.get("deps")) < len(target)


@pytest.mark.timeout(240)
def test_a_program_written_as_msccl_writes_them_passes_the_checks_and_runs_on_threads() -> None:
    done = _collops("msccl", "import", str(RING))
    assert done.returncode == 0 and done.stdout.startswith("ok    allreduce.ring_fused"), (
        done.stdout + done.stderr)
    code = ("import collops, numpy as np\n"
            f"collops.load_plugin({str(RING)!r})\n"
            "def body(comm):\n"
            "    return comm.allreduce(np.arange(6.0) + comm.rank, algorithm='ring_fused')\n"
            "for got in collops.spawn(body, 3):\n"
            "    assert np.array_equal(got, 3 * np.arange(6.0) + 3), got\n"
            "print('ok')\n")
    threads = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=200)
    assert threads.stdout.strip() == "ok", threads.stderr[-3000:]


@pytest.mark.timeout(240)
def test_an_msccl_plugin_runs_on_shared_memory_ranks_and_in_the_simulator() -> None:
    run = _collops("run", "-n", "3", "--timeout", "120", "--plugin", str(RING),
                   str(FILES / "ring_rank.py"))
    assert run.returncode == 0, run.stderr[-3000:]
    assert sorted(run.stdout.split()) .count("ok") == 3
    sim = _collops("sim", "--plugin", str(RING), "--collective", "allreduce", "--algorithm",
                   "ring_fused", "--compare", "ring", "-n", "3", "--topology", "ring:3",
                   "--size", "3K")
    assert sim.returncode == 0, sim.stderr[-3000:]
    assert "ring_fused" in sim.stdout


def _mutated(old: str, new: str) -> str:
    return RING.read_text().replace(old, new, 1)


@pytest.mark.parametrize("text, words", [
    ("<algo", "not XML"),
    (_mutated('type="rrs"', 'type="rrx"'), "unknown type 'rrx'"),
    (_mutated('coll="allreduce"', 'coll="broadcastish"'), "not a collective collops runs"),
    (_mutated('ngpus="3"', 'ngpus="4"'), "ngpus=4"),
    (_mutated('name="ring_fused"', 'name="ring fused"'), "Python identifiers"),
    (_mutated('coll="allreduce"', 'coll="alltoall"'), "in-place alltoall"),
    (_mutated('depid="-1" deps="-1"', 'depid="7" deps="0"'), "tb 7 step 0, which does not"),
    (_mutated('</gpu>', '<tb id="1" send="1" recv="-1" chan="1"><step s="0" type="nop"/></tb>'
              '</gpu>'), "more than one thread block sends to gpu 1"),
])
def test_a_malformed_program_is_an_error_naming_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(PluginError, match=words.replace("(", r"\(")):
        to_algorithm(parse(text, "bad.xml")).build(0, export_spec(
            "allreduce", 3, 3))


@pytest.mark.timeout(240)
def test_a_program_that_deadlocks_is_refused_with_the_checker_s_words(tmp_path: Path) -> None:
    # every rank first waits for its left neighbour's data, and sends its own only after
    lines = RING.read_text().replace('name="ring_fused"', 'name="waits_first"').splitlines()
    for i in range(len(lines) - 1):
        if 's="0" type="s"' in lines[i] and 's="1" type="rrs"' in lines[i + 1]:
            lines[i], lines[i + 1] = (lines[i + 1].replace('s="1"', 's="0"'),
                                      lines[i].replace('s="0"', 's="1"'))
    path = tmp_path / "waits_first.xml"
    path.write_text("\n".join(lines))
    done = _collops("msccl", "import", str(path))
    assert done.returncode == 2
    assert "fails collops check" in done.stderr
    assert "schedules can deadlock: a cycle of waits through rank 0 step" in done.stderr


@pytest.mark.timeout(120)
def test_a_program_named_like_a_built_in_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "ring.xml"
    path.write_text(RING.read_text().replace('name="ring_fused"', 'name="ring"'))
    done = _collops("msccl", "import", str(path))
    assert done.returncode == 2
    assert "argument name='ring': allreduce already has an algorithm of this name (built in)" \
        in done.stderr
