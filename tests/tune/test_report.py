"""``collops tune --report FILE``: the kept rules with their speed-ups, the rules dropped after
verification with why, and each candidate that did not replace the default with why."""

from __future__ import annotations

from collops.tune.decide import Timing, decide
from collops.tune.jobs import JobRule
from collops.tune.report import text_report
from collops.tune.table import write_table
from collops.tune.verify import Check, Row


def t(name: str, *us: float) -> Timing:
    return Timing(name, tuple(x * 1e-6 for x in us))


def test_the_report_names_kept_rules_dropped_ones_and_why_the_others_lost() -> None:
    won = decide(262144, [t("ring", 100, 100, 100), t("shm_stream", 50, 50, 50)], "ring",
                 32768)
    lost = decide(1 << 20, [t("ring", 100, 100, 100), t("tree", 50, 50, 150)], "ring",
                  131072)
    dropped = decide(512, [t("linear", 10, 10, 10), t("tree", 5, 5, 5)], "linear", 64)
    results = {2: {"allreduce": [won, lost], "bcast": [dropped]}}
    rows = (Row("allreduce", 32768, "ring", "shm_stream", (1e-4,) * 3, (5.5e-5,) * 3),)
    bad = (Row("bcast", 64, "linear", "tree", (1e-5,) * 3, (1.2e-5,) * 3),)
    checks = {2: {("allreduce", 0): Check(rows, True), ("bcast", 0): Check(bad, False)}}
    cells = JobRule("p2p_ring_cells", 256, 64, 2, (("burst", 8),), (20.0,), (40.0,), 2,
                    (Row("burst", 8, "p2p", "p2p", (4e-5,) * 5, (2e-5,) * 5),), kept=True)
    text = write_table(results, {}, "shm", checks, {2: [cells]})
    report = text_report(results, checks, {2: [cells]}, text, ["`collops tune -n 2`"])
    kept = report.split("## Kept rules")[1].split("## Dropped")[0]
    assert "| 2 | allreduce shm_stream | 32768 | 100.0 | 50.0 | ×2.00 | 0.55 |" in kept
    assert ("| 2 | shm.p2p_ring_cells = 256 (default 64) | burst 8 | 40.0 | 20.0 | ×2.00 | "
            "0.50 |") in kept
    assert "bcast" not in kept and "tree" not in kept
    gone = report.split("## Dropped after verification")[1].split("## Candidates")[0]
    assert "- dropped after verification: bcast tree, 0- B, 2 ranks: tuned / default 1.20" \
        in gone
    others = report.split("## Candidates that did not replace the default")[1]
    assert ("| 2 | allreduce | 131072 | ring | 100.0 | tree | 50.0 | ×2.00 | won 2 of 3 "
            "rounds by 5%: not every round, no extra rounds |") in others
    assert "shm_stream" not in others
