"""The one shared-memory wait (`collops.shm.waiting`): it wakes when the awaited word changes,
gives up at its deadline, checks before every sleep, takes its durations from the settings,
and the collectives built on it time out rather than hang."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import collops
from collops import CollectiveTimeout, config
from collops.shm import waiting
from collops.shm.waiting import SLEEP, SPIN, Ladder


class Word:
    """A word another thread stores, and a doorbell it rings after storing (a futex's part)."""

    def __init__(self) -> None:
        self.value = 0
        self.bell = threading.Event()
        self.sleeps = 0

    def store_later(self, value: int, delay: float) -> threading.Thread:
        def store() -> None:
            time.sleep(delay)
            self.value = value
            self.bell.set()
        thread = threading.Thread(target=store)
        thread.start()
        return thread

    def sleep(self, timeout: float) -> None:
        self.sleeps += 1
        self.bell.wait(timeout)


@pytest.mark.parametrize("oversubscribed", [False, True])
@pytest.mark.parametrize("delay", [0.0, 0.0002, 0.05])
def test_a_waiter_wakes_when_the_word_changes(delay, oversubscribed):
    word = Word()
    storer = word.store_later(7, delay)
    ready = Ladder(oversubscribed).wait(lambda: word.value == 7, word.sleep,
                                        deadline=time.monotonic() + 30)
    storer.join()
    assert ready and word.value == 7


def test_a_wait_past_its_deadline_gives_up_and_checks_before_each_sleep():
    word, checks = Word(), []
    ready = Ladder(False).wait(lambda: word.value == 1, word.sleep,
                               lambda: checks.append(time.monotonic()),
                               deadline=time.monotonic() + 0.2)
    assert not ready
    assert len(checks) >= word.sleeps >= 1  # and one more once the deadline passed


def test_a_check_that_raises_ends_the_wait():
    def check() -> None:
        raise RuntimeError("peer failed")

    with pytest.raises(RuntimeError, match="peer failed"):
        Ladder(False).wait(lambda: False, Word().sleep, check)


def test_starting_at_the_sleep_stage_neither_spins_nor_yields():
    polls = []
    word = Word()
    word.value = 1

    def ready() -> bool:
        polls.append(1)
        return len(polls) > 1

    assert Ladder(False).wait(ready, word.sleep, start=SLEEP)
    assert len(polls) == 2 and word.sleeps == 1


def test_the_durations_come_from_the_settings(monkeypatch):
    monkeypatch.setenv("COLLOPS_SPIN_SECONDS", "3e-5")
    monkeypatch.setenv("COLLOPS_YIELD_SECONDS", "0.002")
    monkeypatch.setenv("COLLOPS_SLEEP_SLICE", "0.125")
    config.reload_settings()
    try:
        ladder, crowded = Ladder(False), Ladder(True)
    finally:
        monkeypatch.undo()
        config.reload_settings()
    assert (ladder.spin, ladder.compiled_spin, ladder.yield_seconds, ladder.sleep_slice) == (
        3e-5, 3e-5, 0.002, 0.125)
    # more ranks than cores: no spin in Python, a few polls in compiled loops
    assert crowded.spin == 0.0 and crowded.compiled_spin == waiting.OVERSUBSCRIBED_SPIN


def test_a_negative_duration_is_refused():
    with pytest.raises(ValueError, match="COLLOPS_SLEEP_SLICE"):
        config.Settings.from_env({"COLLOPS_SLEEP_SLICE": "-1"})


def test_a_spin_that_finds_nothing_halves_the_next_one():
    ladder = Ladder(False)
    full = ladder.spin
    ladder.wait(lambda: False, Word().sleep, deadline=time.monotonic() + 0.01, start=SPIN)
    assert ladder.spin == full / 2
    flag = iter([False, True])
    ladder.wait(lambda: next(flag), Word().sleep)
    assert ladder.spin == full


def _late_peer(comm):
    x = np.arange(4.0)
    if comm.rank == 1:
        time.sleep(3)  # arrives long after rank 0 gave up
        return "late"
    started = time.monotonic()
    try:
        comm.allreduce(x, timeout=0.3)
    except CollectiveTimeout:
        return time.monotonic() - started
    return "completed"


@pytest.mark.timeout(60)
def test_a_shared_memory_wait_times_out_instead_of_waiting_for_the_peer():
    got = collops.spawn(_late_peer, 2, transport="shm", timeout=30)
    # rank 0 raised before its peer arrived: the sleep stage checks the deadline
    assert isinstance(got[0], float) and got[1] == "late", got
