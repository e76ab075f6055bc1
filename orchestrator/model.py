"""Frozen values shared by the core, the adapters and the CLI.

The JSON shapes are fixed by ``docs/records.md``; ``to_json`` methods emit
exactly those field names. Parsing untrusted documents into these values is the
job of ``orchestrator.core.evidence`` (pure, raises ``SchemaError``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

# Defined apart so that the read commands build ledger rows without this module; the
# alias re-exports it (mypy's explicit re-export).
from orchestrator.kinds import FreezeKind as FreezeKind  # noqa: PLC0414

CANONICALIZATION = "json-sort-keys"

EVIDENCE_SCHEMA = "replay-evidence/1"
DECISION_SCHEMA = "replay-decision/1"
RUN_LOG_SCHEMA = "replay-run-log/1"
# summary.json and ``replay --json``: /2 lists the properties that need a look (every lane
# but no_freeze) and counts the rest, whose entries are in the run's property store; /1 (run
# folders of earlier versions) listed every property and kept its evidence and decision in
# evidence-<n>.json and decision-<n>.json.
REPORT_SCHEMA = "replay-report/2"
REPORT_SCHEMA_V1 = "replay-report/1"
REPORT_SCHEMAS = (REPORT_SCHEMA, REPORT_SCHEMA_V1)
# The run's property store: every property's report entry, evidence and decision, one JSON
# line each, gzip-compressed, in the run's order (docs/records.md).
PROPERTIES_SCHEMA = "replay-properties/1"
PROPERTIES_FILE = "properties.jsonl.gz"
# Where a run's decided properties wait until it completes (services/property_store.py).
PROPERTIES_SPOOL = ".properties.spool"
SHRINK_SCHEMA = "shrink-report/1"
FREEZE_SCHEMA = "freeze-record/1"


class Label(StrEnum):
    """The outcome of one replay of one property (lanes.md section 1)."""

    ASSERT_PASS = "assert_pass"
    ASSERT_FAIL = "assert_fail"
    TIMEOUT = "timeout"
    HARNESS_ERROR = "harness_error"
    # The project's own skip (pytest.skip, skipif, unittest.skip/skipTest, xfail): the
    # run went fine and gave no verdict on purpose. Neither completed nor infrastructure.
    SKIPPED = "skipped"

    @property
    def completed(self) -> bool:
        return self in (Label.ASSERT_PASS, Label.ASSERT_FAIL)

    @classmethod
    def is_completed(cls, raw: str) -> bool:
        """``completed`` for a raw label string (an unknown label never completed)."""
        return raw in COMPLETED_LABELS

    @classmethod
    def is_infra(cls, raw: str) -> bool:
        """A replay without a verdict that the runner, not the project, is to blame for."""
        return raw in (Label.TIMEOUT.value, Label.HARNESS_ERROR.value)


KNOWN_LABELS = frozenset(label.value for label in Label)
COMPLETED_LABELS = frozenset(label.value for label in Label if label.completed)


class LaneKind(StrEnum):
    """What a lane means for the pull request (lanes.md section 3), worst first: its exit
    status and its severity (a run's exit status is its most severe lane's)."""

    exit_status: int
    severity: int

    def __new__(cls, value: str, exit_status: int, severity: int) -> LaneKind:
        member = str.__new__(cls, value)
        member._value_ = value
        member.exit_status = exit_status
        member.severity = severity
        return member

    BLOCKING = "blocking", 1, 2
    UNDECIDED = "undecided", 3, 1
    NON_BLOCKING = "non-blocking", 0, 0

    @property
    def rank(self) -> int:
        """Display order of the kinds: blocking first."""
        return -self.severity


class Lane(StrEnum):
    """Where a decision sends the case (lanes.md section 3).

    Each lane is declared here once, with its kind and what it means in one line; the
    declaration order is the reports' order (the interesting lanes first). Every table
    of lanes (the reports' order and meanings, the exit statuses, docs/lanes.md) is
    derived from or checked against this one (tests/unit/test_lane_tables.py).
    """

    kind: LaneKind
    meaning: str

    def __new__(cls, value: str, kind: LaneKind, meaning: str) -> Lane:
        member = str.__new__(cls, value)
        member._value_ = value
        member.kind = kind
        member.meaning = meaning
        return member

    REJECT_RUN = "reject_run", LaneKind.BLOCKING, "the oracle changed between the sides"
    PROPERTY_REGRESSION = (
        "property_regression",
        LaneKind.BLOCKING,
        "the patch broke the property or moved its call budget",
    )
    DIFFERENT_BUG = (
        "different_bug",
        LaneKind.BLOCKING,
        "both sides fail, on different assertions",
    )
    BLOCK_PATCH = (
        "block_patch",
        LaneKind.BLOCKING,
        "fails uniformly on the patch (and on base too)",
    )
    REJECT_MALFORMED = "reject_malformed", LaneKind.UNDECIDED, "the evidence is invalid"
    INFRA_QUEUE = (
        "infra_queue",
        LaneKind.UNDECIDED,
        "a timeout or harness error: no verdict",
    )
    RERUN_SHRINK = "rerun_shrink", LaneKind.UNDECIDED, "the shrunk fixture is not stable"
    FLAKE_QUEUE_ELIGIBLE = (
        "flake_queue_eligible",
        LaneKind.NON_BLOCKING,
        "flaky on both sides, same assertion",
    )
    FIX_CANDIDATE = (
        "fix_candidate",
        LaneKind.NON_BLOCKING,
        "fails on base, passes on the patch",
    )
    NO_FREEZE = (
        "no_freeze",
        LaneKind.NON_BLOCKING,
        "alike on both sides, skipped by the project, or without evidence at the cap",
    )

    @property
    def blocking(self) -> bool:
        return self.kind is LaneKind.BLOCKING

    @property
    def undecided(self) -> bool:
        return self.kind is LaneKind.UNDECIDED

    @property
    def exit_status(self) -> int:
        """0 non-blocking, 1 blocking, 3 undecided (records.md)."""
        return self.kind.exit_status

    @property
    def severity(self) -> int:
        """Orders lanes so that a report's exit status is its worst lane's."""
        return self.kind.severity

    @classmethod
    def named(cls, value: str) -> Lane | None:
        """The lane a document names (None for one this version does not know)."""
        return _LANES_BY_VALUE.get(value)


_LANES_BY_VALUE = {lane.value: lane for lane in Lane}


@dataclass(frozen=True, kw_only=True, slots=True)
class Replay:
    """One replay of the selected property on one side.

    ``label`` is kept as the raw string so that evidence with an unknown label can
    still be represented and rejected by the decision (``unknown_label``).
    ``reason`` is the sub-reason of a ``harness_error`` or ``timeout``
    (``oom``, ``impure_network``, ``collection_error``, ``image_mismatch``, ...).
    ``assertion_key`` is the failing assertion without its line number
    (``<nodeid>@<function qualname>+<line offset>:<ExcType>``): it survives lines
    inserted above the test, so the sides compare by it when every failure has one.
    """

    label: str
    assertion_id: str | None = None
    assertion_key: str | None = None
    calls: Mapping[str, int] = field(default_factory=dict)
    duration_ms: float | None = None
    image_digest: str | None = None
    runner_id: str | None = None
    reason: str | None = None
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "label": self.label,
            "assertion_id": self.assertion_id,
            "assertion_key": self.assertion_key,
            "calls": dict(sorted(self.calls.items())),
            "duration_ms": self.duration_ms,
        }
        for name in ("image_digest", "runner_id", "reason", "message"):
            value = getattr(self, name)
            if value is not None:
                doc[name] = value
        return doc


@dataclass(frozen=True, kw_only=True)
class ShrinkSummary:
    """Where the fixture came from: the stability part of a shrink report."""

    attempts: int
    identical_minima: int
    stable: bool
    minimal_digest: str | None = None
    origin_digest: str | None = None
    shrink_path: tuple[Mapping[str, Any], ...] = ()
    # Where a test's shrink ran (``shrink --test``): the test, its revision, the image
    # ID and the seed. None for a host-side property's shrink.
    test: str | None = None
    rev: str | None = None
    image_id: str | None = None
    seed: int | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "attempts": self.attempts,
            "identical_minima": self.identical_minima,
            "stable": self.stable,
        }
        if self.minimal_digest is not None:
            doc["minimal_digest"] = self.minimal_digest
        if self.origin_digest is not None:
            doc["origin_digest"] = self.origin_digest
        if self.shrink_path:
            doc["shrink_path"] = [dict(step) for step in self.shrink_path]
        for name in ("test", "rev", "image_id", "seed"):
            value = getattr(self, name)
            if value is not None:
                doc[name] = value
        return doc


@dataclass(frozen=True, kw_only=True, slots=True)
class Evidence:
    """Everything the decision needs about one property on both sides.

    Required fields are ``Optional`` on purpose: a missing one is represented as
    ``None`` and becomes ``reject_malformed`` / ``missing_field:<name>``.
    ``base_oracle_digest``/``patch_oracle_digest`` digest the property's oracle slice on
    each side (None where the test does not exist, or where the document's writer did not
    slice); ``oracle_reasons`` say what differs. ``oracle_changed`` stays for documents
    that carry no digests. ``tests_from`` is the SHA whose test files judged both sides
    (``--tests-from``; None: each side ran its own tests).
    """

    base_rev: str | None
    patch_rev: str | None
    image_digest: str | None
    runner_id: str | None
    command: str | None
    property_id: str | None
    seed: int | None
    fixture_digest: str | None
    origin_digest: str | None
    oracle_changed: bool
    shrink: ShrinkSummary | None
    replays: int | None
    base: tuple[Replay, ...]
    patch: tuple[Replay, ...]
    base_oracle_digest: str | None = None
    patch_oracle_digest: str | None = None
    oracle_reasons: tuple[str, ...] = ()
    # Screening (lanes.md, "Screening"): the first ``screened`` replays of each side were
    # the screening pass; ``signal`` says why the property got more (empty: it did not).
    screened: int = 0
    signal: tuple[str, ...] = ()
    # Evidence rounds (lanes.md section 3b): the last ``adaptive`` replays of each side
    # were replayed because a blocking verdict on a mixed side lacked evidence.
    adaptive: int = 0
    # The container's environment, a pin like the image: the variables every replay got
    # (PYTHONPATH aside) and each side's PYTHONPATH entries. Empty when not recorded.
    environment: Mapping[str, str] = field(default_factory=dict)
    pythonpath: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    tests_from: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc = {
            "schema": EVIDENCE_SCHEMA,
            "base_rev": self.base_rev,
            "patch_rev": self.patch_rev,
            "image_digest": self.image_digest,
            "runner_id": self.runner_id,
            "command": self.command,
            "property_id": self.property_id,
            "seed": self.seed,
            "fixture_digest": self.fixture_digest,
            "origin_digest": self.origin_digest,
            "oracle_changed": self.oracle_changed,
            "base_oracle_digest": self.base_oracle_digest,
            "patch_oracle_digest": self.patch_oracle_digest,
            "oracle_reasons": list(self.oracle_reasons),
            "tests_from": self.tests_from,
            "shrink": None if self.shrink is None else self.shrink.to_json(),
            "replays": self.replays,
            "base": [replay.to_json() for replay in self.base],
            "patch": [replay.to_json() for replay in self.patch],
            "environment": dict(sorted(self.environment.items())),
            "pythonpath": {side: list(paths) for side, paths in sorted(self.pythonpath.items())},
        }
        if self.screened:
            doc["screened"] = self.screened
            doc["signal"] = list(self.signal)
        if self.adaptive:
            doc["adaptive"] = self.adaptive
        return doc


@dataclass(frozen=True, kw_only=True, slots=True)
class Decision:
    """The lane picked for one piece of evidence. Never carries a merge bit.

    ``tests_from`` is the evidence's: the SHA whose test files were the oracle on both
    sides (written only when there is one).
    """

    lane: Lane
    code: str
    blocking: bool
    freeze_allowed: bool
    reasons: tuple[str, ...] = ()
    tests_from: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "schema": DECISION_SCHEMA,
            "lane": self.lane.value,
            "code": self.code,
            "blocking": self.blocking,
            "freeze_allowed": self.freeze_allowed,
            "reasons": list(self.reasons),
        }
        if self.tests_from is not None:
            doc["tests_from"] = self.tests_from
        return doc


@dataclass(frozen=True, kw_only=True)
class FlakeFreeze:
    """A flake freeze row (lanes.md section 5). Validated by ``core.records``."""

    property_id: str | None
    assertion_id: str | None
    seed: int | None
    fixture_digest: str | None
    origin_digest: str | None
    shrink_path: tuple[Mapping[str, Any], ...] | None
    canonicalization: str | None
    replays: Mapping[str, tuple[str, ...]] | None  # {"base": labels, "patch": labels}
    base_rev: str | None
    patch_rev: str | None
    image_digest: str | None
    runner_id: str | None
    command: str | None
    owner: str | None
    opened_at: datetime | None
    expires_at: datetime | None

    kind: FreezeKind = FreezeKind.FLAKE


@dataclass(frozen=True, kw_only=True)
class TimingFreeze:
    """A timing freeze row (lanes.md section 5). Validated by ``core.records``."""

    test_name: str | None
    owner: str | None
    opened_at: datetime | None
    max_age_hours: float | None
    sample_runs: int | None
    samples: tuple[float, ...] | None
    spread_ms: float | None
    budget_ms: float | None
    oracle_digest: str | None
    expires_at: datetime | None

    kind: FreezeKind = FreezeKind.TIMING


class EventKind(StrEnum):
    """Kinds of rows in the ledger's append-only event log (lanes.md sections 5-7)."""

    DECISION = "decision"  # a lane decided for one property (detail: evidence summary)
    ADMISSION = "admission"  # a timing admission code (timing_debt_opened or a rejection)
    FREEZE_WRITTEN = "freeze_written"
    FREEZE_REFUSED = "freeze_refused"  # code = the rejection code; no freeze was written
    INFRA_QUEUED = "infra_queued"
    THAWED = "thawed"
    OVERDUE = "overdue"  # a freeze found live past its expiry (by check or thaw)
    ACCEPT = "accept"  # a property acceptance outcome (code "accepted" or a refusal code)
    SHRINK = "shrink"  # a shrink stability report (detail: attempts, identical_minima)


@dataclass(frozen=True, kw_only=True)
class Event:
    """One row of the append-only event log. ``at`` is timezone-aware UTC."""

    id: int | None
    at: datetime
    kind: EventKind
    code: str
    subject: str | None = None  # property id, freeze id or test name
    detail: Mapping[str, Any] = field(default_factory=dict)
