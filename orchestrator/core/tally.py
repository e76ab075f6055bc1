"""The four counts worth keeping, per ISO week (lanes.md section 7, seed 001). Pure.

From a list of ledger events and the ``now`` passed in:

1. properties drafted (distinct subjects of ACCEPT events) vs properties that killed
   a mutant (distinct subjects of ACCEPT events with code ``accepted``);
2. failures whose second shrink changed the minimal digest: DECISION events with
   code ``shrink_unstable`` and SHRINK events whose detail says ``stable: false``
   (one failure reported by both is counted once, matched on ``origin_digest``);
3. output matched while a call count moved: DECISION events with code
   ``call_budget`` whose base and patch labels are all ``assert_pass``;
4. freezes still live after their expiry: distinct freezes named by OVERDUE events
   (the detail's ``freeze_id``, else the subject).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from orchestrator.model import Event, EventKind, Label

TALLY_SCHEMA = "tally/1"

# (JSON key, human heading), in the order the counts are reported and plotted.
COUNTS: tuple[tuple[str, str], ...] = (
    ("properties_drafted", "Properties drafted"),
    ("properties_killed_mutant", "Killed a mutant"),
    ("shrink_changed_digest", "Second shrink changed the digest"),
    ("output_matched_calls_moved", "Output matched, call count moved"),
    ("freezes_live_after_expiry", "Freezes live after expiry"),
)


@dataclass(frozen=True, kw_only=True)
class WeekCounts:
    """The counts of one ISO week (Monday to Sunday, UTC)."""

    week: str  # "2026-W48"
    start: date  # its Monday
    properties_drafted: int = 0
    properties_killed_mutant: int = 0
    shrink_changed_digest: int = 0
    output_matched_calls_moved: int = 0
    freezes_live_after_expiry: int = 0

    def value(self, key: str) -> int:
        count: int = getattr(self, key)
        return count

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"week": self.week, "start": self.start.isoformat()}
        doc.update({key: self.value(key) for key, _ in COUNTS})
        return doc


@dataclass(frozen=True, kw_only=True)
class Tally:
    """The weekly series, oldest week first, and how many events fed them."""

    now: datetime
    weeks: tuple[WeekCounts, ...]
    events_counted: int

    @property
    def empty(self) -> bool:
        return self.events_counted == 0

    def series(self, key: str) -> tuple[int, ...]:
        return tuple(week.value(key) for week in self.weeks)

    def totals(self) -> dict[str, int]:
        return {key: sum(self.series(key)) for key, _ in COUNTS}

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": TALLY_SCHEMA,
            "now": self.now.astimezone(UTC).isoformat(),
            "weeks": [week.to_json() for week in self.weeks],
            "totals": self.totals(),
            "events_counted": self.events_counted,
            "empty": self.empty,
        }


def iso_week(moment: datetime | date) -> str:
    year, week, _ = moment.isocalendar()
    return f"{year}-W{week:02d}"


def week_starts(now: datetime, weeks: int) -> tuple[date, ...]:
    """The Mondays of the last ``weeks`` ISO weeks, the one holding ``now`` last."""
    if weeks < 1:
        raise ValueError("weeks must be at least 1")
    today = now.astimezone(UTC).date()
    this_monday = today - timedelta(days=today.weekday())
    return tuple(this_monday - timedelta(weeks=back) for back in range(weeks - 1, -1, -1))


def window_start(now: datetime, weeks: int) -> datetime:
    """The first instant the tally counts: Monday 00:00 UTC of the oldest week."""
    first = week_starts(now, weeks)[0]
    return datetime(first.year, first.month, first.day, tzinfo=UTC)


def _labels(detail: Mapping[str, Any], key: str) -> list[str]:
    value = detail.get(key)
    if isinstance(value, str) or not isinstance(value, Iterable):
        return []
    return [str(label) for label in value]


def output_matched(detail: Mapping[str, Any]) -> bool:
    """Both sides replayed, and every replay on both sides passed."""
    base, patch = _labels(detail, "base_labels"), _labels(detail, "patch_labels")
    return (
        bool(base) and bool(patch) and all(label == Label.ASSERT_PASS for label in (*base, *patch))
    )


def shrink_changed(event: Event) -> bool:
    if event.kind is EventKind.SHRINK:
        return event.detail.get("stable") is False
    return event.kind is EventKind.DECISION and event.code == "shrink_unstable"


def _subject_key(event: Event) -> str:
    # An event without a subject stands for itself.
    return event.subject if event.subject else f"event:{event.id}:{event.at.isoformat()}"


def _shrink_key(event: Event) -> str:
    origin = event.detail.get("origin_digest")
    return f"origin:{origin}" if isinstance(origin, str) and origin else _subject_key(event)


def _freeze_key(event: Event) -> str:
    freeze_id = event.detail.get("freeze_id")
    return f"freeze:{freeze_id}" if freeze_id is not None else _subject_key(event)


def tally(events: Sequence[Event], *, now: datetime, weeks: int = 8) -> Tally:
    """Count the events of the last ``weeks`` ISO weeks up to ``now`` (later ones ignored)."""
    starts = week_starts(now, weeks)
    begin = window_start(now, weeks)
    index = {iso_week(start): position for position, start in enumerate(starts)}
    drafted: list[set[str]] = [set() for _ in starts]
    killed: list[set[str]] = [set() for _ in starts]
    shrinks: list[set[str]] = [set() for _ in starts]
    budget: list[int] = [0 for _ in starts]
    overdue: list[set[str]] = [set() for _ in starts]
    counted = 0
    for event in events:
        at = event.at if event.at.tzinfo else event.at.replace(tzinfo=UTC)
        if not begin <= at <= now:
            continue
        position = index.get(iso_week(at.astimezone(UTC)))
        if position is None:
            continue
        counted += 1
        if event.kind is EventKind.ACCEPT:
            drafted[position].add(_subject_key(event))
            if event.code == "accepted":
                killed[position].add(_subject_key(event))
        elif shrink_changed(event):
            shrinks[position].add(_shrink_key(event))
        elif (
            event.kind is EventKind.DECISION
            and event.code == "call_budget"
            and output_matched(event.detail)
        ):
            budget[position] += 1
        elif event.kind is EventKind.OVERDUE:
            overdue[position].add(_freeze_key(event))
    return Tally(
        now=now,
        events_counted=counted,
        weeks=tuple(
            WeekCounts(
                week=iso_week(start),
                start=start,
                properties_drafted=len(drafted[i]),
                properties_killed_mutant=len(killed[i]),
                shrink_changed_digest=len(shrinks[i]),
                output_matched_calls_moved=budget[i],
                freezes_live_after_expiry=len(overdue[i]),
            )
            for i, start in enumerate(starts)
        ),
    )


def tally_from_json(doc: Mapping[str, Any]) -> Tally:
    """The inverse of ``Tally.to_json`` (a reader of the JSON can redraw the same plot)."""
    if doc.get("schema") != TALLY_SCHEMA:
        raise ValueError(f"not a {TALLY_SCHEMA} document")
    return Tally(
        now=datetime.fromisoformat(str(doc["now"])),
        events_counted=int(doc["events_counted"]),
        weeks=tuple(
            WeekCounts(
                week=str(week["week"]),
                start=date.fromisoformat(str(week["start"])),
                **{key: int(week[key]) for key, _ in COUNTS},
            )
            for week in doc["weeks"]
        ),
    )
