"""Protocol settings the tuner times: each a value of a selection-table setting that a call
reads when it is prepared, tried with the default algorithm in a tuning file of its own.

Only settings read per call can be switched within a job; the shared-memory transport's own
thresholds (``protocols.shm.*``: single copy, the split) are fixed when a job's transport
starts, so they are timed with a job per value (`jobs`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..algorithms import tuning
from ..algorithms.spec import CallSpec


@dataclass(frozen=True)
class Knob:
    """A protocol setting ``component.name`` and the values to try where the default
    algorithm is ``algorithm`` (``None``: whatever it is), for the ``collectives`` it
    changes (``None``: every one)."""

    component: str
    name: str
    values: tuple[Any, ...]
    algorithm: str | None
    collectives: frozenset[str] | None = None

    @property
    def key(self) -> str:
        """``component.name``, as a `Timing.setting` names it."""
        return f"{self.component}.{self.name}"


#: the settings tried by default: blocks by reference or through the ring, non-temporal
#: stores into the receive buffer from the first byte, a reduction's folding ranks folding
#: as they read or after, the size of a folding rank's reads
KNOBS: tuple[Knob, ...] = (
    Knob("shm_stream", "by_reference", (True, False), "shm_stream"),
    Knob("shm_stream", "fold_as_read", (True, False), "shm_stream",
         frozenset({"reduce", "reduce_scatter_block", "allreduce"})),
    Knob("shm_stream", "streaming_stores_from", (0,), "shm_stream"),
    Knob("shm_cma", "scratch_bytes", (262144, 1048576, 4194304), "shm_cma"),
)


def in_force(knob: Knob, spec: CallSpec) -> Any:
    """The value of ``knob`` the built-in table gives ``spec``."""
    return tuning.setting(knob.component, knob.name, spec).value


def alternatives(knobs: Sequence[Knob], spec: CallSpec, default: str
                 ) -> list[tuple[Knob, Any]]:
    """The (knob, value) pairs to time for ``spec`` whose default algorithm is ``default``:
    every value other than the one in force."""
    out = []
    for knob in knobs:
        if knob.algorithm not in (None, default) or (
                knob.collectives is not None and spec.collective not in knob.collectives):
            continue
        try:
            current = in_force(knob, spec)
        except KeyError:
            continue
        out += [(knob, v) for v in knob.values if v != current]
    return out


def setting_rule(component: str, name: str, value: Any, collective: str, ranks: int,
                 low: int, high: int | None) -> list[str]:
    """The lines of one protocol rule for ``collective`` on ``ranks`` ranks, message bytes
    ``low``–``high`` (``None``: no end)."""
    lines = [f"[[protocols.{component}.{name}]]", f"collective = {toml_value(collective)}",
             f"min_ranks = {ranks}", f"max_ranks = {ranks}", f"min_bytes = {low}"]
    if high is not None:
        lines.append(f"max_bytes = {high}")
    return lines + [f"value = {toml_value(value)}"]


def toml_value(v: Any) -> str:
    """A TOML value (strings as JSON strings, which TOML reads the same)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return json.dumps(str(v), ensure_ascii=False)


#: open `Scratch` instances per directory: the ranks of a job of threads share one, removed
#: when the last closes (one rank removing it under the others raced with their next files)
_SCRATCH_USERS: dict[Path, int] = {}
_SCRATCH_LOCK = threading.Lock()


class Scratch:
    """Tuning files written for the candidates of one process (shared by its ranks), removed
    once every instance of the process has called `close`."""

    def __init__(self) -> None:
        self.root = Path(tempfile.gettempdir()) / f"collops-tune-{os.getpid()}"
        self._open = True
        with _SCRATCH_LOCK:
            self.root.mkdir(exist_ok=True)
            _SCRATCH_USERS[self.root] = _SCRATCH_USERS.get(self.root, 0) + 1

    def write(self, text: str) -> str:
        """A file holding ``text`` (one per distinct text; the same for every rank of the
        process); its path."""
        path = self.root / (hashlib.sha1(text.encode()).hexdigest()[:16] + ".toml")
        if not path.exists():
            part = path.with_suffix(f".{os.getpid()}.{id(text)}.part")
            part.write_text(text)
            part.replace(path)
        return str(path)

    def close(self) -> None:
        """Remove the files, if no other instance of this process still uses them."""
        with _SCRATCH_LOCK:
            if not self._open:
                return
            self._open = False
            _SCRATCH_USERS[self.root] -= 1
            if _SCRATCH_USERS[self.root] == 0:
                del _SCRATCH_USERS[self.root]
                shutil.rmtree(self.root, ignore_errors=True)
