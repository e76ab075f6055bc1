"""Quarantine in the team's own test run (lanes.md section 5): does a freeze cover this
failure now?

A live freeze names one test (a flake freeze its ``property_id``, a timing freeze its
``test_name``: node ids as pytest prints them from the repository's root). In a pytest
session with the quarantine plugin (``orchestrator.quarantine``) that test still runs:

- a **flake freeze** covers a failure of the test's body (an assertion, or any exception
  raised in it: what the replay labelled ``assert_fail``), never a set-up or tear-down
  error (a replay would have called that ``harness_error``, which no freeze admits);
- a **timing freeze** covers only the timing check it admitted (seed 004): a body that
  ran out of time (a ``TimeoutError``, ``subprocess.TimeoutExpired``, a Hypothesis
  deadline, pytest-timeout's ``Timeout``), never an assertion of the test;
- a freeze applies while ``now`` is before its ``expires_at``; from then on the failure
  fails the session as usual, and the report says the freeze expired.

Pure: values in, values out; ``now`` is passed in. The documents it reads are
``freeze-export/1`` (``orchestrator freeze export``) and the ledger's rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from orchestrator.errors import SchemaError
from orchestrator.kinds import FreezeKind

EXPORT_SCHEMA = "freeze-export/1"

# Exception classes (``module.QualName``, anywhere in the type's MRO) that say the test's
# body ran out of time rather than computed a wrong answer.
TIMING_EXCEPTIONS = frozenset(
    {
        "builtins.TimeoutError",  # also socket.timeout, asyncio's and concurrent.futures'
        "subprocess.TimeoutExpired",
        "hypothesis.errors.DeadlineExceeded",
    }
)
# pytest-timeout fails the test with pytest.fail("Timeout (>1.0s) from pytest-timeout.").
PYTEST_FAILED = "_pytest.outcomes.Failed"
PYTEST_TIMEOUT_PREFIX = "Timeout"


class FailureKind(StrEnum):
    ASSERTION = "assertion"  # the body failed: an assertion, or an exception raised in it
    TIMING = "timing"  # the body ran out of time: a timeout or a deadline
    ERROR = "error"  # set-up or tear-down failed: no verdict on the body


class Standing(StrEnum):
    QUARANTINED = "quarantined"  # failed; a live freeze covers it: the session does not fail
    NOT_COVERED = "not_covered"  # failed; its live freeze does not cover this failure
    EXPIRED = "expired"  # every freeze of the test has expired: nothing applies
    PASSED = "passed"  # passed under a live freeze: a thaw candidate


@dataclass(frozen=True, kw_only=True)
class Leaf:
    """One exception of a failure (a group's leaves each): its MRO and its message."""

    types: tuple[str, ...]  # ``module.QualName`` of each class of the MRO
    message: str = ""


@dataclass(frozen=True, kw_only=True)
class Freeze:
    """What the quarantine needs of one live freeze row."""

    freeze_id: int
    kind: FreezeKind
    test: str  # the node id it names
    owner: str
    opened_at: datetime
    expires_at: datetime
    reason: str  # why it was frozen, one line
    assertion_id: str | None = None  # flake: the failure that was frozen
    budget_ms: float | None = None  # timing: the written budget

    def live(self, now: datetime) -> bool:
        return _utc(now) < self.expires_at

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.freeze_id,
            "kind": self.kind.value,
            "test": self.test,
            "owner": self.owner,
            "opened_at": self.opened_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
            "reason": self.reason,
            "assertion_id": self.assertion_id,
            "budget_ms": self.budget_ms,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Freeze:
        """Inverse of :meth:`to_json` (what a pytest-xdist controller hands its workers)."""
        return cls(
            freeze_id=int(doc["id"]),
            kind=FreezeKind(doc["kind"]),
            test=str(doc["test"]),
            owner=str(doc["owner"]),
            opened_at=_time(doc["opened_at"], "opened_at"),
            expires_at=_time(doc["expires_at"], "expires_at"),
            reason=str(doc["reason"]),
            assertion_id=doc.get("assertion_id"),
            budget_ms=doc.get("budget_ms"),
        )


@dataclass(frozen=True, kw_only=True)
class Ruling:
    """What the quarantine says of one test report that a freeze names."""

    standing: Standing
    freeze: Freeze
    failed: bool  # the report failed (before the quarantine looked at it)
    note: str  # one line, for the report

    @property
    def fails_session(self) -> bool:
        return self.failed and self.standing is not Standing.QUARANTINED


# --- reading freezes ---------------------------------------------------------------------


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _time(value: Any, name: str) -> datetime:
    if isinstance(value, datetime):
        return _utc(value)
    if not isinstance(value, str):
        raise SchemaError(f"{name}: expected an ISO-8601 timestamp, got {value!r}")
    try:
        return _utc(datetime.fromisoformat(value))
    except ValueError:
        raise SchemaError(f"{name}: not an ISO-8601 timestamp: {value!r}") from None


def _text(record: Mapping[str, Any], name: str, where: str) -> str:
    value = record.get(name)
    if not isinstance(value, str) or not value.strip():
        raise SchemaError(f"{where}.{name}: expected a non-empty string")
    return value


def _failed(labels: Any) -> tuple[int, int]:
    listed = [label for label in labels or () if isinstance(label, str)]
    return sum(label == "assert_fail" for label in listed), len(listed)


def freeze_reason(kind: FreezeKind, record: Mapping[str, Any]) -> str:
    """Why the freeze was opened, in one line, from its record (records.md "Freeze rows")."""
    if kind is FreezeKind.FLAKE:
        replays = record.get("replays")
        sides = replays if isinstance(replays, Mapping) else {}
        counts = ", ".join(
            "{} {}/{}".format(side, *_failed(sides.get(side))) for side in ("base", "patch")
        )
        where = record.get("assertion_id") or "?"
        return f"flaky on both sides ({counts} replays failed) at {where}"
    samples = record.get("sample_runs")
    spread = record.get("spread_ms")
    budget = record.get("budget_ms")
    return f"timing debt: {samples} samples spread {_ms(spread)} over a budget of {_ms(budget)}"


def _ms(value: Any) -> str:
    return f"{value:g} ms" if isinstance(value, int | float) else "? ms"


def freeze_from_row(
    *,
    freeze_id: int,
    kind: FreezeKind,
    subject: str,
    owner: str,
    opened_at: datetime,
    expires_at: datetime,
    record: Mapping[str, Any],
) -> Freeze:
    """A ledger row (its indexed columns and its record) as the quarantine sees it."""
    budget = record.get("budget_ms")
    assertion = record.get("assertion_id")
    return Freeze(
        freeze_id=freeze_id,
        kind=kind,
        test=subject,
        owner=owner,
        opened_at=_utc(opened_at),
        expires_at=_utc(expires_at),
        reason=freeze_reason(kind, record),
        assertion_id=assertion if isinstance(assertion, str) else None,
        budget_ms=float(budget)
        if isinstance(budget, int | float) and not isinstance(budget, bool)
        else None,
    )


def freezes_from_export(doc: Any) -> tuple[Freeze, ...]:
    """The freezes of a ``freeze-export/1`` document; a document of another shape is a
    :class:`SchemaError` naming what is wrong (never a partial list)."""
    if not isinstance(doc, Mapping) or doc.get("schema") != EXPORT_SCHEMA:
        found = doc.get("schema") if isinstance(doc, Mapping) else type(doc).__name__
        raise SchemaError(f"expected a {EXPORT_SCHEMA} document, got {found!r}")
    entries = doc.get("freezes")
    if not isinstance(entries, list):
        raise SchemaError("freezes: expected an array")
    freezes = []
    kinds = {kind.value: kind for kind in FreezeKind}
    for index, entry in enumerate(entries):
        where = f"freezes[{index}]"
        if not isinstance(entry, Mapping):
            raise SchemaError(f"{where}: expected an object")
        freeze_id, kind, record = entry.get("id"), entry.get("kind"), entry.get("record")
        if not isinstance(freeze_id, int) or isinstance(freeze_id, bool):
            raise SchemaError(f"{where}.id: expected a whole number")
        if kind not in kinds:
            raise SchemaError(f"{where}.kind: expected one of {', '.join(sorted(kinds))}")
        if not isinstance(record, Mapping):
            raise SchemaError(f"{where}.record: expected an object")
        test_field = "property_id" if kinds[kind] is FreezeKind.FLAKE else "test_name"
        freezes.append(
            freeze_from_row(
                freeze_id=freeze_id,
                kind=kinds[kind],
                subject=_text(record, test_field, f"{where}.record"),
                owner=_text(record, "owner", f"{where}.record"),
                opened_at=_time(record.get("opened_at"), f"{where}.record.opened_at"),
                expires_at=_time(record.get("expires_at"), f"{where}.record.expires_at"),
                record=record,
            )
        )
    return tuple(freezes)


def by_test(freezes: Iterable[Freeze]) -> dict[str, tuple[Freeze, ...]]:
    """The freezes of each test, in id order."""
    found: dict[str, list[Freeze]] = {}
    for freeze in sorted(freezes, key=lambda f: f.freeze_id):
        found.setdefault(freeze.test, []).append(freeze)
    return {test: tuple(listed) for test, listed in found.items()}


# --- the decision ------------------------------------------------------------------------


def failure_kind(phase: str, leaves: Sequence[Leaf]) -> FailureKind:
    """What failed: set-up or tear-down (``ERROR``), the body running out of time
    (``TIMING``: every exception of it a timeout or a deadline), or the body (``ASSERTION``:
    anything else, and a failure without an exception, such as a strict xpass)."""
    if phase != "call":
        return FailureKind.ERROR
    if leaves and all(_timing(leaf) for leaf in leaves):
        return FailureKind.TIMING
    return FailureKind.ASSERTION


def _timing(leaf: Leaf) -> bool:
    if TIMING_EXCEPTIONS.intersection(leaf.types):
        return True
    return PYTEST_FAILED in leaf.types and leaf.message.startswith(PYTEST_TIMEOUT_PREFIX)


def covers(freeze: Freeze, failure: FailureKind) -> bool:
    """Whether the freeze, while live, covers a failure of this kind of its test."""
    if failure is FailureKind.ERROR:
        return False
    return freeze.kind is FreezeKind.FLAKE or failure is FailureKind.TIMING


def rule(
    freezes: Sequence[Freeze],
    *,
    failure: FailureKind | None,
    now: datetime,
    exception: str | None = None,
) -> Ruling | None:
    """The ruling on one report of a test these freezes name (``failure`` None: it
    passed; ``exception``: the class name of what it raised, when it raised); None when
    no freeze names it. Several freezes of one test: a live one that covers the failure
    wins (a flake freeze first, then the latest expiry); else a live one says why it does
    not; else the last to expire says it expired. A quarantined failure that raised
    another exception than the one frozen says so: it may be a new bug under the freeze."""
    if not freezes:
        return None
    moment = _utc(now)
    live = sorted(
        (f for f in freezes if f.live(moment)),
        key=lambda f: (f.kind is not FreezeKind.FLAKE, -f.expires_at.timestamp(), _order(f)),
    )
    if not live:
        last = max(freezes, key=lambda f: (f.expires_at, _order(f)))
        return Ruling(
            standing=Standing.EXPIRED,
            freeze=last,
            failed=failure is not None,
            note=f"{_named(last)} expired at {_when(last.expires_at)} (owner {last.owner}):"
            " it no longer quarantines this test",
        )
    if failure is None:
        chosen = live[0]
        return Ruling(
            standing=Standing.PASSED,
            freeze=chosen,
            failed=False,
            note=f"passed under {_named(chosen)} (owner {chosen.owner}, expires"
            f" {_when(chosen.expires_at)}, {_left(chosen.expires_at, moment)}): a thaw candidate",
        )
    covering = [f for f in live if covers(f, failure)]
    if covering:
        chosen = covering[0]
        frozen = frozen_exception(chosen)
        differs = (
            f"; it raised {exception}, not the {frozen} it was frozen for"
            if exception and frozen and exception != frozen
            else ""
        )
        return Ruling(
            standing=Standing.QUARANTINED,
            freeze=chosen,
            failed=True,
            note=f"quarantined by {_named(chosen)} (owner {chosen.owner}, expires"
            f" {_when(chosen.expires_at)}, {_left(chosen.expires_at, moment)}){differs}",
        )
    chosen = live[0]
    return Ruling(
        standing=Standing.NOT_COVERED,
        freeze=chosen,
        failed=True,
        note=f"{_named(chosen)} (owner {chosen.owner}) does not cover this failure:"
        f" {_not_covered_because(chosen, failure)}",
    )


def _not_covered_because(freeze: Freeze, failure: FailureKind) -> str:
    if failure is FailureKind.ERROR:
        return "a freeze covers failures of the test body, never a set-up or tear-down error"
    budget = "" if freeze.budget_ms is None else f" (budget {freeze.budget_ms:g} ms)"
    return f"a timing freeze covers only the test's timing check{budget}, never its assertions"


def frozen_exception(freeze: Freeze) -> str | None:
    """The exception class the frozen failure raised: the end of its assertion id
    (``<nodeid>@<path>:<line>:<ExceptionType>``); None when the freeze names none."""
    if not freeze.assertion_id or ":" not in freeze.assertion_id:
        return None
    return freeze.assertion_id.rsplit(":", 1)[1] or None


def _left(expires_at: datetime, now: datetime) -> str:
    """How long a live freeze has left, coarsely: ``2d 3h left``, ``5h 10m left``."""
    minutes = max(int((expires_at - now).total_seconds() // 60), 0)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h left"
    return f"{hours}h {minutes}m left" if hours else f"{minutes}m left"


def _order(freeze: Freeze) -> tuple[int, str, str, float, str, str, float]:
    """A total order of freezes (ties broken by every field): the ruling is the same in
    whatever order a source lists them, even two rows that share an id."""
    return (
        freeze.freeze_id,
        freeze.kind.value,
        freeze.owner,
        freeze.opened_at.timestamp(),
        freeze.reason or "",
        freeze.assertion_id or "",
        -1.0 if freeze.budget_ms is None else float(freeze.budget_ms),
    )


def _named(freeze: Freeze) -> str:
    return f"{freeze.kind.value} freeze {freeze.freeze_id}"


def _when(moment: datetime) -> str:
    return _utc(moment).isoformat(timespec="seconds")
