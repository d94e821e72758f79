"""The tuner's decisions from timings: a winner only beyond the noise, ranges between sizes."""

from __future__ import annotations

from collops.tune.decide import (
    Decision,
    Timing,
    decide,
    median_of_medians,
    ranges,
    refine_points,
    sign_test,
)


def t(name: str, *us: float) -> Timing:
    return Timing(name, tuple(x * 1e-6 for x in us))


def test_a_clear_winner_replaces_the_default() -> None:
    d = decide(1024, [t("ring", 10, 11, 10.5), t("tree", 5, 5.2, 5.1)], "ring")
    assert d.changed and d.best.algorithm == "tree"
    assert abs(d.speedup - 10.5 / 5.1) < 1e-9


def test_a_winner_slower_in_one_round_keeps_the_default() -> None:
    # the winner's median is lower, but in round 2 it was slower than the default beside it
    d = decide(8, [t("ring", 10, 10, 10), t("tree", 8, 12, 8)], "ring")
    assert d.best.algorithm == "tree" and not d.changed


def test_rounds_are_compared_pairwise_so_a_drifting_machine_does_not_hide_a_win() -> None:
    # the machine slows down round by round; the winner is 20 % faster in every round, though
    # its slowest round is slower than the default's fastest
    d = decide(8, [t("ring", 10, 20, 40), t("tree", 8, 16, 32)], "ring")
    assert d.changed


def test_a_gain_below_five_percent_keeps_the_default() -> None:
    d = decide(8, [t("ring", 10, 10, 10), t("tree", 9.7, 9.7, 9.7)], "ring")
    assert not d.changed


def test_neighbouring_sizes_with_one_winner_form_one_rule_bounded_between_sizes() -> None:
    ds = [decide(n, [t("a", 10, 10, 10), t("b", *w)], "a") for n, w in [
        (8, (12, 12, 12)), (64, (5, 5, 5)), (512, (5, 5, 5)), (4096, (20, 20, 20))]]
    (only,) = ranges(ds)
    assert only.algorithm == "b"
    assert only.low == round((8 * 64) ** 0.5)           # between 8 and 64
    assert only.high == round((512 * 4096) ** 0.5) - 1  # up to between 512 and 4096
    assert [d.nbytes for d in only.decisions] == [64, 512]


def test_a_winner_at_the_largest_size_has_no_upper_bound() -> None:
    ds = [decide(n, [t("a", 10, 10, 10), t("b", *w)], "a") for n, w in [
        (8, (12, 12, 12)), (1 << 20, (5, 5, 5))]]
    (only,) = ranges(ds)
    assert only.high is None and only.low == round((8 * (1 << 20)) ** 0.5)


def test_sizes_are_added_only_where_the_winner_changes() -> None:
    by_size = {n: decide(n, [t("a", 10, 10, 10), t("b", *w)], "a") for n, w in [
        (8, (12, 12, 12)), (1024, (12, 12, 12)), (65536, (5, 5, 5))]}
    assert refine_points(by_size) == [round((1024 * 65536) ** 0.5) // 8 * 8]
    assert all(isinstance(d, Decision) for d in by_size.values())


def paired(best: list[float], default: list[float], extra_best: list[float] = (),
           extra_default: list[float] = ()) -> Decision:
    """A decision from round-by-round µs of the winner and the default (and extra rounds)."""
    d = decide(65536, [t("ring", *default), t("tree", *best)], "ring")
    extra = (t("tree", *extra_best), t("ring", *extra_default)) if extra_best else None
    return Decision(d.nbytes, d.default, d.best, extra=extra, block=2)


def test_the_sign_test_is_the_chance_of_as_many_wins_by_coin_flips() -> None:
    assert sign_test(6, 6) == 0.5 ** 6
    assert sign_test(0, 6) == 1.0
    assert sign_test(15, 18) == (816 + 153 + 18 + 1) / 2 ** 18
    assert median_of_medians([1, 3, 5, 7, 100], 2) == 4.5  # blocks (1, 3), (5, 7, 100)


def test_one_slow_round_asks_for_more_and_the_extra_rounds_decide() -> None:
    # 40 % faster but slower in one round of six: not yet a rule, worth more rounds
    d = paired([6, 6, 30, 6, 6, 6], [10] * 6)
    assert not d.changed and d.worth_more and d.rounds_won == 5
    # 11 of 12 extra rounds won: 16 of 18, beyond the level of winning 6 of 6 (halved)
    more = paired([6, 6, 30, 6, 6, 6], [10] * 6, [6] * 11 + [30], [10] * 12)
    assert more.changed and more.rounds_won == 16 and not more.worth_more
    # 14 of 18 is what a coin does too often
    fewer = paired([6, 6, 30, 6, 6, 6], [10] * 6, [6] * 9 + [30] * 3, [10] * 12)
    assert not fewer.changed and fewer.rounds_won == 14


def test_extra_rounds_keep_the_gain_bound_and_are_not_asked_below_half() -> None:
    # every round won but by 3 %: the gain bound still holds with the extra rounds
    d = paired([9.7] * 6, [10] * 6, [9.7] * 12, [10] * 12)
    assert d.rounds_won == 0 and not d.changed
    # won 2 rounds of 6: no extra rounds
    assert not paired([6, 6, 30, 30, 30, 30], [10] * 6).worth_more
    # a clear winner needs none
    assert not paired([6] * 6, [10] * 6).worth_more
