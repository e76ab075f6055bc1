"""Durations and expiries given on the command line (``72h``, ``7d``, ISO-8601). Pure."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from orchestrator.errors import InputError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str, *, option: str) -> timedelta:
    """``90s``, ``30m``, ``72h``, ``7d``, ``1w`` -> a timedelta; anything else is an InputError."""
    match = _DURATION.match(text)
    if not match:
        raise InputError(f"{option}: not a duration like 30m, 72h or 7d: {text!r}")
    return timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})


def parse_expiry(text: str, now: datetime, *, option: str = "--expires") -> datetime:
    """An ISO-8601 instant (UTC when no zone is given) or a duration from ``now``."""
    value = text.strip()
    if _DURATION.match(value):
        return now + parse_duration(value, option=option)
    try:
        instant = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"{option} {text!r}: expected an ISO-8601 time or a duration like 72h or 3d"
        ) from None
    return instant if instant.tzinfo is not None else instant.replace(tzinfo=UTC)
