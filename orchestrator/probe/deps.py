"""Explicit seams a test injects into the code under test: a fake clock and spies.

Each read of a fake clock, and each call of a spy, counts under its name in the
result's `calls` while the test body runs (reads made during fixture setup do not).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Generic, ParamSpec, TypeVar

from orchestrator.probe.meter import CLOCK, METER, RESERVED_NAMES

P = ParamSpec("P")
R = TypeVar("R")

# The fixed epoch a fake clock starts at unless told otherwise.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Instant = datetime | float


class FakeClock:
    """A deterministic clock: `clock()` returns the current instant and counts the read.

    It never moves on its own; `advance(seconds)` moves it. The start may be an aware
    datetime (then reads return datetimes) or a number (then reads return floats).
    """

    def __init__(self, start: Instant, *, on_read: Callable[[], None]) -> None:
        self._now = start
        self._on_read = on_read
        self.calls = 0

    def __call__(self) -> Instant:
        self.calls += 1
        self._on_read()
        return self._now

    def now(self) -> Instant:
        """Same as calling the clock: one counted read."""
        return self()

    def advance(self, seconds: float) -> None:
        """Move the clock forward; this is not a read and is not counted."""
        if isinstance(self._now, datetime):
            self._now = self._now + timedelta(seconds=seconds)
        else:
            self._now = self._now + seconds

    def peek(self) -> Instant:
        """The current instant without counting a read (for assertions)."""
        return self._now


class Spy(Generic[P, R]):
    """Wraps a callable; every call is forwarded and counted under `name`."""

    def __init__(self, name: str, fn: Callable[P, R], *, on_call: Callable[[], None]) -> None:
        self.name = name
        self.wrapped = fn
        self._on_call = on_call
        self.calls = 0

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        self.calls += 1
        self._on_call()
        return self.wrapped(*args, **kwargs)


class Deps:
    """The `deps` fixture: makes fake clocks and spies whose calls the probe counts."""

    def __init__(self, declare: Callable[[str], None]) -> None:
        self._declare = declare

    def clock(self, start: Instant = EPOCH) -> FakeClock:
        self._declare(CLOCK)
        return FakeClock(start, on_read=lambda: METER.add(CLOCK))

    def spy(self, name: str, fn: Callable[P, R]) -> Spy[P, R]:
        if not name or name in RESERVED_NAMES:
            raise ValueError(f"spy name {name!r} is empty or reserved ({sorted(RESERVED_NAMES)})")
        self._declare(name)
        return Spy(name, fn, on_call=lambda: METER.add(name))
