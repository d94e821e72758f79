"""The endpoints section of ``collops demo``: seeds 001 and 003 in a few lines of output."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .endpoints import Client, DispatchError, Xfer
from .endpoints.affinity import compare_on_machine, format_comparison
from .runtime.world import spawn
from .topology.machine import Machine

TASKS, CONTEXTS = 2, 2


def _drive(client: Client, done: Callable[[], bool]) -> None:
    while not done():
        if not client.advance():
            client.wait_for_activity(0.001)


def _task(comm: Any) -> dict[str, Any]:
    """One task: two contexts, a geometry of all four endpoints, a few transfers."""
    client = Client("demo", comm)
    client.create_contexts(CONTEXTS)
    geometry = client.geometry(contexts=CONTEXTS, name="world")
    report: dict[str, Any] = {"lists": geometry.algorithms("allreduce").names()}
    ring = next(e for e in geometry.algorithms("allreduce").must_query if e.name == "ring")
    report["check"] = str(ring.check(Xfer("allreduce", "ring", np.ones(4), op="bor")))
    deliveries: list[str] = []

    def on_data(data: Any, info: Any) -> Any:
        if info.collective == "amreduce":
            return np.full(3, geometry.rank_of(info.endpoint) + 1.0)
        deliveries.append(f"endpoint {info.endpoint.key} got {info.collective} "
                          f"{np.asarray(data).tolist()}")
        if info.collective == "ambroadcast" and info.dispatch_id == 2 and info.endpoint.key \
                == (1, 1):
            raise RuntimeError("this endpoint refuses dispatch 2")
        return None

    for ctx in client.contexts:
        for coll in ("allreduce", "ambroadcast", "amreduce"):
            for dispatch_id in (1, 2):
                ctx.endpoint.register_dispatch(coll, dispatch_id, on_data)
    xfers = [geometry.post(Xfer("allreduce", None, np.array([geometry.rank_of(c.endpoint)]),
                                1), via=c.endpoint) for c in client.contexts]
    _drive(client, lambda: all(x.completed for x in xfers))
    if client.task == 0:
        root = client.contexts[0].endpoint
        geometry.post(Xfer("ambroadcast", "binomial", np.arange(4), 1), via=root).wait()
        total = geometry.post(Xfer("amreduce", None, np.ones(3), 1, op="sum"), via=root).wait()
        report["amreduce"] = total.tolist()
        try:
            geometry.post(Xfer("ambroadcast", None, np.arange(2), 2), via=root).wait()
        except DispatchError as exc:
            report["error"] = str(exc)
    _drive(client, lambda: len(deliveries) >= (4 if client.task == 0 else 6)
           and not client.pending())
    comm.barrier()
    report["deliveries"] = deliveries
    return report


def run_endpoints_demo(out: Callable[[str], Any] = print) -> int:
    """Print the endpoints demo; returns 0 when every check held."""
    reports = spawn(_task, TASKS, timeout=60)
    always, must_query = reports[0]["lists"]
    out(f"Seed 001 — {TASKS} tasks x {CONTEXTS} contexts = {TASKS * CONTEXTS} endpoints "
        "in one geometry")
    out(f"  allreduce, always works: {', '.join(always)}")
    out(f"  allreduce, must query:   {', '.join(must_query)}")
    out(f"  ring.check(allreduce with BOR on float64): {reports[0]['check']}")
    for line in sorted(line for report in reports for line in report["deliveries"]):
        out(f"  {line}")
    out(f"  amreduce at the root: {reports[0]['amreduce']}")
    out(f"  a raising dispatch callback, seen by the root: {reports[0].get('error')}")
    machine = Machine.parse("machine:4x8x2")
    out("Seed 003 — reduce of 64 KiB on machine:4x8x2, ranks spread over the modules:")
    rows = compare_on_machine("reduce", machine.spec, 65536, "spread")
    for line in format_comparison(rows, machine).splitlines():
        out("  " + line)
    by_name = {r.algorithm: r for r in rows}
    ok = (reports[0]["amreduce"] == [10.0] * 3 and "refuses" in str(reports[0].get("error"))
          and by_name["affinity_tree"].hierarchical_s < by_name["binomial"].hierarchical_s)
    return 0 if ok else 1
