"""A timeline as a picture (matplotlib): a lane per rank, a box per step coloured by kind and
labelled with its peer and bytes, an arrow per message from the send to its receive, and thin
edges for the local dependencies."""

from __future__ import annotations

from pathlib import Path

from .timeline import KIND_NAMES, Timeline

COLOURS = {"send": "#4c78a8", "recv": "#f58518", "copy": "#54a24b", "reduce": "#e45756"}
BOX_HEIGHT = 0.6


def render_png(t: Timeline, path: str | Path) -> None:
    """Draw ``t`` into the PNG file ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    scale = 1e6 if t.unit == "s" else 1.0
    x0, x1 = t.x0 * scale, t.x1 * scale
    span = float(x1.max()) if len(x1) else 1.0
    fig, ax = plt.subplots(figsize=(min(4 + 1.2 * max(span, 1), 24) if t.unit == "level"
                                    else 14, 1.2 + 0.7 * t.nranks))
    for g in range(len(t.level)):
        kind = KIND_NAMES.get(int(t.kind[g]), "?")
        y = int(t.rank[g])
        ax.add_patch(Rectangle((x0[g], y - BOX_HEIGHT / 2), x1[g] - x0[g], BOX_HEIGHT,
                               facecolor=COLOURS.get(kind, "grey"), edgecolor="black",
                               linewidth=0.5, alpha=0.85))
        if x1[g] - x0[g] > span / 40:
            ax.text((x0[g] + x1[g]) / 2, y, t.label(g).replace(" ", "\n", 1), ha="center",
                    va="center", fontsize=7, color="white")
    for s, r in zip(t.send_steps.tolist(), t.recv_steps.tolist(), strict=True):
        ax.annotate("", xy=(x0[r], t.rank[r]), xytext=(x1[s], t.rank[s]),
                    arrowprops={"arrowstyle": "->", "color": "black", "linewidth": 0.7,
                                "shrinkA": 0, "shrinkB": 0})
    for a, b in zip(t.dep_from.tolist(), t.dep_to.tolist(), strict=True):
        ax.plot([x1[a], x0[b]], [t.rank[a] + 0.32, t.rank[b] + 0.32], color="grey",
                linewidth=0.5, linestyle=":")
    ax.set_xlim(-0.02 * span, span * 1.02 + (0.1 if t.unit == "level" else 0))
    ax.set_ylim(t.nranks - 0.5, -0.5)
    ax.set_yticks(range(t.nranks), [f"rank {r}" for r in range(t.nranks)])
    ax.set_ylabel("rank")
    ax.set_xlabel("step level (a receive one level after its send)" if t.unit == "level"
                  else "simulated time (µs)")
    ax.set_title(t.title, fontsize=10)
    ax.legend(handles=[Patch(color=c, label=k) for k, c in COLOURS.items()],
              loc="upper right", fontsize=7, ncol=4)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
