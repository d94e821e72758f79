"""A timeline as a text table: one row per level, one column per rank, each step as
``s3 send→1 16 B m2 after s1`` (its id in the rank's schedule, what it does, the message it
belongs to — the same ``m`` on the send and on its receive — and its local dependencies)."""

from __future__ import annotations

from collections import defaultdict

from .timeline import Timeline


def render_text(t: Timeline, max_width: int = 40) -> str:
    """The table; columns wider than ``max_width`` characters are cut."""
    message_of = {int(s): m for m, s in enumerate(t.send_steps)}
    message_of.update({int(r): m for m, r in enumerate(t.recv_steps)})
    after: dict[int, list[int]] = defaultdict(list)
    for a, b in zip(t.dep_from.tolist(), t.dep_to.tolist(), strict=True):
        after[b].append(int(t.index[a]))
    cells: dict[tuple[int, int], list[str]] = defaultdict(list)
    for g in range(len(t.level)):
        text = f"s{t.index[g]} {t.label(g)}"
        if g in message_of:
            text += f" m{message_of[g]}"
        if after[g]:
            text += " after " + ",".join(f"s{i}" for i in sorted(after[g]))
        cells[(int(t.level[g]), int(t.rank[g]))].append(text[:max_width])
    head = ["level" if t.unit == "level" else "time (µs)"] + [f"rank {r}"
                                                             for r in range(t.nranks)]
    rows = []
    for lv in range(t.num_levels):
        height = max((len(cells[(lv, r)]) for r in range(t.nranks)), default=0)
        at = t.x0[t.level == lv]
        name = str(lv) if t.unit == "level" else f"{at.min() * 1e6:.2f}"
        for line in range(max(height, 1)):
            rows.append([name if line == 0 else ""] + [
                cells[(lv, r)][line] if line < len(cells[(lv, r)]) else ""
                for r in range(t.nranks)])
    widths = [max(len(row[c]) for row in [head, *rows]) for c in range(len(head))]
    out = [t.title] if t.title else []
    out.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]
    return "\n".join(out)
