"""The grid's rounds rotate which candidate goes first, so the default is not always timed
first (before the others' switch of tables or into cold caches); the extra rounds keep their
own alternation. Fake timer on threads."""

from __future__ import annotations

from collections import Counter

import collops
from collops.tune.measure import Candidate, Tables, alternating, time_rounds

LABELS = ("default", "ring", "rabenseifner")


def _firsts(comm: collops.Comm, rounds: int, start: int) -> tuple[list[str], list[int]]:
    """The label timed first in each round, and how many samples each candidate got."""
    order: list[str] = []

    def timer(label, size, call, batch):  # type: ignore[no-untyped-def]
        order.append(label)
        return 1e-6 * batch * (1 + LABELS.index(label))

    entries = [Candidate(label, lambda: None) for label in LABELS]
    got = time_rounds(comm, Tables(comm), 8, entries, [1, 1, 1], rounds, timer, start)
    assert got == [[1e-6 * (1 + k)] * rounds for k in range(3)]  # each kept as its own
    return order[::3], [len(s) for s in got]


def test_every_candidate_goes_first_as_often():
    firsts, counts = collops.spawn(_firsts, 2, 6, 0)[0]
    assert Counter(firsts) == {label: 2 for label in LABELS}
    assert firsts[:3] == list(LABELS) and counts == [6, 6, 6]


def test_the_passes_go_on_rotating_where_the_last_stopped():
    # pass 2 of 2 rounds each starts where pass 1 stopped: over both, no label first twice
    one = collops.spawn(_firsts, 2, 2, 0)[0][0]
    two = collops.spawn(_firsts, 2, 2, 2)[0][0]
    assert one + two == ["default", "ring", "rabenseifner", "default"]


def _pair_order(comm: collops.Comm) -> list[str]:
    order: list[str] = []

    def timer(label, size, call, batch):  # type: ignore[no-untyped-def]
        order.append(label)
        return 1e-6 * batch

    pair = [Candidate(label, lambda: None) for label in LABELS[:2]]
    alternating(comm, Tables(comm), 8, pair, [1, 1], 4, timer)
    return order


def test_the_extra_rounds_still_alternate_which_goes_first():
    order = collops.spawn(_pair_order, 2)[0]
    assert order == ["default", "ring", "ring", "default"] * 2
