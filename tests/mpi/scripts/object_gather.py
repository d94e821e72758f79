"""tests/runtime/test_object_gather's gathers on an MPI job of 3 ranks, checked against plain
Python on rank 0. Each rank prints ``{"rank": r}`` or ``{"rank": r, "error": "..."}``."""

import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import collops  # noqa: E402
from tests.runtime.test_object_gather import check, gathers  # noqa: E402

world = collops.init()
report: dict[str, object] = {"rank": world.rank}
try:
    for large in [(), (1,), (0, 2)]:
        mine = gathers(world, large)
        everyone = world.gather_object(mine, root=0)
        if world.rank == 0:
            check(everyone, large)
except Exception as exc:
    report["error"] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
print(json.dumps(report), flush=True)
