"""Plots draw from results (matplotlib, Agg backend)."""

from __future__ import annotations

import numpy as np
import pytest

from collops.sim import simulate
from collops.topology import parse_topology

pytest.importorskip("matplotlib")
from collops.sim import plots  # noqa: E402


def test_plots_render(tmp_path) -> None:
    topo = parse_topology("torus:2x3x4")
    results = [simulate("alltoall", name, topo, size_bytes=s)
               for name in ("linear", "pairwise") for s in (256, 1024)]
    fig = plots.plot_time_vs_size(results)
    assert len(fig.axes[0].lines) == 2
    plots.save(fig, str(tmp_path / "time.png"))
    heat = plots.plot_link_heatmap(results[0], topo, axis=0)
    images = [a.images[0].get_array() for a in heat.axes if a.images]
    assert len(images) == 2
    by_node = plots.node_outgoing_loads(results[0], topo).reshape(2, 3, 4)
    np.testing.assert_allclose(np.asarray(images[1]), by_node[1])
    plots.save(heat, str(tmp_path / "heat.png"))
    plots.save(plots.plot_phase_hotspots(results[2], per_phase=True), str(tmp_path / "h.png"))
    assert (tmp_path / "heat.png").stat().st_size > 0


def test_ratio_plot_divides_by_the_first_variant() -> None:
    topo = parse_topology("torus:2x3x4")
    results = [simulate("alltoall", name, topo, size_bytes=s)
               for name in ("linear", "pairwise", "bruck") for s in (256, 1024)]
    fig = plots.plot_ratios(results)
    ax = fig.axes[0]
    lines = [line for line in ax.lines if line.get_label() in ("pairwise", "bruck")]
    assert [line.get_label() for line in lines] == ["pairwise", "bruck"]
    for line, k in zip(lines, (2, 4), strict=True):
        np.testing.assert_allclose(line.get_ydata(), [results[k].time_s / results[0].time_s,
                                                      results[k + 1].time_s / results[1].time_s])
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_yscale() == "linear"


def test_hot_spots_are_drawn_against_time_where_rounds_are_timed() -> None:
    r = simulate("alltoall", "pairwise", parse_topology("torus:2x3x4"), size_bytes=1024)
    fig = plots.plot_phase_hotspots(r)
    x = fig.axes[0].lines[0].get_xdata()
    durations = r.phase_hotspots.time_s
    np.testing.assert_allclose(x, np.r_[0.0, np.cumsum(durations)[:-1]])
    assert "time" in fig.axes[0].get_xlabel()
    flow = simulate("alltoall", "pairwise", parse_topology("torus:2x3x4"), size_bytes=1024,
                    model="flow")
    fig = plots.plot_phase_hotspots(flow)  # time windows: non-empty, against time too
    assert len(fig.axes[0].lines[0].get_xdata()) == len(flow.phase_hotspots) > 0
    assert "time" in fig.axes[0].get_xlabel()


def test_every_heat_map_panel_has_axis_labels() -> None:
    topo = parse_topology("torus:2x3x4")
    heat = plots.plot_link_heatmap(simulate("alltoall", "linear", topo, size_bytes=256), topo)
    panels = [a for a in heat.axes if a.images]
    assert panels and all(a.get_xlabel() and a.get_ylabel() for a in panels)
