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
