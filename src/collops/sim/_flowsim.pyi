"""Type stub of the flow model's compiled run (`collops.sim._flowsim`)."""

from typing import Any

def run(kind: Any, step_bytes: Any, step_rank: Any, succ_ptr: Any, succ_idx: Any, waiting: Any,
        msg_of_step: Any, send_of_msg: Any, recv_of_msg: Any, route_offsets: Any,
        route_links: Any, capacity: Any, latency: Any, wire: Any, msg_done: Any, rows: Any,
        counts: Any, nranks: int, window: int, overhead: float, bandwidth: float, gamma: float,
        send_kind: int, recv_kind: int, width: float, progress: Any, refill_all: bool = False,
        eps: float = 0.0, audit: bool = False, /) -> tuple[float, int, int, float, int, float]:
    """Run the program; returns (end time, steps run, rate updates, window width, flows
    re-filled, largest drift of a link's running rate sum seen by the audit), arrival times in
    ``msg_done``, per-window link bytes in ``rows``/``counts``; route links are int32, every
    other integer array int64; ``progress`` (or None) is called now and then with (steps run,
    steps, rate updates, flows re-filled) so far; ``audit`` recomputes every link's rate sum
    after every rate update (slow)."""
