"""``collops model``: closed-form costs from the command line, no simulation.

For a network (``--topology``, whose parameters give the seed's constants) and one or more
message sizes it prints up to three tables:

* **seed 004** — allgather and alltoall on a ring, a √p×√p torus and a hypercube of the same
  p (the shapes p allows; the topology's own shape is marked ``*``), with
  ``t_s = overhead + hop_latency`` (one neighbour transfer), ``t_c = 1/bandwidth``, and the
  pairwise packet-switched hypercube alltoall beside the message-switched one;
* **cluster models A and B** — one transfer of m bytes through a switch:
  A = ``t_s + m·t_c``; B sends ``n = ⌈m/(V_max − V_0)⌉`` packets with ``V_max = packet_size``
  and ``V_0 = header_bytes``, and adds ``t_s1`` per byte of the first packet's preparation;
* **per algorithm** (with ``--collective``) — `collops.model.closed_form` for every registered
  algorithm of the collective: the exact seed-004 time where the network is contention-free
  for it, else the registry's α-β estimate for an idle network (``kind`` says which);
* **LogGP** (with ``--loggp``) — the contention-free LogGP shapes of `collops.model.LogGP`
  (flat and binomial trees, ring and recursive-doubling allgather, pairwise and linear
  alltoall) with L = mean route hops × hop_latency, o = g = overhead, G = 1/bandwidth, P = p;
  ``--loggp L=…,o=…,g=…,G=…`` replaces any of them (seconds; G per byte).

``--ts``/``--tc`` replace the derived constants; ``--net k=v`` sets network parameters as in
``collops sim``; ``--json FILE`` writes every row as a record.

The network-aware pick (what selection chooses for the collective on the topology, contention
included) needs the simulator, which sits above this package: the command layer adds it
(`collops.model_command`) through ``cmd_model``'s ``more_tables``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ..algorithms import COLLECTIVES, algorithms
from ..errors import CollopsError
from ..topology import Topology, topology_from_text
from ..topology.base import NetworkParams
from .closed_form import SWITCHING, closed_form, exact_time, seed_shape
from .cluster import model_a, model_b, packet_count, wire_bytes
from .hockney import mean_hops
from .loggp import LogGP
from .seed004 import hypercube_alltoall_pairwise, seed004

FORMULAS = {
    ("allgather", "ring"): "(p-1)(t_s + m t_c)",
    ("allgather", "torus"): "2(sqrt(p)-1) t_s + (p-1) m t_c",
    ("allgather", "hypercube"): "t_s log2(p) + (p-1) m t_c",
    ("alltoall", "ring"): "(p-1)(t_s + m p t_c / 2)",
    ("alltoall", "torus"): "(sqrt(p)-1)(2 t_s + m p t_c)",
    ("alltoall", "hypercube"): "log2(p)(t_s + m p t_c / 2)",
}
PAIRWISE = "(p-1)(t_s + m t_c), pairwise"
#: the LogGP shapes ``--loggp`` prints: (name, method of `LogGP`, formula); with
#: T(m) = 2o + (m-1)G + L one message and I(m) = max(g, o + (m-1)G) the gap between sends
LOGGP_SHAPES = (
    ("linear (bcast/scatter/gather)", "linear", "(P-2) I(m) + T(m)"),
    ("binomial bcast", "binomial", "ceil(log2 P) T(m)"),
    ("ring allgather", "ring_allgather", "(P-1) T(m)"),
    ("recursive doubling allgather", "recursive_doubling_allgather",
     "sum_k T(2^k m), k < log2 P"),
    ("pairwise alltoall", "pairwise_alltoall", "(P-1) T(m)"),
    ("linear alltoall", "linear_alltoall", "(P-2) I(m) + T(m)"),
)


# -- argument parsing shared with ``collops sim`` (model sits below sim in the layering) -----
class UsageError(CollopsError):
    """A command-line argument the user has to fix (reported in one line, exit status 2)."""


_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20,
          "MB": 1 << 20, "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}


def parse_byte_sizes(text: str) -> list[int]:
    """``"1K,64K,1M"`` → [1024, 65536, 1048576] (K, M, G are powers of 1024)."""
    sizes = []
    for part in (p.strip() for p in str(text).split(",")):
        match = re.fullmatch(r"(\d+)\s*([A-Za-z]*)", part)
        if not match or match.group(2).upper() not in _UNITS:
            raise UsageError(f"not a size: {part!r} (use a byte count such as 4096, 64K or 1M)")
        sizes.append(int(match.group(1)) * _UNITS[match.group(2).upper()])
    return sizes


def parse_assignments(items: Sequence[str], what: str) -> dict[str, str]:
    """``["a=1", "b=2,c=3"]`` → {"a": "1", "b": "2", "c": "3"}."""
    out: dict[str, str] = {}
    for item in items:
        for part in (p.strip() for p in item.split(",")):
            if not part:
                continue
            name, sep, value = part.partition("=")
            if not sep or not name.strip() or not value.strip():
                raise UsageError(f"{what} {part!r} is not of the form name=value")
            out[name.strip()] = value.strip()
    return out


def network_overrides(items: Sequence[str]) -> dict[str, float | int | str]:
    """``--net bandwidth=1e9,packet_size=1500`` → typed `NetworkParams` overrides."""
    types = {f.name: f.type for f in dataclasses.fields(NetworkParams)}
    out: dict[str, float | int | str] = {}
    for name, value in parse_assignments(items, "network parameter").items():
        if name not in types:
            raise UsageError(f"unknown network parameter {name!r} (one of "
                             f"{', '.join(NetworkParams.names())})")
        try:
            if types[name] in (str, "str"):
                out[name] = value
            elif types[name] in (int, "int"):
                out[name] = parse_byte_sizes(value)[0]
            else:
                out[name] = float(value)
        except (ValueError, UsageError):
            raise UsageError(f"network parameter {name}={value!r} is not a number") from None
    return out


def topology_from_arg(text: str, net: Mapping[str, float | int | str] | None = None
                      ) -> Topology:
    """A topology from a spec string or a JSON/TOML file, with ``--net`` overrides applied
    (`collops.topology.topology_from_text`; a missing file is a one-line usage error)."""
    if text.lower().endswith((".json", ".toml")) and not Path(text).is_file():
        raise UsageError(f"topology file {text!r} does not exist")
    return topology_from_text(text, net)


@dataclass(frozen=True)
class Row:
    """One closed-form estimate (the JSON record of ``collops model --json``)."""

    table: str  # "seed004", "cluster", "algorithm", "loggp" or "choice"
    name: str  # exchange, model ("A"/"B") or algorithm
    network: str  # shape, "switch", or the topology spec
    nprocs: int
    size: int
    time_s: float | None
    note: str = ""


def shapes_for(p: int) -> list[str]:
    """The seed-004 networks p processors can form: ring always, torus if square, hypercube
    if a power of two."""
    out = ["ring"]
    if p >= 4 and math.isqrt(p) ** 2 == p:
        out.append("torus")
    if p >= 2 and p & (p - 1) == 0:
        out.append("hypercube")
    return out


def seed004_rows(p: int, sizes: Sequence[int], t_s: float, t_c: float,
                 own: str | None) -> list[Row]:
    """Every seed-004 cell for p processors and each size (``own`` marks the topology's)."""
    rows = []
    for exchange in ("allgather", "alltoall"):
        for shape in shapes_for(p):
            mark = " *" if shape == own else ""
            for m in sizes:
                rows.append(Row("seed004", exchange, shape + mark, p, m,
                                seed004(exchange, shape, p, m, t_s, t_c),
                                FORMULAS[exchange, shape]))
                if exchange == "alltoall" and shape == "hypercube":
                    rows.append(Row("seed004", exchange, shape + mark, p, m,
                                    hypercube_alltoall_pairwise(p, m, t_s, t_c), PAIRWISE))
    return rows


def cluster_rows(sizes: Sequence[int], t_s: float, t_c: float, t_s1: float, v_max: int,
                 v_0: int) -> list[Row]:
    """Model A and model B for one transfer of each size."""
    rows = []
    for m in sizes:
        rows.append(Row("cluster", "A", "switch", 2, m, model_a(m, t_s, t_c), "t_s + m t_c"))
        rows.append(Row("cluster", "B", "switch", 2, m, model_b(m, t_s, t_s1, t_c, v_max, v_0),
                        f"{packet_count(m, v_max, v_0)} packets, "
                        f"{wire_bytes(m, v_max, v_0)} B on the wire"))
    return rows


def algorithm_rows(collective: str, topology: Topology, p: int,
                   sizes: Sequence[int], switching: str = "cut-through") -> list[Row]:
    """`closed_form` of every registered schedule of ``collective`` at each size (a transport
    component's own algorithms run on their transport only, never on a modelled network)."""
    rows = []
    for alg in algorithms(collective):
        if alg.native is not None:
            continue
        for m in sizes:
            exact = exact_time(collective, alg.name, topology, p, m, switching)
            time = exact if exact is not None else closed_form(collective, alg.name, topology,
                                                                 p, m, switching)
            kind = "seed 004 (exact)" if exact is not None else (
                "alpha-beta" if time is not None else "no formula")
            rows.append(Row("algorithm", alg.name, str(topology), p, m, time, kind))
    return rows


def loggp_for(topology: Topology, p: int, overrides: Mapping[str, str]) -> LogGP:
    """LogGP parameters of ``topology`` for p processors (`LogGP.from_network`, with L from
    the mean route length), with ``overrides`` (``{"L": "2e-6", …}``) applied."""
    base = LogGP.from_network(topology.params, p, hops=mean_hops(topology, p) if p > 1 else 1)
    values: dict[str, float] = {}
    for name, text in overrides.items():
        if name not in ("L", "o", "g", "G"):
            raise UsageError(f"--loggp: unknown parameter {name!r} (one of L, o, g, G)")
        try:
            values[name] = float(text)
        except ValueError:
            raise UsageError(f"--loggp: {name}={text!r} is not a number") from None
        if values[name] < 0:
            raise UsageError(f"--loggp: {name} must be >= 0, not {text}")
    return LogGP(L=values.get("L", base.L), o=values.get("o", base.o),
                 g=values.get("g", base.g), G=values.get("G", base.G), P=base.P)


def loggp_rows(net: LogGP, sizes: Sequence[int]) -> list[Row]:
    """Every LogGP shape at each size (recursive doubling only for P a power of two)."""
    p = net.P
    rows = []
    for name, method, formula in LOGGP_SHAPES:
        if method == "recursive_doubling_allgather" and p & (p - 1):
            continue
        for m in sizes:
            rows.append(Row("loggp", name, "LogGP", p, m, getattr(net, method)(m), formula))
    return rows


def _secs(t: float | None) -> str:
    if t is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if t >= scale:
            return f"{t / scale:.3f} {unit}"
    return f"{t * 1e9:.1f} ns"


def format_rows(rows: Sequence[Row], title: str, second: str) -> str:
    """A text table: name, network (or kind), size, time and the formula or note."""
    width = max([len(second)] + [len(r.network) for r in rows]) + 2
    name_width = max([len("name")] + [len(r.name) for r in rows]) + 2
    lines = [title, f"{'':2}{'name':<{name_width}}{second:<{width}}{'size':>10}{'time':>13}  note"]
    for r in rows:
        lines.append(f"{'':2}{r.name:<{name_width}}{r.network:<{width}}{r.size:>10}"
                     f"{_secs(r.time_s):>13}"
                     f"  {r.note}")
    return "\n".join(lines)


#: seed 004's clusters: Fast Ethernet (12.5 MB/s, 50 µs start-up) through a switch; model B
#: in packets of V_max = 1500 B carrying V_0 = 78 B of TCP/IP headers, 10 ns per byte of
#: preparing the first packet
CLUSTERS: dict[str, tuple[dict[str, float], float]] = {
    "A": ({"bandwidth": 12.5e6, "overhead": 5e-5, "hop_latency": 1e-7, "packet_size": 1500,
           "header_bytes": 0}, 0.0),
    "B": ({"bandwidth": 12.5e6, "overhead": 5e-5, "hop_latency": 1e-7, "packet_size": 1500,
           "header_bytes": 78}, 1e-8),
}


def model_args(p: argparse.ArgumentParser) -> None:
    """The arguments of ``collops model``."""
    p.add_argument("--topology", default=None,
                   help="network giving p and the constants (default torus:8x8; with "
                        "--cluster switch:16)")
    p.add_argument("--cluster", choices=sorted(CLUSTERS), default=None,
                   help="seed 004's cluster model A or B with the lecture's parameters "
                        "(Fast Ethernet; B: V_max 1500 B, V_0 78 B, t_s1 10 ns/B); --net, "
                        "--ts1 still override")
    p.add_argument("--switching", default="cut-through", choices=SWITCHING,
                   help="how a multi-hop transfer is priced in the per-algorithm table: "
                        "cut-through (default), packet (store one packet per hop), message "
                        "(store the whole message per hop)")
    p.add_argument("--size", default="1K", help="bytes (per processor or per pair), e.g. 64K")
    p.add_argument("--sizes", default=None, help="several sizes, e.g. 1K,64K (overrides --size)")
    p.add_argument("-n", "--nprocs", type=int, default=None,
                   help="processors p (default: the topology's compute nodes)")
    p.add_argument("--net", action="append", default=[], metavar="K=V",
                   help="network parameter (bandwidth, hop_latency, packet_size, header_bytes, "
                        "overhead); repeatable")
    p.add_argument("--ts", type=float, default=None, help="start-up time t_s in seconds "
                   "(default overhead + hop_latency)")
    p.add_argument("--tc", type=float, default=None,
                   help="seconds per byte t_c (default 1/bandwidth)")
    p.add_argument("--ts1", type=float, default=None,
                   help="model B: start-up seconds per byte of the first packet (default 0)")
    p.add_argument("--collective", default=None,
                   help="also every registered algorithm's closed form for this collective")
    p.add_argument("--loggp", nargs="?", const="", default=None, metavar="L=..,o=..,g=..,G=..",
                   help="also the LogGP table (parameters from the network; any given here "
                        "replace them: seconds, G per byte)")
    p.add_argument("--json", default=None, metavar="FILE", help="write every row as JSON")


#: more tables for a collective: (args, topology, p, sizes) -> (texts, rows)
MoreTables = Callable[[argparse.Namespace, Topology, int, Sequence[int]],
                      tuple[list[str], list[Row]]]


def _tables(args: argparse.Namespace, more_tables: MoreTables | None = None
            ) -> tuple[list[str], list[Row]]:
    preset, ts1 = CLUSTERS[args.cluster] if args.cluster else ({}, 0.0)
    ts1 = args.ts1 if args.ts1 is not None else ts1
    overrides = {**preset, **network_overrides(args.net)}
    default_topology = "switch:16" if args.cluster else "torus:8x8"
    topology = topology_from_arg(args.topology or default_topology, overrides)
    sizes = parse_byte_sizes(args.sizes or args.size)
    p = args.nprocs if args.nprocs is not None else topology.num_compute_nodes
    if p < 1:
        raise UsageError(f"--nprocs must be at least 1, not {p}")
    params = topology.params
    t_s = args.ts if args.ts is not None else params.overhead + params.hop_latency
    t_c = args.tc if args.tc is not None else params.byte_time
    own = seed_shape(topology, p)
    seed_rows = seed004_rows(p, sizes, t_s, t_c, own)
    cluster = [r for r in cluster_rows(sizes, t_s, t_c, ts1, params.packet_size,
                                       params.header_bytes)
               if args.cluster is None or r.name == args.cluster]
    texts = [
        format_rows(seed_rows, f"seed 004: p = {p}, t_s = {_secs(t_s)}, t_c = {t_c:.4g} s/B "
                    f"(* marks the shape of {topology})", "network"),
        format_rows(cluster, f"cluster models: t_s = {_secs(t_s)}, t_c = {t_c:.4g} s/B, "
                    f"t_s1 = {ts1:.4g} s/B, V_max = {params.packet_size} B, "
                    f"V_0 = {params.header_bytes} B", "network"),
    ]
    rows = seed_rows + cluster
    if args.collective:
        if args.collective not in COLLECTIVES:
            raise UsageError(f"unknown collective {args.collective!r} (one of "
                             f"{', '.join(COLLECTIVES)})")
        per_alg = algorithm_rows(args.collective, topology, p, sizes, args.switching)
        texts.append(format_rows(per_alg, f"{args.collective} on {topology}, p = {p}: "
                                 f"closed form per algorithm ({args.switching} switching)",
                                 "network"))
        rows += per_alg
        if more_tables is not None:
            more_texts, more_rows = more_tables(args, topology, p, sizes)
            texts += more_texts
            rows += more_rows
    if args.loggp is not None:
        net = loggp_for(topology, p, parse_assignments([args.loggp], "--loggp"))
        per_shape = loggp_rows(net, sizes)
        texts.append(format_rows(per_shape, f"LogGP: P = {p}, L = {_secs(net.L)}, o = "
                                 f"{_secs(net.o)}, g = {_secs(net.g)}, G = {net.G:.4g} s/B "
                                 "(T(m) = 2o + (m-1)G + L, I(m) = max(g, o + (m-1)G))",
                                 "model"))
        rows += per_shape
    return texts, rows


def cmd_model(args: argparse.Namespace, more_tables: MoreTables | None = None) -> int:
    """Closed-form estimates: the seed-004 table, cluster models A and B, per algorithm,
    LogGP (and ``more_tables`` for a collective)."""
    try:
        texts, rows = _tables(args, more_tables)
        print("\n\n".join(texts))
        if args.json:
            Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
    except (CollopsError, OSError) as exc:
        print(f"collops model: error: {exc}", file=sys.stderr)
        return 2
    return 0


#: the subcommand this module adds to ``collops``: name, argument set-up, handler
COMMAND = ("model", model_args, cmd_model)
