"""Waiting for a condition, not for a time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], *, timeout: float, what: str, poll: float = 0.05) -> T:
    """Poll ``predicate`` until it returns something truthy, and return that; fail after
    ``timeout`` seconds naming ``what`` was awaited. A condition, never a sleep: the wait
    ends as soon as the condition holds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(poll)
