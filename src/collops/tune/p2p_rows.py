"""The point-to-point rows the tuner times its job-wide settings on.

``pingpong`` is `collops bench`'s (one message in flight: its latency); ``burst`` is OSU's
bandwidth test: rank 0 posts `BURST` non-blocking sends to rank 1, which posts as many
non-blocking receives, both wait for all, and rank 1 answers with one small message. A burst
fills the pair's ring, so the cells per ring and the payload carried inline change it where a
ping-pong cannot show them. Its time is per message (the burst's over `BURST`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..bench.measure import POINT_TO_POINT as BENCH_POINT_TO_POINT
from ..bench.measure import collops_call, time_scale

#: messages in flight in one burst (OSU's window)
BURST = 64
#: the tuner's point-to-point rows: the benchmark's, then the burst
POINT_TO_POINT = (*BENCH_POINT_TO_POINT, "burst")
#: the burst's tags: the messages', then the answer's
_DATA_TAG, _ANSWER_TAG = 11, 12


def burst(comm: Any, send: np.ndarray, recv: np.ndarray) -> Callable[[], Any]:
    """One timed burst between ranks 0 and 1 (other ranks do nothing)."""
    answer = np.zeros(1)
    if comm.rank == 0:
        def sending() -> None:
            for r in [comm.isend(send, 1, _DATA_TAG) for _ in range(BURST)]:
                r.wait()
            comm.recv(answer, source=1, tag=_ANSWER_TAG)
        return sending
    if comm.rank == 1:
        def receiving() -> None:
            for r in [comm.irecv(recv, source=0, tag=_DATA_TAG) for _ in range(BURST)]:
                r.wait()
            comm.send(answer, 0, _ANSWER_TAG)
        return receiving
    return lambda: None


def row_call(comm: Any, row: str, send: np.ndarray, recv: np.ndarray) -> Callable[[], Any]:
    """A zero-argument call making one timed iteration of benchmark row ``row`` with the
    built-in choice of algorithm."""
    if row == "burst":
        return burst(comm, send, recv)
    return collops_call(comm, row, send, recv, None)


def row_scale(row: str, size: int) -> float:
    """What one timed iteration of ``row`` is of the time reported: a message of a burst, a
    one-way message of a ping-pong, else the call."""
    return 1.0 / BURST if row == "burst" else time_scale(row, size)
