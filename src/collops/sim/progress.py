"""An optional progress bar for long simulations (tqdm, else rich, else plain stderr text).

Neither library is a dependency: whichever is importable is used. Nothing is shown for the
first ``delay`` seconds, so short runs stay silent, nor when stderr is not a terminal (unless
forced: ``enabled=True``, ``collops sim --progress on``). The simulators report
``update(done, total)`` as they go — schedules built, rounds of the congestion model, steps of
the packet model — and the bar is removed when the run ends.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Update = Callable[[int, int], None]


@contextmanager
def progress_bar(description: str, enabled: bool | None = None,
                 delay: float = 2.0) -> Iterator[Update]:
    """A context yielding ``update(done, total)``; draws a bar once ``delay`` s have passed."""
    show = sys.stderr.isatty() if enabled is None else enabled
    started = time.monotonic()
    state: dict[str, Any] = {"bar": None, "kind": None}

    def update(done: int, total: int) -> None:
        if not show or time.monotonic() - started < delay:
            return
        if state["kind"] is None:
            state["kind"], state["bar"] = _open(description, total)
        _draw(state["kind"], state["bar"], done, total, description)

    try:
        yield update
    finally:
        if state["kind"] is not None:
            _close(state["kind"], state["bar"])


def _open(description: str, total: int) -> tuple[str, Any]:
    try:
        from tqdm import tqdm  # type: ignore[import-untyped]
        return "tqdm", tqdm(total=total, desc=description, file=sys.stderr, leave=False)
    except ImportError:
        pass
    try:
        from rich.progress import Progress
        bar = Progress(transient=True)
        bar.start()
        return "rich", (bar, bar.add_task(description, total=total))
    except ImportError:
        return "text", None


def _draw(kind: str, bar: Any, done: int, total: int, description: str) -> None:
    if kind == "tqdm":
        bar.total = total
        bar.n = done
        bar.refresh()
    elif kind == "rich":
        progress, task = bar
        progress.update(task, completed=done, total=total)
    else:
        percent = 100.0 * done / total if total else 100.0
        sys.stderr.write(f"\r{description}: {percent:5.1f}%")
        sys.stderr.flush()


def _close(kind: str, bar: Any) -> None:
    if kind == "tqdm":
        bar.close()
    elif kind == "rich":
        bar[0].stop()
    else:
        sys.stderr.write("\n")
