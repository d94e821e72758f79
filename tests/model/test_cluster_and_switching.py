"""`collops model`: the lecture's cluster presets, switching in the closed forms, and the
lecture's own schemes priced exactly where they are contention-free."""

from __future__ import annotations

import subprocess
import sys

import pytest

from collops.model.closed_form import closed_form
from collops.sim.api import simulate
from collops.topology import parse_topology


def _model(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "collops", "model", *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_cluster_b_has_the_lecture_s_packets_by_default() -> None:
    out = _model("--cluster", "B", "--sizes", "64K")
    assert "V_max = 1500 B, V_0 = 78 B" in out and "t_s1 = 1e-08 s/B" in out
    # 65536 payload bytes in packets of 1500 − 78 = 1422: 47 packets, 47 headers on the wire
    assert "47 packets, 69202 B on the wire" in out
    assert "\n  A " not in out.split("cluster models:")[1]
    overridden = _model("--cluster", "B", "--sizes", "64K", "--net", "header_bytes=0")
    assert "V_0 = 0 B" in overridden


@pytest.mark.parametrize("switching, extra", [("cut-through", 0), ("packet", 1), ("message", 2)])
def test_switching_prices_the_hops_of_a_pairwise_hypercube_exchange(switching: str,
                                                                    extra: int) -> None:
    topo = parse_topology("hypercube:3")
    p, m = 8, 65536
    net = topo.params
    hops = sum(bin(k).count("1") for k in range(1, p))
    base = (p - 1) * net.overhead + hops * net.hop_latency + (p - 1) * m / net.bandwidth
    stored = {0: 0.0, 1: (hops - (p - 1)) * net.packet_size / net.bandwidth,
              2: (hops - (p - 1)) * m / net.bandwidth}[extra]
    got = closed_form("alltoall", "pairwise", topo, p, m, switching)
    assert got == pytest.approx(base + stored, rel=1e-12)


@pytest.mark.parametrize("collective, algorithm, topology, p", [
    ("alltoall", "ring_relay", "ring:8", 8),
    ("alltoall", "hypercube_exchange", "hypercube:4", 16),
    ("alltoall", "torus_dimensions", "torus:4x4", 16),
    ("allgather", "torus_dimensions", "torus:4x4", 16),
])
def test_the_lecture_s_schemes_are_priced_as_they_simulate(collective, algorithm, topology,
                                                          p) -> None:
    for m in (1024, 65536):
        formula = closed_form(collective, algorithm, topology, p, m)
        assert formula == pytest.approx(simulate(collective, algorithm, topology, p, m,
                                                 gamma=0.0).time_s, rel=1e-9)
