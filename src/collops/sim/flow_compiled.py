"""The flow model's compiled run: the whole event loop of `collops.sim.flow` in C.

`collops.sim._flowsim` (built with the package when a C compiler is at hand) takes the
program's steps and messages and the network's routes as arrays and runs the model exactly
as `collops.sim.flow.FlowSimulation` does — the same events in the same order, the same
windows and CPUs — with two changes that only change the cost: a flow's finish time is kept
in a heap and renewed only when its rate changes, and after flows start or end the max-min
rates are repaired locally (the flows that may change are re-filled, the result checked
against the definition of max-min fairness and the set widened until it holds) instead of
re-filled over every flow in the network. The tests hold it to the Python run on random
programs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from ..schedule import StepKind
from .flow import FlowOutcome, flow_network
from .program import Program
from .timeline import WINDOWS, LinkTimeline

try:
    from . import _flowsim as _compiled
except ImportError:  # built without a C compiler: the Python run
    _compiled = None  # type: ignore[assignment]


def available() -> bool:
    """Whether the compiled run was built."""
    return _compiled is not None


def _int64(array: np.ndarray | None) -> np.ndarray:
    if array is None:
        raise ValueError("the event-driven models need a program built from schedules")
    return np.ascontiguousarray(array, dtype=np.int64)


def run(program: Program, topology: object, placement: np.ndarray, *,
        excluded: Iterable[int] = frozenset(), gamma: float = 0.0, window: int = 0,
        progress: Callable[[int, int], None] | None = None,
        local_repair: bool = True, maxmin_eps: float = 0.0,
        repair_log: Callable[[int, int, int], None] | None = None,
        sum_drift: list[float] | None = None) -> FlowOutcome:
    """Run the flow model compiled (as `collops.sim.flow.flow_model`); ``local_repair=False``
    re-fills every flow's rate at every change (the reference for the local repair);
    ``maxmin_eps`` > 0 repairs max-min approximately (`collops.sim.flow.parse_maxmin`);
    ``repair_log`` is called during the run and at its end with (steps run, rate updates,
    flows re-filled) so far, the repair's cost as it goes; given a list, ``sum_drift`` gets the
    largest difference, relative to the link's capacity, between a link's running sum of its
    flows' rates and the sum recomputed from scratch after every rate update (slow: a test's)."""
    if _compiled is None:
        raise RuntimeError("collops.sim._flowsim was not built")
    if window < 0:
        raise ValueError(f"window must be >= 0, not {window}")
    if not 0.0 <= maxmin_eps < 1.0:
        raise ValueError(f"maxmin_eps must be in [0, 1), not {maxmin_eps}")
    params = topology.params  # type: ignore[attr-defined]
    net = flow_network(program, topology, placement, excluded)
    kind = _int64(program.step_kind)
    send_steps, recv_steps = _int64(program.msg_send_step), _int64(program.msg_recv_step)
    waiting = _int64(program.local_preds).copy()
    waiting[recv_steps] += 1  # a receive also waits for its message
    msg_of_step = np.full(len(kind), -1, dtype=np.int64)
    msg_of_step[send_steps] = np.arange(len(send_steps))
    timeline = LinkTimeline(len(net.capacity), WINDOWS)
    msg_done = np.zeros(program.num_messages)

    def report(done: int, total: int, updates: int, refilled: int) -> None:
        if progress is not None:
            progress(done, total)
        if repair_log is not None:
            repair_log(done, updates, refilled)

    quiet = progress is None and repair_log is None
    finished, steps_done, rate_updates, width, refilled, drift = _compiled.run(
        kind, _int64(program.step_bytes), _int64(program.step_rank), _int64(program.succ_ptr),
        _int64(program.succ_idx), waiting, msg_of_step, send_steps, recv_steps,
        net.route_offsets, np.ascontiguousarray(net.route_links, dtype=np.int32), net.capacity,
        np.ascontiguousarray(net.route_latency, dtype=np.float64), net.wire, msg_done,
        timeline.rows, timeline.counts, program.nranks, int(window), float(params.overhead),
        float(params.bandwidth), float(gamma), int(StepKind.SEND), int(StepKind.RECV),
        timeline.width, None if quiet else report, not local_repair, float(maxmin_eps),
        sum_drift is not None)
    if sum_drift is not None:
        sum_drift.append(drift)
    if repair_log is not None:
        repair_log(steps_done, rate_updates, refilled)  # the last report: the whole run
    if steps_done != len(kind):
        raise RuntimeError(f"flow model stalled: {len(kind) - steps_done} steps never ran")
    timeline.width = width
    return FlowOutcome(finished, net.link_loads, msg_done, rate_updates,
                       timeline.stats(finished), refilled)
