"""The discrete-event core: ordering, processes, failures."""

from __future__ import annotations

import pytest

from collops.sim.des import EmptySchedule, Environment


def test_same_time_callbacks_run_in_scheduling_order() -> None:
    env = Environment()
    seen: list[str] = []
    for name in ["c", "a", "b", "d"]:
        env.call_at(1.0, seen.append, name)
    env.call_at(0.5, seen.append, "early")
    env.run()
    assert seen == ["early", "c", "a", "b", "d"]
    assert env.now == 1.0


def test_processes_interleave_deterministically_by_sequence() -> None:
    def worker(env: Environment, name: str, delays: list[float], log: list[tuple[float, str]]):
        for d in delays:
            yield env.timeout(d)
            log.append((env.now, name))
        return name.upper()

    def run_once() -> tuple[list[tuple[float, str]], list[str]]:
        env = Environment(seed=3)
        log: list[tuple[float, str]] = []
        procs = [env.process(worker(env, n, [1.0, 1.0, 0.5], log)) for n in ("x", "y", "z")]
        env.run()
        return log, [p.value for p in procs]

    log, values = run_once()
    # equal times: the process that was scheduled first runs first, every time
    assert log == [(1.0, "x"), (1.0, "y"), (1.0, "z"), (2.0, "x"), (2.0, "y"), (2.0, "z"),
                   (2.5, "x"), (2.5, "y"), (2.5, "z")]
    assert values == ["X", "Y", "Z"]
    assert run_once() == (log, values)


def test_unhandled_failed_event_crashes_the_run() -> None:
    env = Environment()
    env.event().fail(ValueError("link down"))
    with pytest.raises(ValueError, match="link down"):
        env.run()


def test_failure_inside_a_process_crashes_unless_caught() -> None:
    def failing(env: Environment):
        yield env.timeout(1)
        raise KeyError("boom")

    env = Environment()
    env.process(failing(env))
    with pytest.raises(KeyError):
        env.run()

    def catching(env: Environment, trouble):
        try:
            yield trouble
        except RuntimeError as exc:
            return f"caught {exc}"

    env = Environment()
    trouble = env.event()
    proc = env.process(catching(env, trouble))
    env.call_at(2.0, lambda _: trouble.fail(RuntimeError("late")))
    env.run()
    assert proc.value == "caught late"
    assert env.now == 2.0


def test_waiting_on_a_process_and_running_until() -> None:
    def child(env: Environment):
        yield env.timeout(3)
        return 42

    def parent(env: Environment, out: list[int]):
        value = yield env.process(child(env))
        out.append(value)

    env = Environment()
    out: list[int] = []
    env.process(parent(env, out))
    env.run(until=1.0)
    assert out == [] and env.now == 1.0
    env.run()
    assert out == [42] and env.now == 3.0


def test_misuse_is_rejected() -> None:
    env = Environment()
    with pytest.raises(ValueError):
        env.timeout(-1)
    ev = env.event().succeed(1)
    with pytest.raises(RuntimeError):
        ev.succeed(2)
    env.run()
    with pytest.raises(EmptySchedule):
        env.step()
    with pytest.raises(ValueError):
        env.call_at(-1.0, print)
