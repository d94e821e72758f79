"""The flow model: max-min fair sharing re-computed as flows start and end, windows, orders.

Expected times are derived here from first principles (T = m / bandwidth for one message
alone on its links); overhead, hop latency and local copies are zero unless a test says
otherwise, so a time is a sum of transfer phases.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from collops.algorithms import get_algorithm
from collops.algorithms.alltoall import linear_destinations
from collops.errors import ArgumentError
from collops.schedule import RECV as RECV_AREA
from collops.schedule import SEND, ScheduleBuilder, StepKind
from collops.sim import simulate, simulate_schedules
from collops.sim.api import call_specs
from collops.sim.maxmin import max_min_rates, max_min_rates_of_routes
from collops.topology import NetworkParams, parse_topology

B = 2e9
QUIET = NetworkParams(bandwidth=B, hop_latency=0.0, overhead=0.0)
ALPHA = 1e-6
WITH_OVERHEAD = NetworkParams(bandwidth=B, hop_latency=0.0, overhead=ALPHA)
BOTH = [True, False]  # the compiled progressive filling and the numpy one


# -- max-min rates ---------------------------------------------------------------------------
@pytest.mark.parametrize("compiled", BOTH)
def test_two_flows_on_one_link_get_half_each(compiled: bool) -> None:
    rates = max_min_rates(np.array([0, 1]), np.array([0, 0]), 2, np.array([B]), compiled)
    np.testing.assert_allclose(rates, [B / 2, B / 2])


@pytest.mark.parametrize("compiled", BOTH)
def test_textbook_three_flows_with_a_bottleneck_elsewhere(compiled: bool) -> None:
    """Links L0 (capacity 1) and L1 (capacity 2); flow a crosses both, b only L0, c only L1.

    Progressive filling raises a, b and c together. L0 carries a and b, so it is full when
    they reach 1/2; L1 carries a and c and would be full only at 1. So L0 is the bottleneck:
    a = b = 1/2 and they freeze. c alone goes on over L1, which has 2 − 1/2 = 3/2 left:
    c = 3/2. (Equal shares, 2/3 each on L1, would waste L1: max-min gives c what a cannot use.)
    """
    flow, link = np.array([0, 0, 1, 2]), np.array([0, 1, 0, 1])
    rates = max_min_rates(flow, link, 3, np.array([1.0, 2.0]), compiled)
    np.testing.assert_allclose(rates, [0.5, 0.5, 1.5])


@pytest.mark.parametrize("compiled", BOTH)
def test_flow_without_links_is_unbounded(compiled: bool) -> None:
    rates = max_min_rates(np.array([1]), np.array([0]), 2, np.array([4.0]), compiled)
    assert rates[0] == math.inf and rates[1] == 4.0


def test_compiled_and_numpy_agree_on_random_instances() -> None:
    rng = np.random.default_rng(5)
    for _ in range(20):
        nflows, nlinks = 40, 12
        hops = rng.integers(1, 4, nflows)
        flow = np.repeat(np.arange(nflows), hops)
        link = rng.integers(0, nlinks, len(flow))
        capacity = rng.uniform(1.0, 5.0, nlinks)
        np.testing.assert_allclose(max_min_rates(flow, link, nflows, capacity, True),
                                   max_min_rates(flow, link, nflows, capacity, False))


def test_compiled_heap_order_agrees_with_numpy_rounds_over_routes() -> None:
    """The compiled filling over routes (links in heap order) and the numpy rounds give the
    same rates on random routes, flows without links included."""
    rng = np.random.default_rng(11)
    for _ in range(20):
        nmsgs, nlinks = 60, 15
        hops = rng.integers(0, 5, nmsgs)
        offsets = np.r_[0, np.cumsum(hops)]
        links = rng.integers(0, nlinks, int(offsets[-1]))
        capacity = rng.uniform(1.0, 5.0, nlinks)
        messages = rng.choice(nmsgs, 40, replace=False)
        heap = max_min_rates_of_routes(messages, offsets, links, capacity, 9.0, compiled=True)
        rounds = max_min_rates_of_routes(messages, offsets, links, capacity, 9.0,
                                         compiled=False)
        np.testing.assert_allclose(heap, rounds, rtol=1e-9)
        assert np.all(heap[hops[messages] == 0] == 9.0)


# -- flows that start and end ----------------------------------------------------------------
def _messages(p: int, sends: list[tuple[int, int, int]]) -> list:
    """Per-rank schedules: every (src, dst, bytes) posted at once, receives upfront."""
    out_bytes = [sum(n for s, _, n in sends if s == r) for r in range(p)]
    in_bytes = [sum(n for _, d, n in sends if d == r) for r in range(p)]
    schedules = []
    for r in range(p):
        b = ScheduleBuilder(r, p, send=out_bytes[r], recv=in_bytes[r])
        at_in = at_out = 0
        for s, d, n in sends:
            if d == r:
                b.recv(s, RECV_AREA(at_in, n))
                at_in += n
            if s == r:
                b.send(d, SEND(at_out, n))
                at_out += n
        schedules.append(b.build())
    return schedules


def test_sharing_is_recomputed_when_a_flow_ends() -> None:
    """On switch:3 ranks 0 and 1 send m and m/2 to rank 2: both at B/2 over 2's down-link
    until the short one is done at m/B (m/2 sent at B/2); the long one then has m/2 left
    at B: it ends at m/B + m/(2B) = 1.5 m/B."""
    m = 1 << 20
    r = simulate_schedules(_messages(3, [(0, 2, m), (1, 2, m // 2)]),
                           parse_topology("switch:3", QUIET), model="flow")
    assert r.time_s == pytest.approx(1.5 * m / B, rel=1e-9)


def test_one_message_pays_overhead_bandwidth_and_every_hop() -> None:
    params = NetworkParams(bandwidth=B, hop_latency=5e-8, overhead=ALPHA)
    m = 4096
    r = simulate_schedules(_messages(8, [(0, 3, m)]), parse_topology("ring:8", params),
                           model="flow")
    assert r.time_s == pytest.approx(ALPHA + m / B + 3 * 5e-8, rel=1e-9)


# -- contention-free: the closed forms -------------------------------------------------------
@pytest.mark.parametrize("p", [4, 8, 13])
def test_ring_allgather_on_ring(p: int) -> None:
    m = 32768
    r = simulate("allgather", "ring", parse_topology(f"ring:{p}", WITH_OVERHEAD),
                 size_bytes=m, model="flow", gamma=0.0)
    assert r.time_s == pytest.approx((p - 1) * (ALPHA + m / B), rel=0.01)


@pytest.mark.parametrize("dim", [2, 3, 4])
def test_recursive_doubling_allgather_on_hypercube(dim: int) -> None:
    p, m = 2 ** dim, 8192
    r = simulate("allgather", "recursive_doubling", parse_topology(f"hypercube:{dim}",
                 WITH_OVERHEAD), size_bytes=m, model="flow", gamma=0.0)
    assert r.time_s == pytest.approx(dim * ALPHA + (p - 1) * m / B, rel=0.01)


@pytest.mark.parametrize("topology", ["ring:16", "switch:16", "ring:11", "switch:6"])
def test_binomial_bcast_one_send_at_a_time(topology: str) -> None:
    """With one send in flight per rank a rank serves its subtrees one after another, as the
    closed form ⌈log2 p⌉(α + m/B) counts; the subtrees' transfers use disjoint links."""
    m = 65536
    topo = parse_topology(topology, WITH_OVERHEAD)
    p = topo.num_compute_nodes
    r = simulate("bcast", "binomial", topo, size_bytes=m, model="flow", gamma=0.0, window=1)
    assert r.time_s == pytest.approx(math.ceil(math.log2(p)) * (ALPHA + m / B), rel=0.01)


def test_binomial_bcast_all_posted_shares_the_root_link() -> None:
    """Window 0 on switch:16: the root's 4 sends share its up-link and all end at 4T. Then
    rank 8 sends 3 (to 12, 10, 9: ends 7T), rank 4 two (6T), rank 2 one (5T); rank 12, served
    at 7T, sends 2 (9T), and rank 14, served at 9T, sends to 15: 10T = (4+3+2+1)T, 2.5 times
    the closed form's 4T."""
    m = 65536
    r = simulate("bcast", "binomial", parse_topology("switch:16", QUIET), size_bytes=m,
                 model="flow", gamma=0.0, window=0)
    assert r.time_s == pytest.approx(10 * m / B, rel=1e-9)


# -- windows ---------------------------------------------------------------------------------
def test_window_one_differs_from_all_posted() -> None:
    """alltoall, plain order, on switch:3 (T = m/B).

    Window 0: all six flows at once; every up- and down-link carries two: B/2 each, 2T.
    Window 1: first 0→1, 1→0, 2→0. 0→1 is alone on its links (done at T); 1→0 and 2→0 share
    0's down-link at B/2. At T rank 0 issues 0→2 (alone: done at 2T), and 1→0, 2→0 finish at
    2T. Then 1→2 and 2→1, disjoint: 3T.
    """
    m = 65536
    topo = parse_topology("switch:3", QUIET)
    t = m / B
    run = {w: simulate("alltoall", "linear", topo, size_bytes=m, model="flow", gamma=0.0,
                       params={"order": "plain"}, window=w).time_s for w in (0, 1)}
    assert run[0] == pytest.approx(2 * t, rel=1e-9)
    assert run[1] == pytest.approx(3 * t, rel=1e-9)


def test_all_posted_alltoall_takes_the_busiest_link() -> None:
    """Everything posted at once (no overhead, no latency): the busiest link carries L_max
    bytes and, all links being busy until the end under max-min, the exchange takes
    L_max / B (the closed form L_max·M/B), within 0.1 %."""
    m = 16384
    topo = parse_topology("torus:4x4", QUIET)
    p = 16
    src = np.repeat(np.arange(p), p - 1)
    dst = np.concatenate([[d for d in range(p) if d != r] for r in range(p)])
    offsets, links = topo.routes(src, dst)
    l_max = np.bincount(links, minlength=topo.num_links).max() * m
    for order in ("shift", "plain", "random"):
        r = simulate("alltoall", "linear", topo, size_bytes=m, model="flow", gamma=0.0,
                     params={"order": order}, window=0)
        assert r.time_s == pytest.approx(l_max / B, rel=1e-3), order


def test_throttle_is_the_window() -> None:
    topo = parse_topology("torus:3x3", QUIET)
    for model in ("flow", "congestion"):
        throttled = simulate("alltoall", "linear", topo, size_bytes=8192, model=model,
                             params={"throttle": 2, "order": "plain"})
        windowed = simulate("alltoall", "linear", topo, size_bytes=8192, model=model,
                            params={"order": "plain"}, window=2)
        assert throttled.time_s == pytest.approx(windowed.time_s, rel=1e-12), model
    unlimited = simulate("alltoall", "linear", topo, size_bytes=8192, model="flow",
                         params={"order": "plain"})
    assert unlimited.time_s < throttled.time_s


def test_throttle_and_a_different_window_are_rejected() -> None:
    with pytest.raises(ArgumentError, match="throttle"):
        simulate("alltoall", "linear", "ring:4", size_bytes=64, model="flow",
                 params={"throttle": 2}, window=3)


def test_congestion_window_sets_the_slot_width() -> None:
    """Plain order on switch:4 (T = m/B, no overhead). Window 1: slot k holds every rank's
    k-th message, each slot as long as its busiest down-link. Slot 0: 1→0, 2→0, 3→0 (and
    0→1): 3T. Slot 1: 0→2, 1→2 and 2→1, 3→1: 2T. Slot 2: 0→3, 1→3, 2→3 (and 3→2): 3T.
    8T in all. Window 0: one round, every link carries 3 messages: 3T."""
    m = 65536
    topo = parse_topology("switch:4", QUIET)
    times = {w: simulate("alltoall", "linear", topo, size_bytes=m, model="congestion",
                         gamma=0.0, params={"order": "plain"}, window=w).time_s
             for w in (0, 1)}
    assert times[0] == pytest.approx(3 * m / B)
    assert times[1] == pytest.approx(8 * m / B)


# -- orders ----------------------------------------------------------------------------------
def _send_peers(p: int, params: dict) -> list[list[int]]:
    alg = get_algorithm("alltoall", "linear")
    out = []
    for sched in alg.build_all(call_specs("alltoall", p, 4), params):
        sends = np.flatnonzero(sched.kind == StepKind.SEND)
        out.append(sched.peer[sends].tolist())
    return out


@pytest.mark.parametrize("p", [2, 5, 8])
def test_orders_send_where_they_say(p: int) -> None:
    ranks = np.arange(p)
    shift = np.array(_send_peers(p, {"order": "shift"}))
    np.testing.assert_array_equal(shift, (ranks[:, None] + np.arange(1, p)[None, :]) % p)
    plain = _send_peers(p, {"order": "plain"})
    assert plain == _send_peers(p, {"rank_order": 1})
    for r in range(p):
        np.testing.assert_array_equal(plain[r], np.delete(ranks, r))
    random = _send_peers(p, {"order": "random", "seed": 7})
    for r in range(p):  # a permutation of the other ranks
        np.testing.assert_array_equal(np.sort(random[r]), np.delete(ranks, r))
        assert random[r] == linear_destinations(r, p, "random", 7)
    assert random == _send_peers(p, {"order": "random", "seed": 7})


def test_random_order_depends_on_rank_and_seed() -> None:
    p = 16
    first = _send_peers(p, {"order": "random", "seed": 1})
    other = _send_peers(p, {"order": "random", "seed": 2})
    assert first != other
    assert len({tuple(np.subtract(peers, r) % p) for r, peers in enumerate(first)}) > 1


def test_unknown_order_is_an_error() -> None:
    with pytest.raises(ArgumentError, match="order"):
        simulate("alltoall", "linear", "ring:4", size_bytes=64, params={"order": "sideways"})
    with pytest.raises(ArgumentError, match="rank_order"):
        simulate("alltoall", "linear", "ring:4", size_bytes=64,
                 params={"order": "random", "rank_order": 1})


def test_command_line_flow_model_with_a_window(capsys) -> None:
    from collops.cli import main
    argv = ["sim", "--collective", "alltoall", "--topology", "switch:3", "--size", "64K",
            "--algorithm", "linear:order=plain", "--model", "flow", "--gamma", "0",
            "--net", "overhead=0,hop_latency=0"]
    assert main([*argv, "--window", "1"]) == 0
    out = capsys.readouterr().out
    assert "flow model, window 1" in out
    assert "98.304 us" in out  # 3T, T = 65536 B / 2 GB/s (test_window_one_differs_…)
    assert main(argv) == 0
    assert "65.536 us" in capsys.readouterr().out  # all posted: 2T


def test_flow_model_without_the_compiled_filling(monkeypatch) -> None:
    """Without the compiled run and the compiled filling, the Python run with the numpy
    filling gives the same times."""
    import collops.sim.flow_compiled as flow_compiled
    import collops.sim.maxmin as maxmin
    topo = parse_topology("torus:3x3", WITH_OVERHEAD)
    args = dict(size_bytes=4096, model="flow", params={"order": "random"}, window=2)
    compiled = simulate("alltoall", "linear", topo, **args).time_s
    monkeypatch.setattr(flow_compiled, "_compiled", None)
    monkeypatch.setattr(maxmin, "_compiled", None)
    assert simulate("alltoall", "linear", topo, **args).time_s == pytest.approx(compiled,
                                                                                rel=1e-9)


def _schedule_algorithms(p: int) -> list[tuple[str, str]]:
    """Every registered schedule (not native, not combined in switches) that takes p ranks."""
    from collops.algorithms import all_algorithms
    return [(a.collective, a.name) for a in all_algorithms()
            if a.native is None and "in_network_reduction" not in a.resources | a.needs
            and a.eligible(call_specs(a.collective, p, 1024)[0])]


@pytest.mark.parametrize("collective,algorithm", _schedule_algorithms(8))
def test_every_schedule_algorithm_runs_and_respects_the_link_bound(
        collective: str, algorithm: str) -> None:
    """Every registered schedule completes in the flow model (no step left waiting), moves
    the bytes the congestion model routes, and takes at least as long as its busiest link
    needs at full bandwidth (no link carries more than B)."""
    topo = parse_topology("torus:2x4", WITH_OVERHEAD)
    flow = simulate(collective, algorithm, topo, size_bytes=1024, model="flow", gamma=0.0,
                    window=1)
    rounds = simulate(collective, algorithm, topo, size_bytes=1024, model="congestion",
                      gamma=0.0, fast=False)
    np.testing.assert_allclose(flow.link_loads, rounds.link_loads)
    assert flow.time_s >= flow.max_link_load_bytes / B * (1 - 1e-12)


def test_empty_messages_arrive_after_their_latency() -> None:
    params = NetworkParams(bandwidth=B, hop_latency=1e-7, overhead=0.0)
    r = simulate_schedules(_messages(4, [(0, 2, 0), (1, 3, 0)]), parse_topology("ring:4", params),
                           model="flow")
    assert r.time_s == pytest.approx(2e-7, rel=1e-9)
