"""Closed forms checked against hand-computed numbers and against step-by-step sums."""

from __future__ import annotations

import math

import pytest

from collops.errors import ArgumentError
from collops.model import (
    LogGP,
    alpha_beta,
    closed_form,
    cost_model,
    exact_time,
    mean_hops,
    model_a,
    model_b,
    packet_count,
    seed004,
    seed_shape,
    transfer_time,
    wire_bytes,
)
from collops.topology import parse_topology

TS, TC, TH = 10.0, 1.0, 0.5  # round numbers make hand computation easy


# ------------------------------------------------------------------- the seed-004 table, p = 4
@pytest.mark.parametrize(("exchange", "shape", "p", "m", "expected"), [
    ("allgather", "ring", 4, 2, 3 * (10 + 2)),                  # (p-1)(ts + m tc) = 36
    ("allgather", "torus", 4, 2, 2 * 1 * 10 + 3 * 2),          # 2(√p-1)ts + (p-1)m tc = 26
    ("allgather", "hypercube", 4, 2, 10 * 2 + 3 * 2),          # ts log p + (p-1)m tc = 26
    ("alltoall", "ring", 4, 2, 3 * (10 + 0.5 * 2 * 4)),        # (p-1)(ts + m p tc/2) = 42
    ("alltoall", "torus", 4, 2, 1 * (2 * 10 + 2 * 4)),         # (√p-1)(2ts + m p tc) = 28
    ("alltoall", "hypercube", 4, 2, 2 * (10 + 0.5 * 2 * 4)),   # log p (ts + m p tc/2) = 28
    ("allgather", "torus", 16, 1, 2 * 3 * 10 + 15),            # = 75
    ("alltoall", "torus", 16, 1, 3 * (20 + 16)),               # = 108
    ("allgather", "hypercube", 8, 3, 3 * 10 + 7 * 3),          # = 51
])
def test_seed004_table(exchange: str, shape: str, p: int, m: float, expected: float) -> None:
    assert seed004(exchange, shape, p, m, TS, TC) == pytest.approx(expected)
    # packet switching does not change the neighbour schemes ...
    assert seed004(exchange, shape, p, m, TS, TC, switching="packet") == pytest.approx(
        expected) or (exchange, shape) == ("alltoall", "hypercube")


def test_packet_switched_hypercube_alltoall_is_pairwise_rounds() -> None:
    # p = 8: (p-1)(ts + m tc) + th * (popcounts of 1..7 = 1+1+2+1+2+2+3 = 12)
    value = seed004("alltoall", "hypercube", 8, 2, TS, TC, TH, switching="packet")
    assert value == pytest.approx(7 * 12 + 0.5 * 12)


def test_per_hop_latency_adds_once_per_step() -> None:
    # ring allgather has p-1 steps, hypercube log p, torus 2(√p-1)
    assert seed004("allgather", "ring", 5, 1, TS, TC, TH) - seed004(
        "allgather", "ring", 5, 1, TS, TC) == pytest.approx(4 * TH)
    assert seed004("allgather", "hypercube", 16, 1, TS, TC, TH) - seed004(
        "allgather", "hypercube", 16, 1, TS, TC) == pytest.approx(4 * TH)
    assert seed004("alltoall", "torus", 9, 1, TS, TC, TH) - seed004(
        "alltoall", "torus", 9, 1, TS, TC) == pytest.approx(2 * 2 * TH)


def test_seed004_rejects_shapes_it_does_not_cover() -> None:
    with pytest.raises(ArgumentError):
        seed004("allgather", "torus", 8, 1, TS, TC)      # not a square
    with pytest.raises(ArgumentError):
        seed004("alltoall", "hypercube", 6, 1, TS, TC)   # not a power of two
    with pytest.raises(ArgumentError):
        seed004("bcast", "ring", 4, 1, TS, TC)


# ------------------------------------------------------------------- point to point, A and B
def test_message_vs_packet_switching() -> None:
    assert transfer_time(100, 3, TS, TC, TH, "message") == pytest.approx(10 + (100 + 0.5) * 3)
    assert transfer_time(100, 3, TS, TC, TH, "packet") == pytest.approx(10 + 100 + 1.5)
    assert transfer_time(100, 1, TS, TC, TH, "message") == transfer_time(
        100, 1, TS, TC, TH, "packet")


@pytest.mark.parametrize(("m", "packets"), [(0, 1), (1, 1), (1422, 1), (1423, 2), (2844, 2),
                                            (2845, 3), (10_000, 8)])
def test_model_b_packet_counts(m: int, packets: int) -> None:
    # Fast Ethernet with TCP/IP: 1500 - 78 = 1422 payload bytes per packet
    assert packet_count(m) == packets == math.ceil(max(m, 1) / 1422)
    assert wire_bytes(m) == m + 78 * packets


def test_models_a_and_b() -> None:
    assert model_a(1000, 5e-5, 1e-8) == pytest.approx(5e-5 + 1e-5)
    # one packet: the whole message plus its header is prepared before it leaves
    assert model_b(100, 1.0, 0.01, 0.001) == pytest.approx(1.0 + 0.01 * 178 + 0.001 * 178)
    # many packets: only the first (1500 bytes with its header) is prepared in the open
    assert model_b(5000, 1.0, 0.01, 0.001) == pytest.approx(
        1.0 + 0.01 * 1500 + 0.001 * (5000 + 4 * 78))
    assert model_b(100, 1.0, 0.0, 0.001, v_max=100, v_0=0) == pytest.approx(model_a(100, 1.0,
                                                                                   0.001))
    with pytest.raises(ArgumentError):
        packet_count(10, v_max=50, v_0=50)


# ------------------------------------------------------------------- LogGP
def test_loggp_basics() -> None:
    net = LogGP(L=5.0, o=1.0, g=3.0, G=0.5, P=8)
    assert net.message(1) == pytest.approx(1 + 0 + 5 + 1)
    assert net.message(11) == pytest.approx(1 + 5 + 5 + 1)
    assert net.interval(1) == 3.0 and net.interval(11) == pytest.approx(6.0)
    assert net.sends(3, 1) == pytest.approx(2 * 3 + 7)
    assert net.linear(1) == pytest.approx(6 * 3 + 7)
    assert net.binomial(1) == pytest.approx(3 * 7)
    assert net.ring_allgather(1) == pytest.approx(7 * 7)
    assert net.recursive_doubling_allgather(1) == pytest.approx(
        net.message(1) + net.message(2) + net.message(4))
    assert net.pairwise_alltoall(3) == pytest.approx(7 * net.message(3))
    assert LogGP(P=1).binomial(10) == 0.0


# ------------------------------------------------------------------- closed_form on networks
def test_seed_shapes() -> None:
    assert seed_shape(parse_topology("ring:8"), 8) == "ring"
    assert seed_shape(parse_topology("torus:8x1"), 8) == "ring"
    assert seed_shape(parse_topology("torus:4x4"), 16) == "torus"
    assert seed_shape(parse_topology("hypercube:3"), 8) == "hypercube"
    assert seed_shape(parse_topology("torus:2x2x2"), 8) == "hypercube"
    assert seed_shape(parse_topology("ring:8"), 7) is None
    assert seed_shape(parse_topology("mesh:4x4"), 16) is None
    assert seed_shape(parse_topology("torus:4x8"), 32) is None


def test_exact_cases_equal_the_seed_table() -> None:
    params = parse_topology("ring:8", overhead=2e-6, hop_latency=1e-7, bandwidth=1e9).params
    t_s, t_c = params.overhead + params.hop_latency, 1 / params.bandwidth
    ring = parse_topology("ring:8", params)
    assert closed_form("allgather", "ring", ring, 8, 1000) == pytest.approx(
        seed004("allgather", "ring", 8, 1000, t_s, t_c))
    cube = parse_topology("hypercube:4", params)
    assert closed_form("allgather", "recursive_doubling", cube, 16, 1000) == pytest.approx(
        seed004("allgather", "hypercube", 16, 1000, t_s, t_c))
    assert closed_form("alltoallv", "pairwise", cube, 16, 1000) == pytest.approx(
        seed004("alltoall", "hypercube", 16, 1000, params.overhead, t_c, params.hop_latency,
                switching="packet"))


def test_exact_cases_count_headers_and_packet_store_and_forward() -> None:
    ring = parse_topology("ring:4", packet_size=100, header_bytes=20, overhead=1.0,
                          hop_latency=0.5, bandwidth=1.0)
    # 250 bytes -> 4 packets of <= 80 payload bytes -> 330 wire bytes per step
    assert closed_form("allgather", "ring", ring, 4, 250) == pytest.approx(3 * (1.5 + 330))
    cube = parse_topology("hypercube:2", packet_size=100, overhead=1.0, hop_latency=0.5,
                          bandwidth=1.0)
    # rounds k = 1, 2 (one hop), 3 (two hops: one packet of 100 bytes stored on the way)
    cut = 3 * (1 + 50) + 4 * 0.5
    assert closed_form("alltoall", "pairwise", cube, 4, 50) == pytest.approx(cut)
    assert closed_form("alltoall", "pairwise", cube, 4, 50, switching="packet") == \
        pytest.approx(cut + 50)
    assert closed_form("alltoall", "pairwise", cube, 4, 500, switching="packet") == \
        pytest.approx(3 * (1 + 500) + 4 * 0.5 + 100)


def test_alpha_beta_fallback() -> None:
    torus = parse_topology("torus:4x4")
    assert exact_time("alltoall", "bruck", torus, 16, 64) is None
    # mean distance on a 4x4 torus: per dimension (0+1+2+1)/4 = 1, so 2 over all pairs,
    # and 32/15 over distinct pairs
    assert mean_hops(torus, 16) == pytest.approx(32 / 15)
    model = cost_model(torus, 16, 64)
    assert model.alpha == pytest.approx(torus.params.overhead + torus.params.hop_latency * 32 / 15)
    assert model.beta == pytest.approx(1 / torus.params.bandwidth)
    value = closed_form("alltoall", "bruck", torus, 16, 64)
    assert value is not None and value == alpha_beta("alltoall", "bruck", torus, 16, 64)
    assert value > 0
