"""Pictures of simulations (matplotlib, imported only when a plot is drawn).

* `plot_time_vs_size` — predicted time against message size, one line per algorithm;
* `plot_link_heatmap` — on a torus or mesh, the bytes leaving every node (the sum of its
  outgoing links' loads), one panel per plane along a chosen dimension;
* `plot_phase_hotspots` — the hottest link's load in every phase (or injection slot), against
  simulated time where the model times its rounds;
* `plot_ratios` — each variant's time divided by the first variant's, per size, on a linear
  axis (a 10 % effect is visible, as it is not on a log-log plot of times).

Each returns the matplotlib ``Figure``; `save` writes it to a file.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from .api import SimResult


def _pyplot() -> Any:
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    return plt


def plot_time_vs_size(results: Sequence[SimResult], title: str | None = None) -> Any:
    """Time against size, one line per (algorithm, model), log-log."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    lines: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
    for r in results:
        lines[(r.algorithm, r.model)].append((r.size, r.time_s))
    for (name, model), points in lines.items():
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                label=f"{name} ({model})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("bytes per rank contribution")
    ax.set_ylabel("predicted time (s)")
    if results:
        r0 = results[0]
        ax.set_title(title or f"{r0.collective} on {r0.topology}, {r0.nprocs} ranks")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


def node_outgoing_loads(result: SimResult, topology: Any) -> np.ndarray:
    """Bytes leaving every node: the sum of its outgoing links' loads."""
    return np.bincount(topology.link_src, weights=result.link_loads,
                       minlength=topology.num_nodes)


def plot_link_heatmap(result: SimResult, topology: Any, axis: int = 0,
                      max_planes: int = 16) -> Any:
    """Per plane of a grid (fixing coordinate ``axis``), a heat map of node outgoing loads."""
    dims = getattr(topology, "dims", None)
    if dims is None or len(dims) < 2:
        raise ValueError(f"{topology} is not a grid of two or more dimensions")
    plt = _pyplot()
    grid = node_outgoing_loads(result, topology).reshape(dims)
    planes = np.moveaxis(grid, axis, 0)
    count = min(planes.shape[0], max_planes)
    cols = int(np.ceil(np.sqrt(count)))
    rows = int(np.ceil(count / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3 * cols, 3 * rows), squeeze=False)
    vmax = float(grid.max()) or 1.0
    image = None
    for k, ax in enumerate(axes.flat):
        if k >= count:
            ax.axis("off")
            continue
        plane = planes[k].reshape(planes.shape[1], -1)
        image = ax.imshow(plane, vmin=0, vmax=vmax, cmap="inferno", origin="lower")
        ax.set_title(f"dim {axis} = {k}", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        rest = [j for j in range(len(dims)) if j != axis]
        ax.set_xlabel(f"dim {rest[-1]}" if len(rest) > 1 else "", fontsize=8)
        ax.set_ylabel(f"dim {rest[0]}", fontsize=8)
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), label="bytes sent on outgoing links")
    fig.suptitle(f"{result.collective}.{result.algorithm} on {result.topology}: link load")
    return fig


def plot_phase_hotspots(result: SimResult, per_phase: bool = False) -> Any:
    """The hottest link's load per round (injection slot), or per phase."""
    plt = _pyplot()
    stats = result.phase_hotspots.per_phase() if per_phase else result.phase_hotspots
    fig, ax = plt.subplots(figsize=(7, 4))
    x, label = round_axis(stats.time_s, "phase" if per_phase else "round (phase, injection slot)")
    ax.plot(x, stats.hot_load_bytes, drawstyle="steps-post")
    mean = result.mean_link_load_bytes
    ax.set_xlabel(label)
    ax.set_ylabel("hottest link load (bytes)")
    ax.set_title(f"{result.collective}.{result.algorithm} on {result.topology}: hot spots "
                 f"(mean link load over the run {mean:.3g} B)")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def round_axis(durations: np.ndarray, unit: str) -> tuple[np.ndarray, str]:
    """X positions of rounds: their start times when the model timed them, else their index."""
    durations = np.asarray(durations, dtype=np.float64)
    if len(durations) and np.all(np.isfinite(durations)):
        return np.r_[0.0, np.cumsum(durations)[:-1]], "simulated time at the round's start (s)"
    return np.arange(len(durations), dtype=np.float64), unit


def plot_ratios(results: Sequence[SimResult], title: str | None = None) -> Any:
    """Each variant's time over the first variant's, per size (linear y, 1 = as fast)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    times: dict[str, dict[int, float]] = defaultdict(dict)
    for r in results:
        times[r.algorithm][r.size] = r.time_s
    names = list(times)
    base = times[names[0]] if names else {}
    for name in names[1:]:
        sizes = sorted(s for s in times[name] if s in base and base[s] > 0)
        ax.plot(sizes, [times[name][s] / base[s] for s in sizes], marker="o", label=name)
    ax.axhline(1.0, color="grey", linewidth=1, linestyle="--")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("bytes per rank contribution")
    ax.set_ylabel(f"time / time of {names[0]}" if names else "time ratio")
    if results:
        r0 = results[0]
        ax.set_title(title or f"{r0.collective} on {r0.topology}, {r0.nprocs} ranks, "
                              f"{r0.model} model")
    ax.grid(True, alpha=0.3)
    if len(names) > 1:
        ax.legend()
    fig.tight_layout()
    return fig


def save(fig: Any, path: str) -> None:
    """Write a figure to ``path`` (format from the extension) and close it."""
    fig.savefig(path, dpi=120)
    _pyplot().close(fig)
