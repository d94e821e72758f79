"""``collops tune --report``: the tuned choice against the built-in default, per size (a plot),
or the kept rules, the dropped ones and the candidates that did not win, with why (a text)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from .decide import Decision, ranges, why_not
from .jobs import JobRule
from .verify import Checks


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


def text_report(results: Mapping[int, Mapping[str, Sequence[Decision]]],
                checks: Mapping[int, Checks], job_rules: Mapping[int, Sequence[JobRule]],
                table_text: str, header: Sequence[str]) -> str:
    """``collops tune --report FILE`` (not ``.png``): the kept rules with their speed-ups
    (in the passes, and tuned / default in the verification), the rules dropped after
    verification and why (the tuning file's comments), and every grid point whose best
    candidate did not replace the default, with the reason (`decide.why_not`)."""
    lines = ["# collops tune report", "", *header, "", "## Kept rules", "",
             "| ranks | rule | sizes | default µs | tuned µs | speed-up | verified tuned / "
             "default |", "|---|---|---|---|---|---|---|"]
    for n, per in sorted(results.items()):
        for collective, decisions in per.items():
            for r in ranges(decisions):
                check = checks.get(n, {}).get((collective, r.low))
                if check is None or not check.kept:
                    continue
                lines.append(
                    f"| {n} | {collective} {r.decisions[0].best.label} | "
                    + ", ".join(str(d.size) for d in r.decisions) + " | "
                    + ", ".join(f"{d.default.median * 1e6:.1f}" for d in r.decisions) + " | "
                    + ", ".join(f"{d.best.median * 1e6:.1f}" for d in r.decisions) + " | "
                    + ", ".join(f"×{d.speedup:.2f}" for d in r.decisions) + " | "
                    + ", ".join(f"{row.ratio:.2f}" for row in check.rows) + " |")
        for rule in job_rules.get(n, ()):
            if rule.kept:
                lines.append(
                    f"| {n} | {rule.key} = {rule.value!r} (default {rule.default!r}) | "
                    + ", ".join(f"{c} {s}" for c, s in rule.rows) + " | "
                    + ", ".join(f"{x:.1f}" for x in rule.default_median_us) + " | "
                    + ", ".join(f"{x:.1f}" for x in rule.median_us) + " | "
                    + ", ".join(f"×{d / t:.2f}" if t > 0 else "-" for d, t
                                in zip(rule.default_median_us, rule.median_us, strict=True))
                    + " | " + ", ".join(f"{row.ratio:.2f}" for row in rule.checked) + " |")
    dropped = [line[2:] for line in table_text.splitlines()
               if line.startswith("# dropped after")]
    lines += ["", "## Dropped after verification", ""]
    lines += [f"- {line}" for line in dropped] or ["(none)"]
    lines += ["", "## Candidates that did not replace the default", "",
              "| ranks | call | size | default | µs | best | µs | ×speed-up | why not |",
              "|---|---|---|---|---|---|---|---|---|"]
    for n, per in sorted(results.items()):
        for collective, decisions in per.items():
            for d in decisions:
                why = why_not(d)
                if why:
                    lines.append(f"| {n} | {collective} | {d.size} | {d.default.label} | "
                                 f"{d.default.median * 1e6:.1f} | {d.best.label} | "
                                 f"{d.best.median * 1e6:.1f} | ×{d.speedup:.2f} | {why} |")
    return "\n".join(lines) + "\n"
