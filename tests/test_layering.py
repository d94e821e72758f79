"""The layering of docs/design.md, enforced: which package may import which.

Arrows point down the table: algorithms never import the runtime or a transport, the
simulator never imports a transport, the transport interface knows nothing of collectives,
and a transport component (shm, mpi: a transport with its own collectives) sits below the
runtime that builds it. No module is exempt.
"""

from __future__ import annotations

import ast
from pathlib import Path

import collops

SRC = Path(collops.__file__).parent

BASE = {"errors", "datatypes", "ops"}
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "datatypes": {"errors"},
    "ops": {"errors", "datatypes"},
    "schedule": BASE,
    "algorithms": BASE | {"schedule"},
    "transport": {"errors"},
    "topology": {"errors"},
    "model": BASE | {"schedule", "algorithms", "topology"},
    "sim": BASE | {"schedule", "algorithms", "topology", "model"},
    # transport components: a transport with its memory layout, compiled code and its own
    # collectives (registered with the algorithms), below the runtime that builds them
    "shm": BASE | {"config", "compiled", "schedule", "algorithms", "transport"},
    "mpi": BASE | {"config", "schedule", "algorithms", "transport"},
    # runtime reads sim only for a network its user declared (COLLOPS_TOPOLOGY): the
    # simulated time of each eligible schedule there is selection's cost term
    "runtime": BASE | {"schedule", "algorithms", "transport", "config", "topology", "shm", "mpi",
                       "sim"},
    "compiled": {"errors", "config"},
    # users' algorithms: loading them, and checking any algorithm against numpy
    "plugins": {"errors", "msccl"},
    "msccl": BASE | {"schedule", "algorithms", "check"},
    "check": BASE | {"schedule", "algorithms"},
    # measuring the selection table on this machine
    "tune": BASE | {"algorithms", "bench", "config", "runtime", "transport", "version"},
    # pictures of a schedule, in steps or in simulated time
    "show": BASE | {"schedule", "algorithms", "sim", "topology"},
    # the report of `collops info` reads every layer
    "info": BASE | {"algorithms", "compiled", "config", "shm", "transport"},
    # mpi4py's MPI module over the public API of collops
    "facade": BASE | {"runtime", "transport", "config", "version"},
    "endpoints": BASE | {"schedule", "algorithms", "transport", "runtime", "config", "topology",
                         "sim", "model"},
}


def _imports(path: Path, package: str) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    depth_of_file = len(path.relative_to(SRC).parts) - 1
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                up = node.level - 1
                parts = list(path.relative_to(SRC).parts[:depth_of_file])
                base = parts[: len(parts) - up] if up else parts
                target = (base + (node.module.split(".") if node.module else []))
                if not target:
                    found.update(alias.name for alias in node.names)
                else:
                    found.add(target[0])
            elif node.module and node.module.startswith("collops."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("collops."):
                    found.add(alias.name.split(".")[1])
    return {f for f in found if f != package}


def test_packages_import_only_what_their_layer_allows():
    problems = []
    for package, allowed in ALLOWED.items():
        where = SRC / package
        files = [SRC / f"{package}.py"] if not where.is_dir() else sorted(where.rglob("*.py"))
        for path in files:
            if not path.exists():
                continue
            bad = _imports(path, package) - allowed
            if bad:
                problems.append(f"{path.relative_to(SRC)} imports {sorted(bad)}")
    assert not problems, "layering broken:\n" + "\n".join(problems)


def test_the_checker_sees_relative_imports():
    found = _imports(SRC / "runtime" / "engine.py", "runtime")
    assert {"schedule", "transport", "errors"} <= found


def _private_transport_uses(path: Path) -> list[str]:
    """``<name>._attr`` uses in ``path`` where ``<name>`` is a transport object."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__") and isinstance(node.value, ast.Name)
                and node.value.id in ("transport", "t")):
            found.append(f"{path.relative_to(SRC)}:{node.lineno} {node.value.id}.{node.attr}")
    return found


def test_native_collectives_use_only_the_transports_public_face():
    # the segment's layout, words and mapping belong to the transport (ARCHITECTURE.md): the
    # collectives of its component reach them through its areas and public properties only
    plug_ins = [SRC / "shm" / f"{n}.py" for n in ("direct", "cma", "stream")]
    problems = [use for path in plug_ins for use in _private_transport_uses(path)]
    assert not problems, "private transport state used:\n" + "\n".join(problems)


def test_the_private_use_checker_sees_them():
    sample = SRC / "shm" / "stream_area.py"  # the transport's own module does use them
    assert any("transport._layout" in use for use in _private_transport_uses(sample))
