"""A small deterministic discrete-event core, in the manner of SimPy.

Time advances by popping the earliest entry of one heap of ``(time, priority, sequence,
event)``. The sequence number grows with every scheduling, so two events due at the same time
and priority are processed in the order they were scheduled: a run depends only on its inputs
(and on the seed of ``env.rng``, the one source of randomness a model may use).

An `Event` is triggered once, either with a value (`succeed`) or with an exception (`fail`),
and its callbacks run when it is processed. A *process* is a generator that yields events and
is resumed with each event's value (or has the event's exception thrown into it). A failed
event that no callback takes responsibility for — no process catches its exception — crashes
the run: `Environment.step` raises the exception instead of silently dropping it.

Models that need millions of events (the packet model) use `Environment.call_at`, a plain
callback scheduled at an absolute time, which costs one small object and one heap push.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Generator
from typing import Any

import numpy as np

#: priorities: lower runs first among events due at the same time
URGENT = 0
NORMAL = 1

_PENDING = object()


class EmptySchedule(Exception):
    """Raised by `Environment.step` when no event is left."""


class Event:
    """Something that happens once, at a simulated time, with a value or an exception."""

    __slots__ = ("env", "callbacks", "_value", "ok", "defused")

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.callbacks: list[Callable[[Event], None]] | None = []
        self._value: Any = _PENDING
        self.ok = True
        self.defused = False

    @property
    def triggered(self) -> bool:
        """Whether the event has been given its value (it may not be processed yet)."""
        return self._value is not _PENDING

    @property
    def processed(self) -> bool:
        """Whether the event's callbacks have run."""
        return self.callbacks is None

    @property
    def value(self) -> Any:
        """The value (or exception) the event was triggered with."""
        if self._value is _PENDING:
            raise RuntimeError("event not triggered yet")
        return self._value

    def succeed(self, value: Any = None, priority: int = NORMAL) -> Event:
        """Trigger the event with ``value`` now."""
        self._trigger(value, True, priority)
        return self

    def fail(self, exception: BaseException, priority: int = NORMAL) -> Event:
        """Trigger the event with an exception now; unhandled, it crashes the run."""
        if not isinstance(exception, BaseException):
            raise TypeError(f"{exception!r} is not an exception")
        self._trigger(exception, False, priority)
        return self

    def _trigger(self, value: Any, ok: bool, priority: int) -> None:
        if self._value is not _PENDING:
            raise RuntimeError(f"{self!r} has already been triggered")
        self._value, self.ok = value, ok
        self.env.schedule(self, priority)


class Timeout(Event):
    """An event that succeeds ``delay`` after its creation."""

    __slots__ = ()

    def __init__(self, env: Environment, delay: float, value: Any = None) -> None:
        if delay < 0:
            raise ValueError(f"negative delay {delay}")
        super().__init__(env)
        self._value = value
        env.schedule(self, NORMAL, delay)


class _Call(Event):
    """A bare callback at a time (the packet model's workhorse)."""

    __slots__ = ("fn", "arg")

    def __init__(self, env: Environment, fn: Callable[[Any], None], arg: Any) -> None:
        self.env = env
        self.callbacks = []
        self._value = None
        self.ok = True
        self.defused = False
        self.fn = fn
        self.arg = arg


ProcessGenerator = Generator[Event, Any, Any]


class Process(Event):
    """Runs a generator that yields events; succeeds with the generator's return value."""

    __slots__ = ("_generator", "_target")

    def __init__(self, env: Environment, generator: ProcessGenerator) -> None:
        super().__init__(env)
        self._generator = generator
        self._target: Event | None = None
        start = Event(env)
        start.callbacks.append(self._resume)  # type: ignore[union-attr]
        start.succeed(priority=URGENT)

    @property
    def is_alive(self) -> bool:
        """Whether the generator has not finished."""
        return self._value is _PENDING

    def _resume(self, event: Event) -> None:
        env = self.env
        env.active_process = self
        while True:
            try:
                if event.ok:
                    target = self._generator.send(event._value)
                else:
                    event.defused = True  # the process now owns the exception
                    target = self._generator.throw(event._value)
            except StopIteration as stop:
                self._target = None
                self.succeed(stop.value)
                break
            except BaseException as exc:
                self._target = None
                self.fail(exc)
                break
            if not isinstance(target, Event):
                exc2 = RuntimeError(f"process yielded {target!r}, not an event")
                self._generator.close()
                self.fail(exc2)
                break
            if target.callbacks is None:  # already processed: continue at once
                event = target
                continue
            target.callbacks.append(self._resume)
            self._target = target
            break
        env.active_process = None


class Environment:
    """Simulated time, the event heap and the run loop; ``seed`` seeds ``self.rng``."""

    def __init__(self, initial_time: float = 0.0, seed: int = 0) -> None:
        self.now = float(initial_time)
        self._queue: list[tuple[float, int, int, Event]] = []
        self._sequence = 0
        self.rng = np.random.default_rng(seed)
        self.active_process: Process | None = None
        self.processed_events = 0

    # -- making events -------------------------------------------------------------------
    def event(self) -> Event:
        """A new untriggered event."""
        return Event(self)

    def timeout(self, delay: float, value: Any = None) -> Timeout:
        """An event that succeeds after ``delay``."""
        return Timeout(self, delay, value)

    def process(self, generator: ProcessGenerator) -> Process:
        """Start a process driven by ``generator``."""
        return Process(self, generator)

    def call_at(self, time: float, fn: Callable[[Any], None], arg: Any = None,
                priority: int = NORMAL) -> None:
        """Call ``fn(arg)`` at absolute ``time`` (not before now)."""
        if time < self.now:
            raise ValueError(f"cannot schedule at {time} before now ({self.now})")
        self._sequence += 1
        heapq.heappush(self._queue, (time, priority, self._sequence, _Call(self, fn, arg)))

    def schedule(self, event: Event, priority: int = NORMAL, delay: float = 0.0) -> None:
        """Put a triggered event on the heap, ``delay`` from now."""
        self._sequence += 1
        heapq.heappush(self._queue, (self.now + delay, priority, self._sequence, event))

    # -- running -------------------------------------------------------------------------
    def peek(self) -> float:
        """Time of the next event (infinity when none is left)."""
        return self._queue[0][0] if self._queue else float("inf")

    def step(self) -> None:
        """Process the next event; raise its exception if it failed and nobody handled it."""
        try:
            self.now, _, _, event = heapq.heappop(self._queue)
        except IndexError:
            raise EmptySchedule() from None
        self.processed_events += 1
        if type(event) is _Call:
            event.fn(event.arg)
            return
        callbacks, event.callbacks = event.callbacks, None
        for callback in callbacks or ():
            callback(event)
        if not event.ok and not event.defused:
            raise event._value

    def run(self, until: float | Event | None = None) -> Any:
        """Run until no event is left, until a time, or until an event is processed."""
        if isinstance(until, Event):
            stop = until
            if stop.callbacks is None:
                return stop.value
            while stop.callbacks is not None:
                if not self._queue:
                    raise RuntimeError("no more events, but the awaited event never happened")
                self.step()
            if not stop.ok:
                raise stop._value
            return stop._value
        horizon = float("inf") if until is None else float(until)
        if horizon < self.now:
            raise ValueError(f"until={horizon} lies before now ({self.now})")
        queue = self._queue
        while queue and queue[0][0] <= horizon:
            self.step()
        if until is not None:
            self.now = horizon
        return None
