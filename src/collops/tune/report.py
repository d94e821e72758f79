"""``collops tune --report``: the tuned choice against the built-in default, per size."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from .decide import Decision


def plot_report(results: Mapping[int, Mapping[str, Sequence[Decision]]],
                path: str | Path) -> None:
    """One panel per rank count: the default's time over the winner's, per size and
    collective (1 = the default kept; above 1 = the tuned rule is faster)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6.5 * len(results), 4.2), squeeze=False)
    for ax, (n, per) in zip(axes[0], sorted(results.items()), strict=True):
        for collective, decisions in per.items():
            xs = [max(d.nbytes, 1) for d in decisions]
            ys = [d.speedup if d.changed else 1.0 for d in decisions]
            line, = ax.plot(xs, ys, marker="o", label=collective)
            for d, x, y in zip(decisions, xs, ys, strict=True):
                if d.changed:
                    ax.annotate(d.best.label, (x, y), fontsize=7,
                                xytext=(3, 3), textcoords="offset points",
                                color=line.get_color())
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message bytes")
        ax.set_ylabel("default time / tuned time")
        ax.set_title(f"{n} ranks: tuned rules against the built-in defaults", fontsize=10)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
