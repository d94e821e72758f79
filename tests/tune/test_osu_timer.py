"""The tuner's clock times calls as `collops bench` does: each call after an untimed barrier,
only the calls counted (timed back to back, the tuner once chose rules bench found slower)."""

from __future__ import annotations

from collops.tune import measure


class _Clock:
    """A clock that moves only when told: a barrier costs 10, a call 1."""

    def __init__(self) -> None:
        self.now = 0.0
        self.events: list[str] = []

    def barrier(self) -> None:
        self.events.append("barrier")
        self.now += 10.0


def test_each_call_follows_an_untimed_barrier(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(measure.time, "perf_counter", lambda: clock.now)

    def call() -> None:
        clock.events.append("call")
        clock.now += 1.0

    took = measure.osu_timer(clock)("label", 8, call, 5)
    assert clock.events == ["barrier", "call"] * 5
    assert took == 5.0  # the calls alone, not the barriers between them
