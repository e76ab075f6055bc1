"""Known ledger events across ISO weeks 2026-W45..W47 and the counts they must give."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from orchestrator.model import Event, EventKind

NOW = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)  # a Wednesday in 2026-W47
PASS, FAIL = "assert_pass", "assert_fail"


def event(
    at: datetime, kind: EventKind, code: str, subject: str | None = None, **detail: Any
) -> Event:
    return Event(id=None, at=at, kind=kind, code=code, subject=subject, detail=detail)


def day(month: int, day_: int, hour: int = 10) -> datetime:
    return datetime(2026, month, day_, hour, tzinfo=UTC)


def budget(at: datetime, subject: str, base: list[str], patch: list[str]) -> Event:
    return event(
        at, EventKind.DECISION, "call_budget", subject,
        lane="property_regression", base_labels=base, patch_labels=patch,
        calls_base=[{"clock": 1}], calls_patch=[{"clock": 2}],
    )  # fmt: skip


KNOWN_EVENTS: list[Event] = [
    # 2026-W44: outside a three-week window
    event(day(10, 30), EventKind.ACCEPT, "accepted", "t.py::old"),
    # 2026-W45 (Nov 2..8)
    event(day(11, 2, 0), EventKind.ACCEPT, "accepted", "t.py::p1"),
    event(day(11, 3), EventKind.ACCEPT, "mutant_survived", "t.py::p2"),
    event(day(11, 4), EventKind.ACCEPT, "constant_assertion", "t.py::p3"),
    event(day(11, 5), EventKind.ACCEPT, "accepted", "t.py::p1"),  # the same property again
    budget(day(11, 5), "t.py::b1", [PASS, PASS], [PASS, PASS]),
    budget(day(11, 6), "t.py::b2", [PASS, PASS], [FAIL, FAIL]),  # output did not match
    event(
        day(11, 6),
        EventKind.SHRINK,
        "shrink",
        "t.py::s1",
        stable=False,
        attempts=2,
        identical_minima=1,
        origin_digest="sha256:aa",
    ),
    event(
        day(11, 7),
        EventKind.DECISION,
        "shrink_unstable",
        "t.py::s1",
        lane="rerun_shrink",
        origin_digest="sha256:aa",
    ),  # the same failure as the SHRINK event above
    event(
        day(11, 8, 23).replace(minute=59),
        EventKind.DECISION,
        "not_reproduced",
        "t.py::x",
        base_labels=[PASS],
        patch_labels=[PASS],
    ),
    # 2026-W46 (Nov 9..15); a non-UTC timestamp that is still Sunday Nov 15 in UTC
    event(day(11, 9, 0), EventKind.ACCEPT, "infra", "t.py::p4"),
    event(day(11, 10), EventKind.OVERDUE, "overdue", "t.py::f1", freeze_id=1),
    event(day(11, 11), EventKind.OVERDUE, "overdue", "t.py::f1", freeze_id=1),  # check ran twice
    event(day(11, 11), EventKind.OVERDUE, "overdue", "t.py::f2", freeze_id=2),
    event(
        day(11, 12),
        EventKind.SHRINK,
        "shrink",
        "t.py::s2",
        stable=True,
        attempts=2,
        identical_minima=2,
    ),
    event(day(11, 13), EventKind.DECISION, "shrink_unstable", "t.py::s3", lane="rerun_shrink"),
    event(
        datetime(2026, 11, 16, 1, tzinfo=timezone(timedelta(hours=3))),
        EventKind.ACCEPT,
        "no_assertion",
        "t.py::p5",
    ),  # Nov 15 22:00 UTC
    budget(day(11, 14), "t.py::b3", [PASS], []),  # no patch replays: not "output matched"
    # 2026-W47 (Nov 16..22), up to NOW
    budget(day(11, 16), "t.py::b4", [PASS, PASS], [PASS, PASS]),
    budget(day(11, 17), "t.py::b5", [PASS], [PASS]),
    event(day(11, 16), EventKind.ACCEPT, "accepted", "t.py::p6"),
    event(day(11, 17), EventKind.ACCEPT, "accepted", "t.py::p7"),
    event(day(11, 17), EventKind.OVERDUE, "overdue", "t.py::f1", freeze_id=1),
    event(day(11, 17), EventKind.FREEZE_WRITTEN, "freeze_written", "t.py::f3"),
    # after NOW: not counted yet
    event(day(11, 19), EventKind.ACCEPT, "accepted", "t.py::future"),
]

# Worked out by hand from the list above (week, drafted, killed, shrink, budget, overdue).
EXPECTED_THREE_WEEKS = [
    ("2026-W45", 3, 1, 1, 1, 0),
    ("2026-W46", 2, 0, 1, 0, 2),
    ("2026-W47", 2, 2, 0, 2, 1),
]
EXPECTED_EVENTS_COUNTED = 9 + 8 + 6
