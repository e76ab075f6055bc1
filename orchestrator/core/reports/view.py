"""The documents of a run folder as frozen values for the renderers. Pure.

Input is what ``orchestrator.services.run_folders`` read from disk: ``summary.json``,
``run-log.json``, the properties' documents and the raw per-replay files under
``raw/<side>/``. A ``replay-report/2`` folder keeps every property's entry, evidence and
decision in its store (``records``: read one at a time, in the run's order); a
``replay-report/1`` folder (an earlier version's) lists every entry in ``summary.json``
and has an ``evidence-<n>.json`` and a ``decision-<n>.json`` file per property.

Reading is tolerant of fields that are absent (older or newer writers, other CI
systems, merged folders): an absent or mistyped optional field is shown as unknown,
never guessed. Only the summary itself must be a ``replay-report/1`` object with
a list of decisions, or a ``replay-report/2`` one with its store; anything else raises
``SchemaError``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.core.lanes import worst_exit_status
from orchestrator.core.pytest_command import split_node_id
from orchestrator.core.test_files import removed_tests_line
from orchestrator.errors import SchemaError
from orchestrator.model import REPORT_SCHEMA, REPORT_SCHEMA_V1, REPORT_SCHEMAS, Lane, LaneKind

BASE = "base"
PATCH = "patch"
SIDES = (BASE, PATCH)

# Interesting lanes first: blocking, then undecided, then the non-blocking ones (the
# order model.Lane declares them in).
LANE_ORDER: tuple[str, ...] = tuple(Lane)
# The one lane that means "nothing to look at": the property behaved alike on both sides.
GREEN_LANES = frozenset({Lane.NO_FREEZE.value})
# ...but for a verdict set aside for want of evidence (lanes.md section 3b): not blocking,
# yet what the run could not judge is worth a look.
WEAK_EVIDENCE = "weak_evidence"

SKIPPED = "skipped"  # the project skipped the test (lanes.md row 4a)

_ASSERTION_SITE = re.compile(r"@(?P<path>[^@]+):(?P<line>[0-9]+):(?P<type>[^:@]+)\Z")
_REPLAY_FILE = "replay-{number:03d}.json"


# What a lane means for the pull request (docs/lanes.md, section 3): declared with the lanes.
Kind = LaneKind


def lane_kind(lane: str, blocking: bool | None = None) -> Kind:
    """The kind of a lane; a lane this version does not know is blocking when its decision
    says so and undecided otherwise (never waved through as non-blocking)."""
    known = Lane.named(lane)
    if known is None:
        return Kind.BLOCKING if blocking else Kind.UNDECIDED
    return known.kind


def lane_rank(lane: str) -> int:
    return LANE_ORDER.index(lane) if lane in LANE_ORDER else len(LANE_ORDER)


@dataclass(frozen=True, kw_only=True)
class AssertionSite:
    """Where a failing assertion is: ``path:line`` in the test module, and its type."""

    path: str
    line: int
    exc_type: str


def assertion_site(assertion_id: str | None) -> AssertionSite | None:
    """``<nodeid>@<path>:<line>:<ExcType>`` -> its site; None for anything else."""
    if not assertion_id:
        return None
    match = _ASSERTION_SITE.search(assertion_id)
    if match is None:
        return None
    return AssertionSite(
        path=match.group("path"), line=int(match.group("line")), exc_type=match.group("type")
    )


@dataclass(frozen=True, kw_only=True)
class NodeParts:
    """A pytest node id split for JUnit: ``path::Class::test[param]``."""

    path: str
    classes: tuple[str, ...]
    name: str

    @property
    def classname(self) -> str:
        """``tests/test_x.py`` + ``TestY`` -> ``tests.test_x.TestY`` (pytest's own form)."""
        module = self.path.removesuffix(".py").replace("/", ".").replace("\\", ".")
        return ".".join((module, *self.classes)) if module else ".".join(self.classes)


def node_parts(node_id: str) -> NodeParts:
    """The JUnit view of a node id; an id without ``::`` is a name with no file."""
    node = split_node_id(node_id)
    if not node.names:
        return NodeParts(path="", classes=(), name=node_id)
    return NodeParts(path=node.path, classes=node.classes, name=node.function + node.params)


@dataclass(frozen=True, kw_only=True)
class RunDocuments:
    """What one run folder holds, as parsed JSON (the service reads; nothing here does I/O).

    ``name`` is how messages name the folder; ``link`` is the relative URL of the
    folder as seen from the report being written ("" when the report is inside it,
    else ending in "/"). ``raw`` maps ``raw/<side>/replay-<k>.json`` paths to their
    parsed ``replay-run/1`` document (None when the file is there but unreadable).
    """

    name: str
    link: str
    summary: Any
    run_log: Any = None
    evidence: Mapping[str, Any] | None = None
    decisions: Mapping[str, Any] | None = None
    raw: Mapping[str, Any] | None = None
    # replay-report/2: the store's records (``entry``, ``evidence``, ``decision`` each),
    # in the run's order; iterating reads them afresh.
    records: Iterable[Mapping[str, Any]] | None = None


@dataclass(frozen=True, kw_only=True)
class ReplayView:
    """One replay of one property on one side."""

    side: str
    number: int
    label: str
    assertion_id: str | None = None
    assertion_key: str | None = None
    duration_ms: float | None = None
    reason: str | None = None
    message: str | None = None
    log: str | None = None  # relative link to the raw replay file, when it exists
    status: str | None = None  # the raw file's status (completed, timeout, no_result, ...)
    wall_ms: float | None = None

    @property
    def failed(self) -> bool:
        return self.label == "assert_fail"

    @property
    def skipped(self) -> bool:
        return self.label == SKIPPED


@dataclass(frozen=True, kw_only=True)
class CallDelta:
    """A dependency whose set of call counts differs between the sides."""

    name: str
    base: tuple[int, ...]
    patch: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class PropertyView:
    run: str  # the run id
    index: int  # its position in the run's summary, from 1
    property_id: str
    lane: str
    code: str
    kind: Kind
    reasons: tuple[str, ...] = ()
    base: tuple[ReplayView, ...] = ()
    patch: tuple[ReplayView, ...] = ()
    labels_base: tuple[str, ...] = ()  # from the summary when no evidence file is there
    labels_patch: tuple[str, ...] = ()
    call_deltas: tuple[CallDelta, ...] = ()
    oracle_changed: bool | None = None
    base_oracle_digest: str | None = None
    patch_oracle_digest: str | None = None
    oracle_reasons: tuple[str, ...] = ()
    shrink_path: tuple[str, ...] = ()
    runner_id: str | None = None
    image_digest: str | None = None
    evidence_link: str | None = None
    decision_link: str | None = None

    @property
    def sort_key(self) -> tuple[int, int]:
        return (self.kind.rank, lane_rank(self.lane))

    def replays(self, side: str) -> tuple[ReplayView, ...]:
        return self.base if side == BASE else self.patch

    def labels(self, side: str) -> tuple[str, ...]:
        replays = self.replays(side)
        if replays:
            return tuple(replay.label for replay in replays)
        return self.labels_base if side == BASE else self.labels_patch

    def failing_assertions(self, side: str) -> tuple[str, ...]:
        """The distinct failing assertion ids of a side, in the order first seen."""
        seen: dict[str, None] = {}
        for replay in self.replays(side):
            if replay.failed and replay.assertion_id:
                seen.setdefault(replay.assertion_id, None)
        return tuple(seen)

    @property
    def skipped(self) -> bool:
        """The project skipped every replay on the patch: the test did not run there."""
        labels = self.labels(PATCH)
        return bool(labels) and all(label == SKIPPED for label in labels)

    @property
    def skip_reason(self) -> str | None:
        """The first skip's reason, the patch's before base's (None: no skipped replay or
        none gave a reason)."""
        for side in (PATCH, BASE):
            for replay in self.replays(side):
                if replay.skipped and replay.message:
                    return replay.message
        return None

    @property
    def duration_s(self) -> float:
        """Time the property's replays took, both sides (JUnit's ``time``)."""
        total = sum(replay.duration_ms or 0.0 for replay in (*self.base, *self.patch))
        return total / 1000.0


@dataclass(frozen=True, kw_only=True)
class RunView:
    """The top block of a run: its pins, exit status and properties."""

    name: str
    link: str
    run_id: str
    exit_status: int | None
    base_rev: str | None = None
    patch_rev: str | None = None
    image_digest: str | None = None
    image_ref: str | None = None
    seed: int | None = None
    command: str | None = None
    tests_from: str | None = None
    tests_from_ref: str | None = None
    # Tests the base has that the --tests-from trees lack (summary.json removed_tests).
    removed_tests: tuple[str, ...] = ()
    runner_id: str | None = None
    engines: tuple[str, ...] = ()
    replays: int | None = None
    timeout_s: float | None = None
    isolation: str | None = None
    started_at: str | None = None
    fixture_digest: str | None = None
    properties: tuple[PropertyView, ...] = ()

    def counts(self) -> dict[str, int]:
        return lane_counts(self.properties)

    @property
    def skipped(self) -> int:
        """How many properties did not run on the patch (the project skips them)."""
        return sum(item.skipped for item in self.properties)

    def removed_tests_line(self) -> str | None:
        """``the patch removes 2 tests the base has (...): they judge neither side``."""
        return removed_tests_line(
            self.tests_from_ref or "?", self.tests_from or "", self.removed_tests
        )


def lane_counts(properties: Sequence[PropertyView]) -> dict[str, int]:
    """Lane -> how many properties, most interesting lane first."""
    counts: dict[str, int] = {}
    for item in properties:
        counts[item.lane] = counts.get(item.lane, 0) + 1
    kinds = {item.lane: item.kind for item in properties}
    return dict(sorted(counts.items(), key=lambda pair: (kinds[pair[0]].rank, lane_rank(pair[0]))))


def sorted_properties(runs: Sequence[RunView]) -> list[PropertyView]:
    """Every property of every run, blocking lanes first, then in the runs' own order."""
    flat = [item for run in runs for item in run.properties]
    return sorted(flat, key=lambda item: item.sort_key)  # stable: run order within a lane


def worst_exit(runs: Sequence[RunView]) -> int | None:
    """The worst exit status of the runs (1 blocking beats 3 undecided beats 0)."""
    return worst_exit_status([run.exit_status for run in runs if run.exit_status is not None])


# ---------------------------------------------------------------- reading


def _get(doc: Any, name: str) -> Any:
    return doc.get(name) if isinstance(doc, Mapping) else None


def _str(doc: Any, name: str) -> str | None:
    value = _get(doc, name)
    return value if isinstance(value, str) else None


def _strings(doc: Any, name: str) -> tuple[str, ...]:
    value = _get(doc, name)
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _int(doc: Any, name: str) -> int | None:
    value = _get(doc, name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(doc: Any, name: str) -> float | None:
    value = _get(doc, name)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _bool(doc: Any, name: str) -> bool | None:
    value = _get(doc, name)
    return value if isinstance(value, bool) else None


def _strs(doc: Any, name: str) -> tuple[str, ...]:
    value = _get(doc, name)
    if not isinstance(value, list):
        return ()
    return tuple(item for item in value if isinstance(item, str))


def _label_list(doc: Any, name: str) -> tuple[str, ...]:
    value = _get(doc, name)
    if not isinstance(value, list):
        return ()
    return tuple(item if isinstance(item, str) else "unknown" for item in value)


def _call_sets(doc: Any, name: str) -> dict[str, tuple[int, ...]]:
    value = _get(doc, name)
    if not isinstance(value, Mapping):
        return {}
    sets: dict[str, tuple[int, ...]] = {}
    for dependency, counts in value.items():
        if isinstance(dependency, str) and isinstance(counts, list):
            sets[dependency] = tuple(
                sorted(c for c in counts if isinstance(c, int) and not isinstance(c, bool))
            )
    return sets


def call_deltas(
    base: Mapping[str, tuple[int, ...]], patch: Mapping[str, tuple[int, ...]]
) -> tuple[CallDelta, ...]:
    """The dependencies whose count sets differ, as the summary recorded them; a dependency
    one side never reported counts as ``{0}`` there (the probe's own convention)."""
    deltas = []
    for name in sorted(set(base) | set(patch)):
        before, after = base.get(name, (0,)), patch.get(name, (0,))
        if before != after:
            deltas.append(CallDelta(name=name, base=before, patch=after))
    return tuple(deltas)


def _shrink_step(step: Any) -> str | None:
    """``drop_key /a/b`` / ``shorten_string /id length=3``: one accepted step, for people."""
    if not isinstance(step, Mapping):
        return None
    words = [str(step.get("op") or "step")]
    path = step.get("path")
    if isinstance(path, list):
        words.append("/" + "/".join(str(part) for part in path))
    words.extend(
        f"{key}={value}"
        for key, value in sorted(step.items())
        if key not in ("op", "path") and isinstance(value, str | int | float | bool)
    )
    return " ".join(words)


def _shrink_path(evidence: Any) -> tuple[str, ...]:
    path = _get(_get(evidence, "shrink"), "shrink_path")
    if not isinstance(path, list):
        return ()
    steps = (_shrink_step(step) for step in path)
    return tuple(step for step in steps if step is not None)


RAW_DIR = "raw"


def raw_dir_of(entry: Any) -> str:
    """The folder of a property's raw replay files (``raw_dir`` of its summary entry, a
    relative path inside the run folder; ``raw`` when absent or unsafe)."""
    value = _str(entry, "raw_dir")
    if value is None or not value or value.startswith("/") or "\\" in value:
        return RAW_DIR
    parts = value.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return RAW_DIR
    return value


def _raw_path(side: str, number: int, raw_dir: str = RAW_DIR) -> str:
    return f"{raw_dir}/{side}/" + _REPLAY_FILE.format(number=number)


def _replays(
    evidence: Any, side: str, link: str, raw: Mapping[str, Any], raw_dir: str = RAW_DIR
) -> tuple[ReplayView, ...]:
    entries = _get(evidence, side)
    if not isinstance(entries, list):
        return ()
    views = []
    for number, entry in enumerate(entries, start=1):
        raw_path = _raw_path(side, number, raw_dir)
        raw_doc = raw.get(raw_path)
        views.append(
            ReplayView(
                side=side,
                number=number,
                label=_str(entry, "label") or "unknown",
                assertion_id=_str(entry, "assertion_id"),
                assertion_key=_str(entry, "assertion_key"),
                duration_ms=_float(entry, "duration_ms"),
                reason=_str(entry, "reason"),
                message=_str(entry, "message"),
                log=link + raw_path if raw_path in raw else None,
                status=_str(raw_doc, "status"),
                wall_ms=_float(raw_doc, "wall_ms"),
            )
        )
    return tuple(views)


def _decision_of(entry: Any, decisions: Mapping[str, Any]) -> Any:
    """The decision file when there is one, else the summary's copy, else the entry."""
    file_name = _str(entry, "decision_file")
    if file_name is not None and isinstance(decisions.get(file_name), Mapping):
        return decisions[file_name]
    nested = _get(entry, "decision")
    return nested if isinstance(nested, Mapping) else entry


def _property(
    entry: Any,
    index: int,
    run_id: str,
    docs: RunDocuments,
    stored: Mapping[str, Any] | None = None,
) -> PropertyView:
    """One property's view: from a store's record (``stored``), else from the entry and
    the files it names."""
    evidence_docs = docs.evidence or {}
    raw = docs.raw or {}
    evidence_file = _str(entry, "evidence_file")
    decision_file = _str(entry, "decision_file")
    if stored is not None:
        evidence = _get(stored, "evidence")
        decision = _get(stored, "decision")
        decision = decision if isinstance(decision, Mapping) else _decision_of(entry, {})
    else:
        evidence = evidence_docs.get(evidence_file) if evidence_file is not None else None
        decision = _decision_of(entry, docs.decisions or {})
    lane = _str(decision, "lane") or _str(entry, "lane") or "unknown"
    property_id = _str(entry, "property_id") or _str(evidence, "property_id") or f"#{index}"
    blocking = _bool(decision, "blocking")
    reasons = _strs(decision, "reasons") or _strs(entry, "reasons")
    oracle_changed = _bool(evidence, "oracle_changed")
    if oracle_changed is None:
        oracle_changed = _bool(entry, "oracle_changed")
    return PropertyView(
        run=run_id,
        index=index,
        property_id=property_id,
        lane=lane,
        code=_str(decision, "code") or _str(entry, "code") or "unknown",
        kind=lane_kind(lane, blocking),
        reasons=reasons,
        base=_replays(evidence, BASE, docs.link, raw, raw_dir_of(entry)),
        patch=_replays(evidence, PATCH, docs.link, raw, raw_dir_of(entry)),
        labels_base=_label_list(entry, "base_labels"),
        labels_patch=_label_list(entry, "patch_labels"),
        call_deltas=call_deltas(_call_sets(entry, "calls_base"), _call_sets(entry, "calls_patch")),
        oracle_changed=oracle_changed,
        base_oracle_digest=_str(evidence, "base_oracle_digest"),
        patch_oracle_digest=_str(evidence, "patch_oracle_digest"),
        oracle_reasons=_strs(evidence, "oracle_reasons"),
        shrink_path=_shrink_path(evidence),
        runner_id=_str(evidence, "runner_id"),
        image_digest=_str(evidence, "image_digest"),
        evidence_link=docs.link + evidence_file if evidence is not None and evidence_file else None,
        decision_link=(
            docs.link + decision_file
            if decision_file is not None and decision_file in (docs.decisions or {})
            else None
        ),
    )


def _engines(run_log: Any) -> tuple[str, ...]:
    engines = _strs(run_log, "engines")
    if engines:
        return engines
    single = _str(run_log, "engine")
    return (single,) if single else ()


def read_run(docs: RunDocuments) -> RunView:
    """The run folder's documents as one ``RunView``. Raises ``SchemaError`` when the
    summary is not a ``replay-report/1`` object with a list of decisions."""
    summary = docs.summary
    if not isinstance(summary, Mapping) or summary.get("schema") not in REPORT_SCHEMAS:
        found = _get(summary, "schema")
        raise SchemaError(
            f"summary.json: expected a {REPORT_SCHEMA} or {REPORT_SCHEMA_V1} document, found "
            + ("no schema" if found is None else f"schema {found!r}")
        )
    entries = summary.get("decisions")
    if not isinstance(entries, list):
        raise SchemaError("summary.json: decisions: expected an array")
    if summary.get("schema") == REPORT_SCHEMA and docs.records is None:
        raise SchemaError(f"summary.json: a {REPORT_SCHEMA} document without its store")
    # The run log in the folder is the one written before anything ran; the summary
    # carries a copy, used when the file is absent (a folder assembled elsewhere).
    run_log = docs.run_log if isinstance(docs.run_log, Mapping) else _get(summary, "run_log")
    run_id = _str(summary, "run_id") or _str(run_log, "run_id") or docs.name
    if summary.get("schema") == REPORT_SCHEMA and docs.records is not None:
        properties = tuple(
            _property(record.get("entry"), index, run_id, docs, record)
            for index, record in enumerate(docs.records, start=1)
        )
    else:
        properties = tuple(
            _property(entry, index, run_id, docs) for index, entry in enumerate(entries, start=1)
        )
    return RunView(
        name=docs.name,
        link=docs.link,
        run_id=run_id,
        exit_status=_int(summary, "exit_status"),
        base_rev=_str(run_log, "base_rev"),
        patch_rev=_str(run_log, "patch_rev"),
        image_digest=_str(run_log, "image_digest"),
        image_ref=_str(run_log, "image_ref"),
        seed=_int(run_log, "seed"),
        command=_str(run_log, "command"),
        tests_from=_str(run_log, "tests_from"),
        tests_from_ref=_str(run_log, "tests_from_ref"),
        removed_tests=_strings(summary, "removed_tests"),
        runner_id=_str(run_log, "runner_id"),
        engines=_engines(run_log),
        replays=_int(run_log, "replays"),
        timeout_s=_float(run_log, "timeout_s"),
        isolation=_str(run_log, "isolation"),
        started_at=_str(run_log, "started_at"),
        fixture_digest=_str(run_log, "fixture_digest"),
        properties=properties,
    )


def exit_meaning(status: int | None) -> str:
    return {
        None: "exit status unknown",
        0: "no blocking lane",
        1: "blocking",
        2: "bad input",
        3: "undecided",
        130: "interrupted",
    }.get(status, f"exit {status}")
