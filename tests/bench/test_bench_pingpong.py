"""`collops bench --collectives pingpong`: point-to-point latency (half a round trip) and
bandwidth, beside mpi4py's ``Send``/``Recv`` ping-pong."""

from __future__ import annotations

from pathlib import Path

import pytest

from collops.bench.measure import pingpong, pingpong_rounds, time_scale
from tests.bench.test_bench_forms import _bench


def test_a_pingpong_iteration_is_rounds_of_send_then_receive_and_back() -> None:
    log: list[str] = []
    rounds = pingpong_rounds(8)
    pingpong(0, rounds, lambda: log.append("send"), lambda: log.append("recv"))()
    assert log == ["send", "recv"] * rounds
    log.clear()
    pingpong(1, rounds, lambda: log.append("send"), lambda: log.append("recv"))()
    assert log == ["recv", "send"] * rounds
    assert time_scale("pingpong", 8) == 1 / (2 * rounds)
    assert time_scale("allreduce", 8) == 1.0


@pytest.mark.timeout(420)
def test_pingpong_rows_with_mpi_beside(tmp_path: Path) -> None:
    rows = _bench("-n", "2", "--collectives", "pingpong", "--sizes", "8,64K",
                  "--iterations", "5", "--compare", "mpich", tmp=tmp_path)
    assert [(r["collective"], r["size"], r["algorithm"]) for r in rows] == [
        ("pingpong", 8, "p2p"), ("pingpong", 65536, "p2p")]
    for r in rows:
        assert r["latency_us"] > 0 and r["mpi_latency_us"] > 0 and r["ratio"] > 0
        assert r["algbw_GBps"] > 0
