"""The machine hierarchy: hardware threads → cores → modules → node (seed 003).

A `Machine` is a value: its *shape*, factors outermost first (``machine:2x4x2`` is 2 modules
× 4 cores × 2 hardware threads), and per level the latency and bandwidth of a transfer that
must cross that level (threads of one core talk through the core's caches; cores of one
module through the module's shared cache or ring; modules through the socket interconnect).
Hardware thread ``h`` has mixed-radix coordinates ``(module, core, thread)``.

`detect_machine` reads the real machine from ``/sys/devices/system/cpu/*/topology``
(package and core ids) and ``/sys/devices/system/node`` (NUMA nodes), and `bound_cpu` tells
which CPU a process is pinned to (``os.sched_getaffinity``); virtual machines let multi-level
hierarchies be run and tested on a 2-core laptop.

`MachineNetwork` is the machine as a `Topology` the simulator reads: the hardware threads
are compute nodes, each core, module and the node are switches, and a message climbs to the
lowest level its two threads share. Every link knows its level (``link_level``) and carries
that level's bandwidth (``link_bandwidth``) and a share of its latency (``link_latency``),
split so that a route crossing level L — up L links, down L links — adds up to exactly
level L's latency: a link of level j has half the step from level j−1's latency to level
j's (levels are taken as at least as slow as the ones below them). The simulator's models read
these per-link values, so a simulated message between two threads pays the latency and
bandwidth of the level it crosses, as in `hierarchical_time`; the uniform `NetworkParams`
(for the closed-form models) are the outermost level's. `hierarchical_time` is the α-β time
of a levelled message program on the machine with per-level α and β — the numbers that show
what affinity-shaped collectives save.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ArgumentError
from .base import NetworkParams, Topology

_CALL = "machine"


@dataclass(frozen=True)
class LevelParams:
    """Latency (s) and bandwidth (B/s) of a transfer crossing one level of the hierarchy."""

    latency: float
    bandwidth: float


#: Illustrative defaults, innermost first: the order of magnitude of published core-to-core
#: latencies on current servers (same core ~20 ns, same socket ~60 ns, across sockets
#: ~150 ns) and of their cache / interconnect bandwidths; across nodes, a fast network.
#: They are not measured here; pass your own `LevelParams` for a real machine.
DEFAULT_LEVELS = (
    LevelParams(20e-9, 50e9),    # core: threads sharing a core's caches
    LevelParams(60e-9, 25e9),    # module: cores sharing a chip's last-level cache
    LevelParams(150e-9, 10e9),   # node: modules joined by the socket interconnect
    LevelParams(1.5e-6, 5e9),    # system: nodes joined by a network
)
LEVEL_NAMES = ("core", "module", "node", "system")


def parse_machine_shape(spec: str) -> tuple[int, ...]:
    """``"machine:2x4x2"`` (or ``"2x4x2"``) → (2, 4, 2), factors outermost first."""
    body = str(spec).strip()
    if body.lower().startswith("machine:"):
        body = body[len("machine:"):]
    try:
        shape = tuple(int(f) for f in body.lower().split("x"))
    except ValueError:
        raise ArgumentError(_CALL, "spec", spec, "expected machine:AxBxC (modules x cores x "
                            "threads), factors outermost first") from None
    if not shape or min(shape) < 1:
        raise ArgumentError(_CALL, "spec", spec, "every factor must be >= 1")
    return shape


@dataclass(frozen=True)
class Machine:
    """A hierarchy of hardware threads with per-level latency and bandwidth (a value)."""

    shape: tuple[int, ...]
    levels: tuple[LevelParams, ...] = DEFAULT_LEVELS

    def __post_init__(self) -> None:
        shape = tuple(int(f) for f in self.shape)
        if not shape or min(shape) < 1:
            raise ArgumentError(_CALL, "shape", self.shape, "every factor must be >= 1")
        object.__setattr__(self, "shape", shape)
        if len(self.levels) < len(shape):
            raise ArgumentError(_CALL, "levels", len(self.levels),
                                f"need one LevelParams per factor ({len(shape)})")

    @classmethod
    def parse(cls, spec: str, levels: tuple[LevelParams, ...] = DEFAULT_LEVELS) -> Machine:
        """A machine from ``machine:2x4x2``."""
        return cls(parse_machine_shape(spec), levels)

    @property
    def spec(self) -> str:
        """The machine as a spec string (``machine:2x4x2``)."""
        return "machine:" + "x".join(map(str, self.shape))

    def __str__(self) -> str:
        return self.spec

    @property
    def threads(self) -> int:
        """Number of hardware threads."""
        return int(np.prod(self.shape))

    def level_names(self) -> tuple[str, ...]:
        """Names of the crossing levels, innermost first (core, module, node, …)."""
        names = list(LEVEL_NAMES[: len(self.shape)])
        return tuple(names + [f"level{i + 1}" for i in range(len(names), len(self.shape))])

    def coordinates(self, thread: int) -> tuple[int, ...]:
        """Mixed-radix coordinates of a hardware thread, outermost first."""
        digits = []
        for f in reversed(self.shape):
            digits.append(thread % f)
            thread //= f
        return tuple(reversed(digits))

    def span(self, level: int) -> int:
        """Hardware threads in one domain of ``level`` (0: one thread; len(shape): all)."""
        return int(np.prod(self.shape[len(self.shape) - level:])) if level else 1

    def crossing_level(self, a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
        """The lowest level whose domain holds both threads (0: the same thread)."""
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        level = np.zeros(np.broadcast(a, b).shape, dtype=np.int64)
        for j in range(len(self.shape)):
            level += (a // self.span(j)) != (b // self.span(j))
        return level

    def domains(self, threads: list[int] | tuple[int, ...]) -> list[list[list[int]]]:
        """Per level (1 = core, …), the ranks of every domain, for ranks bound to ``threads``."""
        out = []
        for level in range(1, len(self.shape) + 1):
            groups: dict[int, list[int]] = {}
            for rank, t in enumerate(threads):
                groups.setdefault(int(t) // self.span(level), []).append(rank)
            out.append([groups[k] for k in sorted(groups)])
        return out

    def network(self) -> MachineNetwork:
        """The machine as a simulator topology."""
        return MachineNetwork(self)


def level_link_params(machine: Machine) -> tuple[np.ndarray, np.ndarray]:
    """Bandwidth and latency of one link of every level (index 0 unused, 1 = core, …).

    A link of level j carries level j's bandwidth and half of the step from the latency of
    level j−1 to that of level j (each taken as the largest latency up to that level), so a
    route that climbs to level L and down again adds up to level L's latency.
    """
    depth = len(machine.shape)
    bandwidth = np.array([np.inf] + [p.bandwidth for p in machine.levels[:depth]])
    reach = np.maximum.accumulate([0.0] + [p.latency for p in machine.levels[:depth]])
    latency = np.r_[0.0, np.diff(reach) / 2]
    return bandwidth, latency


def hierarchical_time(machine: Machine, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray,
                      phase: np.ndarray) -> float:
    """α-β time of a levelled program on the machine, with per-level α and β.

    Phases follow one another. In a phase, a message between hardware threads ``src`` and
    ``dst`` costs the latency and byte time of the level it crosses; a rank receives its
    messages one after the other; and every link of the hierarchy (a thread's link to its
    core, a core's to its module, a module's to the node) is shared by the messages that
    cross it, at that level's bandwidth. A phase lasts the longer of its busiest receiver
    and its busiest link.
    """
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    nbytes, phase = np.asarray(nbytes, np.float64), np.asarray(phase, np.int64)
    moving = src != dst
    src, dst, nbytes, phase = src[moving], dst[moving], nbytes[moving], phase[moving]
    if len(src) == 0:
        return 0.0
    depth = len(machine.shape)
    lat = np.array([0.0] + [p.latency for p in machine.levels[:depth]])
    bw = np.array([np.inf] + [p.bandwidth for p in machine.levels[:depth]])
    level = machine.crossing_level(src, dst)
    cost = lat[level] + nbytes / bw[level]
    network = MachineNetwork(machine)
    total = 0.0
    order = np.argsort(phase, kind="stable")
    bounds = np.flatnonzero(np.diff(phase[order])) + 1
    for rows in np.split(order, bounds):
        receivers = np.bincount(dst[rows], weights=cost[rows])
        loads = network.link_loads(src[rows], dst[rows], nbytes[rows])
        busiest_link = float((loads / network.link_bandwidth).max(initial=0.0))
        total += max(float(receivers.max()), busiest_link)
    return total


class MachineNetwork(Topology):
    """``machine:AxBxC``: hardware threads under core, module and node switches."""

    kind = "machine"
    machine: Machine
    link_level: np.ndarray      # level each link crosses (1 = core, …)
    _level_offset: tuple[int, ...]

    def __init__(self, machine: Machine | str, params: NetworkParams | None = None) -> None:
        if not isinstance(machine, Machine):
            machine = Machine.parse(machine)
        shape, h = machine.shape, machine.threads
        offsets, nodes = [0], h
        for level in range(1, len(shape) + 1):
            offsets.append(nodes)
            nodes += h // machine.span(level)
        src, dst, lvl = [], [], []
        for level in range(1, len(shape) + 1):
            below = np.arange(h // machine.span(level - 1), dtype=np.int64)
            child_ids = offsets[level - 1] + below
            parent_ids = offsets[level] + below // shape[len(shape) - level]
            src += [child_ids, parent_ids]
            dst += [parent_ids, child_ids]
            lvl += [np.full(len(below), level)] * 2
        s, d, lv = (np.concatenate(x) if x else np.zeros(0, np.int64) for x in (src, dst, lvl))
        order = np.lexsort((d, s))
        outer = machine.levels[len(shape) - 1]
        if params is None:
            params = NetworkParams(bandwidth=outer.bandwidth, hop_latency=outer.latency / 2)
        object.__setattr__(self, "machine", machine)
        object.__setattr__(self, "_level_offset", tuple(offsets))
        levels = lv[order]
        object.__setattr__(self, "link_level", levels)
        bandwidth, latency = level_link_params(machine)
        super().__init__(machine.spec, params, nodes, np.arange(h), s[order], d[order],
                         link_bandwidth=bandwidth[levels], link_latency=latency[levels])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MachineNetwork):
            return NotImplemented
        return self.machine == other.machine and self.params == other.params

    def __hash__(self) -> int:
        return hash((self.machine, self.params))

    def __reduce__(self) -> tuple[Any, ...]:
        return (MachineNetwork, (self.machine, self.params))  # keeps non-default levels

    @property
    def max_route_length(self) -> int:
        """Up to the top and down again."""
        return max(1, 2 * len(self.machine.shape))

    def node_label(self, node: int) -> str:
        """``t<coords>`` for threads, ``<level>[i]`` for switches."""
        if node < self.machine.threads:
            return "t" + ".".join(map(str, self.machine.coordinates(int(node))))
        names = self.machine.level_names()
        for level in range(len(self.machine.shape), 0, -1):
            if node >= self._level_offset[level]:
                return f"{names[level - 1]}[{node - self._level_offset[level]}]"
        return str(node)

    def _ancestor(self, threads: np.ndarray, level: int) -> np.ndarray:
        return self._level_offset[level] + threads // self.machine.span(level) if level \
            else threads

    def _node_paths(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        up = self.machine.crossing_level(src, dst)
        depth = len(self.machine.shape)
        paths = np.full((len(src), 2 * depth + 1), -1, dtype=np.int64)
        rows = np.arange(len(src))
        for level in range(depth + 1):
            active = rows[up >= level]
            paths[active, level] = self._ancestor(src[active], level)
            down = rows[up > level]
            paths[down, 2 * up[down] - level] = self._ancestor(dst[down], level)
        return paths, 2 * up


def parse_machine(spec: str, params: NetworkParams | None = None, **_: Any) -> MachineNetwork:
    """The topology of ``machine:AxBxC`` (hook for `parse_topology`)."""
    return MachineNetwork(Machine.parse(spec), params)


# -- the real machine ----------------------------------------------------------------------
SYS_CPU = Path("/sys/devices/system/cpu")
SYS_NODE = Path("/sys/devices/system/node")


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _cpulist(text: str) -> list[int]:
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def cpu_topology(root: Path = SYS_CPU, nodes: Path = SYS_NODE) -> dict[int, tuple[int, int, int]]:
    """Per online CPU, ``(module, core, cpu)`` ids read from sysfs (NUMA node as the module
    when there are more NUMA nodes than packages, else the package)."""
    cpus = sorted(int(p.name[3:]) for p in root.glob("cpu[0-9]*") if p.name[3:].isdigit())
    numa: dict[int, int] = {}
    for node in sorted(nodes.glob("node[0-9]*")) if nodes.exists() else []:
        try:
            for cpu in _cpulist((node / "cpulist").read_text()):
                numa[cpu] = int(node.name[4:])
        except (OSError, ValueError):
            continue
    out: dict[int, tuple[int, int, int]] = {}
    for cpu in cpus:
        topo = root / f"cpu{cpu}" / "topology"
        package = _read_int(topo / "physical_package_id")
        core = _read_int(topo / "core_id")
        out[cpu] = (package if package is not None else 0, core if core is not None else cpu,
                    cpu)
    packages = {m for m, _, _ in out.values()}
    if len(set(numa.values())) > len(packages):
        out = {cpu: (numa.get(cpu, 0), c, t) for cpu, (_, c, t) in out.items()}
    return out


def detect_machine(root: Path = SYS_CPU, nodes: Path = SYS_NODE
                   ) -> tuple[Machine, dict[int, int]]:
    """The real machine's shape and the hardware thread id of every CPU.

    A regular machine (same cores per module, same threads per core) gives
    ``modules × cores × threads``; anything else, or no sysfs, a flat ``1 × cpus × 1``.
    """
    topo = cpu_topology(root, nodes)
    if not topo:
        n = os.cpu_count() or 1
        return Machine((1, n, 1)), {cpu: cpu for cpu in range(n)}
    modules = sorted({m for m, _, _ in topo.values()})
    cores: dict[int, list[tuple[int, int]]] = {}
    for m, c, _ in topo.values():
        cores.setdefault(m, [])
        if (m, c) not in cores[m]:
            cores[m].append((m, c))
    per_core: dict[tuple[int, int], list[int]] = {}
    for cpu, (m, c, _) in sorted(topo.items()):
        per_core.setdefault((m, c), []).append(cpu)
    core_counts = {len(v) for v in cores.values()}
    thread_counts = {len(v) for v in per_core.values()}
    if len(core_counts) != 1 or len(thread_counts) != 1:
        ordered = sorted(topo)
        return Machine((1, len(ordered), 1)), {cpu: i for i, cpu in enumerate(ordered)}
    n_cores, n_threads = core_counts.pop(), thread_counts.pop()
    thread_of: dict[int, int] = {}
    for mi, m in enumerate(modules):
        for ci, key in enumerate(sorted(cores[m])):
            for ti, cpu in enumerate(per_core[key]):
                thread_of[cpu] = (mi * n_cores + ci) * n_threads + ti
    return Machine((len(modules), n_cores, n_threads)), thread_of


def bound_cpu() -> int | None:
    """The CPU this process is pinned to, or None when it may run on several."""
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return None
    return next(iter(allowed)) if len(allowed) == 1 else None
