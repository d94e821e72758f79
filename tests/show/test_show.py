"""`collops show`: every step placed once, messages from send to receive, in levels and in
simulated time, as text and as a PNG."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from collops.algorithms.registry import get_algorithm
from collops.show.cli import build_timeline
from collops.show.text import render_text
from collops.sim.api import call_specs, run_program, simulate
from collops.sim.program import program_from_schedules
from collops.topology import parse_topology, place


@pytest.mark.parametrize("collective, algorithm, p", [
    ("allgather", "ring", 5), ("bcast", "binomial", 7), ("allreduce", "recursive_doubling", 8),
    ("alltoallv", "random_chunked", 4), ("reduce_scatter", "ring", 3)])
def test_every_step_is_placed_once_and_every_message_goes_forward(collective: str,
                                                                 algorithm: str,
                                                                 p: int) -> None:
    t = build_timeline(collective, algorithm, p, 64)
    schedules = get_algorithm(collective, algorithm).build_all(call_specs(collective, p, 64))
    assert len(t.level) == sum(len(s) for s in schedules)
    for r, s in enumerate(schedules):
        mine = t.rank == r
        assert sorted(t.index[mine].tolist()) == list(range(len(s)))
        assert np.array_equal(t.kind[mine][np.argsort(t.index[mine])], s.kind)
    assert np.all(t.level[t.recv_steps] == t.level[t.send_steps] + 1)
    assert np.all(t.x0[t.recv_steps] > t.x0[t.send_steps])
    assert np.all(t.peer[t.send_steps] == t.rank[t.recv_steps])
    for a, b in zip(t.dep_from, t.dep_to, strict=True):  # a dependency never goes back
        assert t.x0[b] >= t.x1[a]


def test_the_text_table_names_each_message_on_its_send_and_its_receive() -> None:
    text = render_text(build_timeline("allgather", "ring", 4, 16))
    lines = text.splitlines()
    assert lines[0] == "allgather.ring on 4 ranks, 16 B per rank"
    assert lines[1].split() == ["level", "rank", "0", "rank", "1", "rank", "2", "rank", "3"]
    sends = re.findall(r"send→(\d) 16 B m(\d+)", text)
    recvs = re.findall(r"recv←(\d) 16 B m(\d+)", text)
    assert len(sends) == len(recvs) == 4 * 3
    assert sorted(m for _, m in sends) == sorted(m for _, m in recvs)
    assert "after s2" in text  # round 2 forwards what round 1 received


def test_in_simulated_time_the_picture_spans_the_simulated_call() -> None:
    t = build_timeline("bcast", "binomial", 8, 65536, topology="ring:8")
    assert t.unit == "s"
    schedules = get_algorithm("bcast", "binomial").build_all(call_specs("bcast", 8, 65536))
    topo = parse_topology("ring:8")
    rounds = run_program(program_from_schedules(schedules, 1), topo, place(topo, 8)).rounds
    # the last receive completes when the model's last message phase ends; the model's total
    # adds the local copies' time, which the picture does not draw
    messages_end = t.x0[t.recv_steps].max()
    assert messages_end == pytest.approx(rounds.time_s.sum(), rel=1e-9)
    sim = simulate("bcast", "binomial", "ring:8", 8, 65536)
    assert messages_end < sim.time_s
    assert f"simulated on ring:8 ({sim.time_s * 1e6:.2f} µs)" in t.title
    phases = np.unique(t.level[t.send_steps])
    starts = [t.x0[t.send_steps][t.level[t.send_steps] == lv].min() for lv in phases]
    assert np.all(np.diff(starts) > 0)


@pytest.mark.timeout(200)
def test_the_command_draws_a_png_and_refuses_what_it_cannot_draw(tmp_path: Path) -> None:
    png = tmp_path / "ring.png"
    done = subprocess.run([sys.executable, "-m", "collops", "show", "--collective",
                           "allgather", "--algorithm", "ring", "-n", "4", "--png", str(png),
                           "--topology", "torus:2x2x1"], capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    native = subprocess.run([sys.executable, "-m", "collops", "show", "--collective", "bcast",
                             "--algorithm", "mpi_native"], capture_output=True, text=True,
                            timeout=120)
    assert native.returncode == 2 and "not a schedule" in native.stderr
    ineligible = subprocess.run([sys.executable, "-m", "collops", "show", "--collective",
                                 "allgather", "--algorithm", "recursive_doubling", "-n", "3"],
                                capture_output=True, text=True, timeout=120)
    assert ineligible.returncode == 2 and "power of two" in ineligible.stderr
