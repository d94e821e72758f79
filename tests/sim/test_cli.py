"""``collops sim`` and ``collops model``: options, one-line errors and the JSON records."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from collops.algorithms import algorithms, get_algorithm
from collops.algorithms.alltoall import linear_destinations
from collops.cli import main
from collops.model import closed_form, model_b, seed004
from collops.schedule import StepKind
from collops.sim import simulate
from collops.sim.api import JSON_FIELDS, call_specs
from collops.sim.fastpath import fast_generator
from collops.sim.program import program_from_schedules


def _sim(tmp_path: Path, *args: str) -> list[dict]:
    out = tmp_path / "out.json"
    assert main(["sim", *args, "--json", str(out)]) == 0
    return json.loads(out.read_text())


def _fails(capsys, *argv: str) -> str:
    """Run a command that must fail: exit status 2 and exactly one line on stderr."""
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


# -- in-network reduction: only when asked ------------------------------------------------------
def test_a_named_algorithm_on_a_combining_tree_is_simulated_as_itself(tmp_path: Path) -> None:
    # the case: ring allreduce of 1 KiB on combining-tree:2:8 once reported the
    # in-network sweep (2.75 µs, 1 KiB max link); it is the ring's schedule, as on tree:2:8
    args = ["--collective", "allreduce", "--algorithm", "ring", "--size", "1K"]
    (combining,) = _sim(tmp_path, *args, "--topology", "combining-tree:2:8")
    (plain,) = _sim(tmp_path, *args, "--topology", "tree:2:8")
    assert combining["algorithm"] == "ring"
    assert combining["time_s"] == plain["time_s"]
    assert combining["max_link_load_bytes"] == plain["max_link_load_bytes"] == 7 / 8 * 2048
    assert combining["closed_form_s"] is not None


def test_in_network_adds_the_switch_reduction_beside_the_named_algorithms(
        tmp_path: Path, capsys) -> None:
    records = _sim(tmp_path, "--collective", "allreduce", "--compare", "ring,recursive_doubling",
                   "--in-network", "--topology", "combining-tree:2:8", "--sizes", "1K,4K")
    assert [(r["algorithm"], r["size"]) for r in records] == [
        ("ring", 1024), ("ring", 4096), ("recursive_doubling", 1024),
        ("recursive_doubling", 4096), ("in-network", 1024), ("in-network", 4096)]
    sweep = [r for r in records if r["algorithm"] == "in-network"]
    # every link carries the data once
    assert [r["max_link_load_bytes"] for r in sweep] == [1024, 4096]
    assert all(r["time_s"] < min(o["time_s"] for o in records if o["size"] == r["size"]
                                 and o is not r) for r in sweep)
    assert "in-network" in capsys.readouterr().out
    err = _fails(capsys, "sim", "--collective", "allreduce", "--algorithm", "ring",
                 "--in-network", "--topology", "tree:2:8")
    assert "cannot reduce" in err
    err = _fails(capsys, "sim", "--collective", "gather", "--algorithm", "binomial",
                 "--in-network", "--topology", "combining-tree:2:8")
    assert "not combined in the network" in err


# -- JSON records ------------------------------------------------------------------------------
def test_json_records_have_exactly_the_documented_fields(tmp_path: Path) -> None:
    records = _sim(tmp_path, "--collective", "allgather", "--algorithm", "ring",
                   "--topology", "ring:8", "--size", "2K", "--gamma", "0")
    assert len(records) == 1
    record = records[0]
    assert tuple(record) == JSON_FIELDS
    assert record["collective"] == "allgather" and record["algorithm"] == "ring"
    assert record["topology"] == "ring:8" and record["nprocs"] == 8
    assert record["size"] == 2048 and record["model"] == "congestion"
    # a contention-free case: prediction and closed form are the seed-004 (p−1)(t_s + m t_c)
    t_s, t_c = 1e-6 + 1e-7, 1 / 2e9
    expected = seed004("allgather", "ring", 8, 2048, t_s, t_c)
    assert record["time_s"] == pytest.approx(expected, rel=1e-12)
    assert record["closed_form_s"] == pytest.approx(expected, rel=1e-12)
    # every link of the ring carries p−1 blocks one way or none: mean is half the max
    assert record["max_link_load_bytes"] == 7 * 2048
    assert record["mean_link_load_bytes"] == pytest.approx(7 * 2048 / 2)


def test_records_follow_variants_then_sizes(tmp_path: Path, capsys) -> None:
    records = _sim(tmp_path, "--topology", "torus:2x2x2", "--sizes", "1K,4K",
                   "--algorithm", "pairwise", "--compare", "linear,linear:rank_order=1")
    assert [(r["algorithm"], r["size"]) for r in records] == [
        ("pairwise", 1024), ("pairwise", 4096), ("linear", 1024), ("linear", 4096),
        ("linear:rank_order=1", 1024), ("linear:rank_order=1", 4096)]
    out = capsys.readouterr().out
    assert "alltoallv on torus:2x2x2 (8 ranks), congestion model" in out
    assert "linear:rank_order=1" in out and "closed form" in out


def test_record_equals_the_library_call(tmp_path: Path) -> None:
    record = _sim(tmp_path, "--topology", "tree:2:8", "--size", "3000", "--algorithm",
                  "random_chunked:chunk=512:seed=3", "--model", "packet")[0]
    r = simulate("alltoallv", "random_chunked", "tree:2:8", size_bytes=3000, model="packet",
                 params={"chunk": 512, "seed": 3})
    assert record["time_s"] == r.time_s
    assert record["max_link_load_bytes"] == r.max_link_load_bytes
    assert record["closed_form_s"] == closed_form("alltoallv", "random_chunked", "tree:2:8", 8,
                                                  3000, "packet")


# -- options -----------------------------------------------------------------------------------
def test_param_reaches_only_the_algorithms_that_take_it(tmp_path: Path) -> None:
    both = _sim(tmp_path, "--topology", "torus:2x2x2", "--size", "4K",
                "--compare", "random_chunked,linear", "--param", "chunk=512")
    alone = _sim(tmp_path, "--topology", "torus:2x2x2", "--size", "4K",
                 "--algorithm", "random_chunked:chunk=512")
    default = _sim(tmp_path, "--topology", "torus:2x2x2", "--size", "4K",
                   "--algorithm", "random_chunked")
    assert both[0]["time_s"] == alone[0]["time_s"] != default[0]["time_s"]
    plain = _sim(tmp_path, "--topology", "torus:2x2x2", "--size", "4K", "--algorithm", "linear")
    assert both[1]["time_s"] == plain[0]["time_s"]


def test_own_parameters_override_common_ones(tmp_path: Path) -> None:
    a = _sim(tmp_path, "--topology", "ring:6", "--size", "4K", "--param", "chunk=512",
             "--algorithm", "random_chunked:chunk=2048")
    b = _sim(tmp_path, "--topology", "ring:6", "--size", "4K",
             "--algorithm", "random_chunked:chunk=2048")
    assert a == b


def test_exclude_takes_nodes_out_of_the_group(tmp_path: Path) -> None:
    full = _sim(tmp_path, "--collective", "alltoall", "--algorithm", "linear",
                "--topology", "torus:4x4", "--size", "1K")[0]
    fewer = _sim(tmp_path, "--collective", "alltoall", "--algorithm", "linear",
                 "--topology", "torus:4x4", "--size", "1K", "--exclude", "5,10-11")[0]
    assert full["nprocs"] == 16 and fewer["nprocs"] == 13
    r = simulate("alltoall", "linear", "torus:4x4", size_bytes=1024, excluded={5, 10, 11})
    assert fewer["time_s"] == r.time_s
    assert fewer["max_link_load_bytes"] == r.max_link_load_bytes


def test_nprocs_placement_and_seed(tmp_path: Path) -> None:
    def run(*extra: str) -> dict:
        return _sim(tmp_path, "--topology", "torus:4x4x2", "--size", "2K",
                    "--algorithm", "linear:rank_order=1", *extra)[0]
    assert run("-n", "8")["nprocs"] == 8
    a, b = run("--placement", "random", "--seed", "1"), run("--placement", "random", "--seed", "1")
    assert a == b
    assert run("--placement", "random", "--seed", "2") != run()


def test_placement_file_and_topology_file(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.txt"
    nodes.write_text("7 6 5 4")
    topo = tmp_path / "net.json"
    topo.write_text(json.dumps({"spec": "ring:8", "bandwidth": 1e9}))
    record = _sim(tmp_path, "--topology", str(topo), "--placement", str(nodes), "-n", "4",
                  "--collective", "bcast", "--algorithm", "linear", "--size", "1K")[0]
    r = simulate("bcast", "linear", "ring:8", 4, 1024, placement=str(nodes))
    assert record["topology"] == "ring:8"
    assert record["max_link_load_bytes"] == r.max_link_load_bytes
    assert record["time_s"] > r.time_s  # half the bandwidth


def test_net_overrides_network_parameters(tmp_path: Path) -> None:
    slow = _sim(tmp_path, "--collective", "allgather", "--algorithm", "ring",
                "--topology", "ring:4", "--size", "64K", "--gamma", "0",
                "--net", "bandwidth=1e9", "--net", "overhead=0,hop_latency=0")[0]
    assert slow["time_s"] == pytest.approx(3 * 65536 / 1e9, rel=1e-12)
    assert slow["closed_form_s"] == pytest.approx(slow["time_s"], rel=1e-12)


def test_packet_model_and_switching(tmp_path: Path) -> None:
    common = ("--collective", "bcast", "--algorithm", "linear", "--topology", "ring:5",
              "--size", "4K", "--model", "packet", "--gamma", "0")
    packet = _sim(tmp_path, *common)[0]
    message = _sim(tmp_path, *common, "--switching", "message")[0]
    assert packet["model"] == "packet"
    assert message["time_s"] > packet["time_s"]  # store-and-forward of whole messages


def test_hotspots_table(capsys) -> None:
    assert main(["sim", "--topology", "tree:2:8", "--size", "1K", "--hotspots",
                 "--compare", "linear,linear:rank_order=1"]) == 0
    out = capsys.readouterr().out
    assert "peak round" in out and "busiest round" in out
    # rank order: in its busiest round all 7 other ranks address one leaf over one link
    r = simulate("alltoallv", "linear", "tree:2:8", size_bytes=1024, params={"rank_order": 1})
    assert r.phase_hotspots.hot_load_bytes.max() == 7 * 1024


@pytest.mark.parametrize("kind", ["time", "ratio", "hotspots", "heatmap", "auto"])
def test_plots_are_written(tmp_path: Path, capsys, kind: str) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "fig.png"
    args = ["sim", "--topology", "torus:2x2x2", "--algorithm", "pairwise", "--plot", str(png),
            "--plot-kind", kind, "--sizes", "1K,2K" if kind in ("time", "ratio") else "1K",
            *(["--compare", "linear"] if kind == "ratio" else [])]
    assert main(args) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {png}" in capsys.readouterr().out


def test_one_heat_map_per_variant(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "map.png"
    assert main(["sim", "--topology", "torus:2x2x2", "--compare", "pairwise,linear",
                 "--plot", str(png), "--plot-kind", "heatmap"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["map-linear.png", "map-pairwise.png"]


# -- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, words", [
    (["--topology", "torus:8x8q", "--algorithm", "linear"], "every dimension"),
    (["--topology", "donut:8", "--algorithm", "linear"], "unknown network kind"),
    (["--topology", "ring:4", "--algorithm", "linear", "--size", "12Q"], "byte count"),
    (["--topology", "ring:4", "--algorithm", "linear", "--sizes", "1K,x"], "byte count"),
    (["--topology", "ring:4", "--algorithm", "nope"], "no such algorithm"),
    (["--topology", "ring:4"], "--algorithm"),
    (["--topology", "ring:4", "--collective", "allgatherz", "--algorithm", "ring"],
     "unknown collective"),
    (["--topology", "ring:4", "--algorithm", "linear", "--param", "chunk=8"], "takes it"),
    (["--topology", "ring:4", "--algorithm", "linear:throttle"], "name=value"),
    (["--topology", "ring:4", "--algorithm", "linear:throttle=x"], "integer"),
    (["--topology", "ring:4", "--algorithm", "linear", "--exclude", "4"], "does not exist"),
    (["--topology", "ring:4", "--algorithm", "linear", "--exclude", "a-b"], "node ids"),
    (["--topology", "ring:4", "--algorithm", "linear", "--model", "fluid"], "unknown model"),
    (["--topology", "ring:4", "--algorithm", "linear", "--window", "-1"], "--window"),
    (["--topology", "ring:4", "--algorithm", "linear", "--plot", "x.png", "--plot-kind",
      "ratio"], "--compare"),
    (["--topology", "ring:4", "--algorithm", "linear", "--net", "tie_break=minus"],
     "tie_break"),
    (["--topology", "ring:4", "--algorithm", "linear", "--net", "buffer_packets=-1"],
     "buffer_packets"),
    (["--topology", "ring:4", "--algorithm", "linear", "--idle", "9"], "does not exist"),
    (["--topology", "ring:4", "--algorithm", "linear:throttle=2", "--window", "3"], "throttle"),
    (["--topology", "ring:4", "--algorithm", "linear:order=sideways"], "shift"),
    (["--topology", "ring:4", "--algorithm", "linear", "--net", "speed=1"], "network parameter"),
    (["--topology", "ring:4", "--algorithm", "linear", "--net", "bandwidth=fast"], "number"),
    (["--topology", "ring:4", "--algorithm", "linear", "-n", "9"], "usable compute nodes"),
    (["--topology", "ring:4", "--algorithm", "linear", "--placement", "/no/such"], "placement"),
    (["--topology", "/no/such.json", "--algorithm", "linear"], "does not exist"),
    (["--topology", "ring:4", "--algorithm", "linear", "--plot", "x.png", "--plot-kind",
      "heatmap"], "grid"),
])
def test_errors_are_one_line_with_status_2(capsys, argv: list[str], words: str) -> None:
    err = _fails(capsys, "sim", *argv)
    assert err.startswith("collops sim: error: ") and words in err


# -- rank_order on alltoall.linear ---------------------------------------------------------------
@pytest.mark.parametrize("rank", [0, 3, 6])
def test_rank_order_sends_to_ranks_in_increasing_order(rank: int) -> None:
    spec = call_specs("alltoall", 7, 5)[0]
    sched = get_algorithm("alltoall", "linear").build(rank, spec, {"rank_order": 1})
    sends = sched.peer[sched.kind == StepKind.SEND].tolist()
    assert sends == [d for d in range(7) if d != rank] == linear_destinations(rank, 7, True)
    assert linear_destinations(rank, 7) == [(rank + k) % 7 for k in range(1, 7)]


@pytest.mark.parametrize("p", [2, 5, 12])
def test_fast_path_honours_rank_order(p: int) -> None:
    specs = call_specs("alltoallv", p, 16)
    alg = get_algorithm("alltoallv", "linear")
    params = alg.resolve({"rank_order": 1})
    fast = fast_generator("alltoallv", "linear", specs[0])(specs[0], params)  # type: ignore[misc]
    built = program_from_schedules(alg.build_all(specs, params), 1)
    for prog in (fast, built):
        order = np.lexsort((prog.msg_order, prog.msg_src))
        prog_rows = np.stack([prog.msg_src[order], prog.msg_dst[order]], axis=1)
        expected = [(s, d) for s in range(p) for d in range(p) if d != s]
        assert [tuple(r) for r in prog_rows.tolist()] == expected


# -- collops model -------------------------------------------------------------------------------
def test_model_prints_the_seed004_table(tmp_path: Path, capsys) -> None:
    out_json = tmp_path / "model.json"
    assert main(["model", "--topology", "torus:4x4", "--size", "1K", "--collective",
                 "allgather", "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "torus *" in out and "(sqrt(p)-1)(2 t_s + m p t_c)" in out
    rows = json.loads(out_json.read_text())
    t_s, t_c = 1.1e-6, 1 / 2e9
    cell = [r for r in rows if r["table"] == "seed004" and r["name"] == "alltoall"
            and r["network"] == "torus *"]
    assert len(cell) == 1
    assert cell[0]["time_s"] == pytest.approx(3 * (2 * t_s + 1024 * 16 * t_c))
    shapes = {r["network"].rstrip(" *") for r in rows if r["table"] == "seed004"}
    assert shapes == {"ring", "torus", "hypercube"}
    algs = {r["name"]: r for r in rows if r["table"] == "algorithm"}
    assert set(algs) == {a.name for a in algorithms("allgather") if a.native is None}
    assert algs["ring"]["time_s"] == closed_form("allgather", "ring", "torus:4x4", 16, 1024)


def test_model_cluster_b_counts_headers(tmp_path: Path) -> None:
    out_json = tmp_path / "model.json"
    assert main(["model", "--topology", "switch:4", "--sizes", "1000,5000", "--net",
                 "packet_size=1500,header_bytes=78,bandwidth=1e8,overhead=1e-5,hop_latency=0",
                 "--ts1", "2e-9", "--json", str(out_json)]) == 0
    rows = [r for r in json.loads(out_json.read_text()) if r["table"] == "cluster"]
    b = {r["size"]: r["time_s"] for r in rows if r["name"] == "B"}
    a = {r["size"]: r["time_s"] for r in rows if r["name"] == "A"}
    # 5000 B need ⌈5000/1422⌉ = 4 packets: 5000 + 4·78 bytes on the wire
    assert b[5000] == pytest.approx(1e-5 + 2e-9 * 1500 + (5000 + 4 * 78) / 1e8)
    assert b[5000] == model_b(5000, 1e-5, 2e-9, 1e-8, 1500, 78)
    assert a[1000] == pytest.approx(1e-5 + 1000 / 1e8)


def test_model_explicit_constants_and_shapes(tmp_path: Path) -> None:
    out_json = tmp_path / "m.json"
    assert main(["model", "--topology", "ring:12", "--size", "100", "--ts", "1e-6", "--tc",
                 "1e-9", "--json", str(out_json)]) == 0
    rows = [r for r in json.loads(out_json.read_text()) if r["table"] == "seed004"]
    assert {r["network"] for r in rows} == {"ring *"}  # 12 is neither square nor 2^k
    gather = [r for r in rows if r["name"] == "allgather"][0]
    assert gather["time_s"] == pytest.approx(11 * (1e-6 + 100e-9))


def test_model_loggp_table_from_the_network_and_overrides(tmp_path: Path, capsys) -> None:
    out_json = tmp_path / "m.json"
    # switch:4: every route is node -> switch -> node, 2 hops
    assert main(["model", "--topology", "switch:4", "--sizes", "1000,8000", "--net",
                 "bandwidth=1e9,hop_latency=3e-7,overhead=2e-6", "--loggp",
                 "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "LogGP: P = 4" in out and "ring allgather" in out
    rows = {(r["name"], r["size"]): r["time_s"] for r in json.loads(out_json.read_text())
            if r["table"] == "loggp"}
    L, o, g, G = 2 * 3e-7, 2e-6, 2e-6, 1e-9

    def message(m):  # LogGP: o + (m-1)G + L + o
        return 2 * o + (m - 1) * G + L
    for m in (1000, 8000):
        gap = max(g, o + (m - 1) * G)
        assert rows["ring allgather", m] == pytest.approx(3 * message(m))
        assert rows["binomial bcast", m] == pytest.approx(2 * message(m))
        assert rows["linear (bcast/scatter/gather)", m] == pytest.approx(2 * gap + message(m))
        assert rows["recursive doubling allgather", m] == pytest.approx(
            message(m) + message(2 * m))
    assert main(["model", "--topology", "switch:4", "--size", "1000", "--loggp",
                 "L=1e-5,G=0", "--json", str(out_json)]) == 0
    rows = {r["name"]: r["time_s"] for r in json.loads(out_json.read_text())
            if r["table"] == "loggp"}
    assert rows["pairwise alltoall"] == pytest.approx(3 * (2 * 1e-6 + 1e-5))
    # no LogGP table unless asked for (the documented outputs stay as they are)
    capsys.readouterr()
    assert main(["model", "--topology", "switch:4", "--json", str(out_json)]) == 0
    assert all(r["table"] != "loggp" for r in json.loads(out_json.read_text()))
    assert "LogGP" not in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["--topology", "ring:4", "--loggp", "Q=1"], "unknown parameter"),
    (["--topology", "ring:4", "--loggp", "L=soon"], "not a number"),
    (["--topology", "torus:4x4", "--size", "1X"], "not a size"),
    (["--topology", "hexagon:3"], "unknown network kind"),
    (["--topology", "ring:4", "--collective", "nope"], "unknown collective"),
    (["--topology", "ring:4", "--net", "colour=red"], "network parameter"),
    (["--topology", "ring:4", "-n", "0"], "nprocs"),
])
def test_model_errors_are_one_line_with_status_2(capsys, argv: list[str], words: str) -> None:
    err = _fails(capsys, "model", *argv)
    assert err.startswith("collops model: error: ") and words in err
