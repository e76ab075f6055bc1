"""A bilateral replay run as values: what it pinned, one evidence and decision per
property, and the documents it writes (the run log and the replay report).

Everything here is pure; ``orchestrator.services.replay`` does the wiring (pin the
revisions and the image, run both sides, write the run folder, call the ledger).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.core.calls import call_sets, compare, describe_change, sets_to_json
from orchestrator.core.changed import Selection
from orchestrator.core.labels import READ_ONLY_TREE
from orchestrator.core.lanes import decide
from orchestrator.core.neutralise import Neutralisation
from orchestrator.core.one_sided_imports import one_sided_imports
from orchestrator.core.oracle import OracleChange, collected_on_one_side
from orchestrator.core.replay_env import SidePath
from orchestrator.core.screening import Screening, ScreenPolicy, missing
from orchestrator.core.shards import Shard
from orchestrator.core.significance import (
    DEFAULT_ALPHA,
    DEFAULT_CAP,
    WEAK,
    EvidencePolicy,
    needs_a_look,
)
from orchestrator.core.test_files import TestOverlay, explain_not_laid_over
from orchestrator.model import (
    PROPERTIES_FILE,
    REPORT_SCHEMA,
    RUN_LOG_SCHEMA,
    Decision,
    Evidence,
    Label,
    Lane,
    Replay,
    ShrinkSummary,
)
from orchestrator.probe.jobs import hash_seed

BASE = "base"
PATCH = "patch"
# The run folder keeps the fixture's bytes as every replay read them (``reproduce`` mounts
# them again, checked against the digest).
FIXTURE_FILE = "fixture.json"
# The run log's overlay fields when each side runs its own tests.
NO_OVERLAY: Mapping[str, Any] = {
    "tests_from": None,
    "tests_from_ref": None,
    "rule_for_tests": None,
    "overlay_summary": None,
    "overlaid_files": [],
    "overlay_removed": {},
    "removed_tests": [],
}


@dataclass(frozen=True, kw_only=True)
class ReplayOptions:
    """The command line, as values."""

    repo: Path
    base: str
    patch: str
    image: str
    command: str = "pytest -q"
    property_ids: tuple[str, ...] = ()
    fixture: Path | None = None
    shrink_report: Path | None = None
    origin: Path | None = None  # the unshrunk payload, when the shrink report lacks it
    replays: int = 5
    timeout_s: float = 60.0
    # Who set timeout_s: "--timeout", the project's table, or None: nobody, and planning
    # derives each replay's deadline (core.replay_deadline; the run log's timeout_rule).
    timeout_source: str | None = "--timeout"
    seed: int = 0
    runner_id: str = "local"
    out: Path | None = None
    isolation: str = "side"
    screen: int | None = None  # --screen K (None: the default rule, core.screening)
    replays_all: bool = False  # --replays-all: no screening
    # The evidence a blocking verdict on a mixed side needs (lanes.md section 3b).
    false_block_rate: float = DEFAULT_ALPHA  # --false-block-rate: per run
    evidence_cap: int = DEFAULT_CAP  # --evidence-cap: replays per side at most
    env: tuple[tuple[str, str], ...] = ()  # --env KEY=VALUE, parsed
    pythonpath: tuple[str, ...] = ()  # --pythonpath, checked
    writable_tree: bool = False
    # --tests-from base|patch|REV: that revision's test files judge both sides.
    tests_from: str | None = None
    test_paths: tuple[str, ...] = ()  # --test-path: more test files (with --tests-from)
    changed: bool = False  # --changed: select the tests the patch touched
    jobs: int | None = None  # --jobs J (None: the engine's CPUs divided between its sides)
    memory_mb: int | None = None  # --memory (None: core.schedule.container_limits's rule)
    engines: tuple[str, ...] = ()  # --engine URLs; empty: DOCKER_HOST or the local socket
    slots: int | None = None  # sides at once per engine; None: each engine's CPU count
    shard: Shard | None = None
    run_id: str | None = None  # a CI job's retry passes the same one
    # A side's screening evidence an earlier run stored is reused (--no-reuse: never
    # looked up nor stored); the stores: the ledger the run records in, and this folder.
    reuse: bool = True
    evidence_cache: Path | None = None  # --evidence-cache DIR


@dataclass(frozen=True, kw_only=True)
class Scheduling:
    """How the run spends its replays and cores, fixed when it is planned."""

    screen: int = 0  # K screening replays per side; 0: every property gets N
    jobs: int = 1  # pytest workers per replay in each side's container
    engine_cpus: int | None = None
    repository: str | None = None  # the key its durations are recorded under
    durations_file: Path | None = None
    durations: Mapping[str, float] = field(default_factory=dict)  # recorded before this run


@dataclass(frozen=True, kw_only=True)
class Pins:
    """Everything fixed before the first replay starts."""

    base_rev: str
    patch_rev: str
    image_ref: str
    image_id: str
    repo_digests: tuple[str, ...]
    fixture_digest: str
    origin_digest: str
    shrink: ShrinkSummary | None
    probe_version: str
    interpreter: str = "python3"  # what runs the probe driver in the image
    image_labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class RunPlan:
    """A run, planned: its options, its pins and the pytest arguments every replay gets."""

    run_id: str
    run_dir: Path
    started_at: datetime
    options: ReplayOptions
    pins: Pins
    pytest_args: tuple[str, ...]
    # The unshrunk payload's bytes (None when unknown): a flake freeze stores them beside
    # the minimal fixture, because shrinking can hide a size-dependent failure.
    origin_bytes: bytes | None = None
    scheduling: Scheduling = field(default_factory=Scheduling)
    # Pins of the container's environment: the variables every replay gets (PYTHONPATH
    # aside), each side's import roots (relative to its tree) and its whole PYTHONPATH.
    environment: Mapping[str, str] = field(default_factory=dict)
    side_paths: Mapping[str, SidePath] = field(default_factory=dict)
    pythonpath: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # --tests-from: the test files laid over both sides (None: each side its own).
    overlay: TestOverlay | None = None
    # --changed: what was selected (None: the properties are the given ones, or all).
    selection: Selection | None = None
    # Side -> what pytest is handed there (empty: the property ids): the selected node ids
    # that side has, or whole modules (core.changed.Selection.targets).
    targets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # When the run is cut (into shards, or over more than one lane of engines) and no
    # --property or --changed names its tests: the tests the command collected on both
    # revisions. Then, with --shard, this shard's part of the selection.
    collected: tuple[str, ...] | None = None
    part: tuple[str, ...] | None = None
    shard: Mapping[str, Any] | None = None  # what core.shards.shard_record said
    engines: tuple[Mapping[str, Any], ...] = ()  # the pool: url, runner_id, slots
    # The containers' limits: memory, pids, cpus, tmp_size (empty: not known when planned).
    limits: Mapping[str, Any] = field(default_factory=dict)
    # What the replays neutralise and what each side's configuration asks of those plugins
    # (None: planned without reading the configuration; the run's seed alone).
    neutralisation: Neutralisation | None = None

    @property
    def neutralise(self) -> Neutralisation:
        return self.neutralisation or Neutralisation(seed=self.options.seed)

    # Where each replay's deadline (options.timeout_s) came from, in one line.
    timeout_rule: str = "--timeout"

    @property
    def kept_fixture(self) -> Path | None:
        """The run folder's copy of the fixture (None: the run has no fixture)."""
        return None if self.options.fixture is None else self.run_dir / FIXTURE_FILE

    @property
    def property_ids(self) -> tuple[str, ...]:
        """The node ids handed to pytest: a shard's part, or the tests collected to cut the
        run, or those --changed selected, or the given ones (empty: every test)."""
        if self.part is not None:
            return self.part
        if self.collected is not None:
            return self.collected
        if self.selection is not None:
            return self.selection.selected
        return self.options.property_ids

    @property
    def tests_from(self) -> str | None:
        return None if self.overlay is None else self.overlay.rev

    @property
    def nothing_selected(self) -> bool:
        """--changed chose no test, or a shard got no part of the selection: nothing runs,
        and that is no verdict to wait for."""
        if self.part is not None:
            return not self.part
        return self.selection is not None and not self.selection.selected

    def run_log(self) -> dict[str, Any]:
        return run_log_document(self)

    @property
    def screen_policy(self) -> ScreenPolicy:
        return ScreenPolicy(screen=self.scheduling.screen, replays=self.options.replays)

    @property
    def evidence_policy(self) -> EvidencePolicy:
        options = self.options
        return EvidencePolicy(
            alpha=options.false_block_rate, cap=options.evidence_cap, replays=options.replays
        )


@dataclass(frozen=True, kw_only=True)
class PropertyOutcome:
    index: int
    evidence: Evidence
    decision: Decision
    raw_dir: str = "raw"  # its raw replay files in the run folder: <raw_dir>/<side>/


@dataclass(frozen=True, kw_only=True, slots=True)
class DecidedProperty:
    """A property once its documents are in the run's store (``properties.jsonl.gz``):
    what the rest of the run needs of it. Its report entry is kept only when it needs a
    look (any lane but ``no_freeze``); the thousands of a whole suite that behaved alike
    are counted, and read back from the store when everything is asked for."""

    index: int
    property_id: str
    decision: Decision
    skipped_on_patch: bool = False  # the project skipped every replay of the patch
    fails_on_patch: bool = False  # some replay of the patch failed an assertion
    read_only_tree: bool = False  # some replay wrote into its read-only tree
    entry: Mapping[str, Any] | None = None  # its report entry, when it needs a look

    @property
    def needs_a_look(self) -> bool:
        return needs_a_look(self.decision.lane, self.decision.code)


def decided(item: PropertyOutcome, entry: Mapping[str, Any]) -> DecidedProperty:
    """What a run keeps of a property whose ``entry`` (:func:`report_entry`) is stored."""
    evidence, decision = item.evidence, item.decision
    replays = (*evidence.base, *evidence.patch)
    return DecidedProperty(
        index=item.index,
        property_id=str(evidence.property_id),
        decision=decision,
        skipped_on_patch=not_run_on_patch(evidence.patch),
        fails_on_patch=any(replay.label == Label.ASSERT_FAIL for replay in evidence.patch),
        read_only_tree=any(replay.reason == READ_ONLY_TREE for replay in replays),
        entry=entry if needs_a_look(decision.lane, decision.code) else None,
    )


def run_log_document(plan: RunPlan) -> dict[str, Any]:
    """records.md "Run log", plus what else was pinned."""
    pins, options = plan.pins, plan.options
    document: dict[str, Any] = {
        "schema": RUN_LOG_SCHEMA,
        "run_id": plan.run_id,
        "base_rev": pins.base_rev,
        "patch_rev": pins.patch_rev,
        "command": options.command,
        "image_digest": pins.image_id,
        "image_ref": pins.image_ref,
        "repo_digests": list(pins.repo_digests),
        "runner_id": options.runner_id,
        "fixture_digest": pins.fixture_digest,
        "origin_digest": pins.origin_digest,
        "shrink": None if pins.shrink is None else pins.shrink.to_json(),
        "seed": options.seed,
        "hash_seed": hash_seed(options.seed),
        "replays": options.replays,
        "timeout_s": options.timeout_s,
        "timeout_rule": plan.timeout_rule,
        "isolation": options.isolation,
        "property_ids": list(options.property_ids),
        "pytest_args": list(plan.pytest_args),
        "probe_version": pins.probe_version,
        "started_at": plan.started_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "repo": str(options.repo),
        "screening": plan.screen_policy.to_json(),
        "evidence_rule": plan.evidence_policy.to_json(),
        "jobs": plan.scheduling.jobs,
        "engine_cpus": plan.scheduling.engine_cpus,
        "durations": {
            "repository": plan.scheduling.repository,
            "file": None
            if plan.scheduling.durations_file is None
            else str(plan.scheduling.durations_file),
            "known": len(plan.scheduling.durations),
        },
        "environment": dict(plan.environment),
        "pythonpath": {side: list(paths) for side, paths in plan.pythonpath.items()},
        "pythonpath_reasons": {
            side: list(paths.reasons) for side, paths in plan.side_paths.items()
        },
        "interpreter": pins.interpreter,
        "image_labels": dict(pins.image_labels),
        "writable_tree": options.writable_tree,
        "neutralise": plan.neutralise.to_json(),
        **(plan.overlay.to_json() if plan.overlay is not None else NO_OVERLAY),
        "test_paths": list(options.test_paths),
        "selection": None if plan.selection is None else plan.selection.to_json(),
        "targets": {side: list(targets) for side, targets in plan.targets.items()},
        "fixture_file": None if options.fixture is None else FIXTURE_FILE,
        "limits": dict(plan.limits) or None,
        # What the run reuses (lanes.md section 10): completed once the run knows.
        "reuse": {
            "enabled": options.reuse,
            "evidence_cache": None
            if options.evidence_cache is None
            else str(options.evidence_cache),
        },
    }
    if plan.engines:
        document["engines"] = [str(engine.get("url")) for engine in plan.engines]
        document["engine_pool"] = [dict(engine) for engine in plan.engines]
        document["slots"] = options.slots
    if plan.collected is not None:
        document["collected"] = list(plan.collected)
    if plan.shard is not None:
        document["shard"] = {**plan.shard, "property_ids": list(plan.part or ())}
    return document


def build_evidence(
    plan: RunPlan,
    property_id: str,
    base: Sequence[Replay],
    patch: Sequence[Replay],
    *,
    oracle: OracleChange | None = None,
    screening: Screening | None = None,
    runner_id: str | None = None,
    adaptive: int = 0,
) -> Evidence:
    """records.md "Evidence" for one property, with its oracle slice digests; with
    ``screening``, the replays it got (K, or N with signal) and why; ``runner_id`` names
    the engine that ran both its sides (default: the run's ``--runner-id``); ``adaptive``
    more replays per side came from evidence rounds."""
    pins, options = plan.pins, plan.options
    screened = screening is not None and screening.policy.enabled
    replays = screening.replays_of(property_id) if screening and screened else options.replays
    return Evidence(
        base_rev=pins.base_rev,
        patch_rev=pins.patch_rev,
        image_digest=pins.image_id,
        runner_id=runner_id or options.runner_id,
        command=options.command,
        property_id=property_id,
        seed=options.seed,
        fixture_digest=pins.fixture_digest,
        origin_digest=pins.origin_digest,
        oracle_changed=oracle is not None and oracle.changed,
        shrink=pins.shrink,
        replays=replays + adaptive,
        base=tuple(base),
        patch=tuple(patch),
        base_oracle_digest=None if oracle is None else oracle.base_digest,
        patch_oracle_digest=None if oracle is None else oracle.patch_digest,
        oracle_reasons=() if oracle is None else oracle.reason_texts,
        screened=screening.policy.screen if screening and screened else 0,
        signal=tuple(screening.signals.get(property_id, ())) if screening and screened else (),
        adaptive=adaptive,
        environment=plan.environment,  # one value for every property of the run
        pythonpath=plan.pythonpath,
        tests_from=plan.tests_from,
    )


def decide_all(
    plan: RunPlan,
    labelled: Mapping[str, Mapping[str, tuple[Replay, ...]]],
    oracle: Mapping[str, OracleChange],
    screening: Screening | None = None,
    *,
    only: Collection[str] | None = None,
    runners: Mapping[str, str] | None = None,
    raw_dirs: Mapping[str, str] | None = None,
    adaptive: Mapping[str, int] | None = None,
) -> tuple[PropertyOutcome, ...]:
    """Evidence and a decision per property, in the order the properties were named
    (``only``: just these, each keeping its index among all); ``runners`` and
    ``raw_dirs`` say which engine ran each one and where its raw files are (a run on a
    pool of engines); ``adaptive``: the replays per side evidence rounds added."""
    return tuple(
        decide_each(
            plan,
            labelled,
            oracle,
            screening,
            only=only,
            runners=runners,
            raw_dirs=raw_dirs,
            adaptive=adaptive,
        )
    )


def decide_each(
    plan: RunPlan,
    labelled: Mapping[str, Mapping[str, tuple[Replay, ...]]],
    oracle: Mapping[str, OracleChange],
    screening: Screening | None = None,
    *,
    only: Collection[str] | None = None,
    runners: Mapping[str, str] | None = None,
    raw_dirs: Mapping[str, str] | None = None,
    adaptive: Mapping[str, int] | None = None,
) -> Iterator[PropertyOutcome]:
    """:func:`decide_all`, one property at a time (a whole suite's evidence is never
    held at once by a caller that stores each as it comes)."""
    chosen = None if only is None else set(only)
    if plan.tests_from:
        labelled = one_sided_imports(labelled, sides=(BASE, PATCH))
    for index, property_id in enumerate(labelled[BASE], start=1):
        if chosen is not None and property_id not in chosen:
            continue
        base, patch = labelled[BASE][property_id], labelled[PATCH].get(property_id, ())
        change = oracle.get(property_id)
        if change is not None:
            # A test pytest collected on one side only is an oracle change (row 2), not a
            # harness failure, whatever the sources seemed to say.
            change = collected_on_one_side(
                change, on_base=not missing(base), on_patch=not missing(patch),
                tests_from=plan.tests_from,
            )  # fmt: skip
            if plan.overlay is not None:  # a doctest or data file it left alone says so
                change = explain_not_laid_over(change, plan.overlay)
        evidence = build_evidence(
            plan,
            property_id,
            base,
            patch,
            oracle=change,
            screening=screening,
            runner_id=(runners or {}).get(property_id),
            adaptive=(adaptive or {}).get(property_id, 0),
        )
        yield PropertyOutcome(
            index=index,
            evidence=evidence,
            decision=decide(evidence),
            raw_dir=(raw_dirs or {}).get(property_id, "raw"),
        )


def worst_exit(decisions: Sequence[Decision]) -> int:
    """The exit status of the worst lane (undecided beats non-blocking, blocking beats both);
    no decision at all is undecided."""
    if not decisions:
        return Lane.INFRA_QUEUE.exit_status
    return max(decisions, key=lambda decision: decision.lane.severity).lane.exit_status


def call_deltas(base: Sequence[Replay], patch: Sequence[Replay]) -> list[str]:
    """``clock: base {1} vs patch {2}`` for every dependency whose set of counts moved."""
    return [describe_change(change) for change in compare(call_sets(base), call_sets(patch))]


def report_entry(item: PropertyOutcome) -> dict[str, Any]:
    """One property's entry in the replay report."""
    evidence, decision = item.evidence, item.decision
    return {
        "property_id": evidence.property_id,
        "lane": decision.lane.value,
        "code": decision.code,
        "blocking": decision.blocking,
        "freeze_allowed": decision.freeze_allowed,
        "reasons": list(decision.reasons),
        "base_labels": [replay.label for replay in evidence.base],
        "patch_labels": [replay.label for replay in evidence.patch],
        "base_reasons": [replay.reason for replay in evidence.base],
        "patch_reasons": [replay.reason for replay in evidence.patch],
        "calls_base": sets_to_json(call_sets(evidence.base)),
        "calls_patch": sets_to_json(call_sets(evidence.patch)),
        "call_deltas": call_deltas(evidence.base, evidence.patch),
        "oracle_changed": evidence.oracle_changed,
        "oracle_reasons": list(evidence.oracle_reasons),
        "replays": evidence.replays,
        "screened": evidence.screened,
        "signal": list(evidence.signal),
        "adaptive": evidence.adaptive,
        "tests_from": evidence.tests_from,
        # Its evidence and decision are in the run's store (PROPERTIES_FILE), by index;
        # a run folder of replay-report/1 named a file of each here.
        "index": item.index,
        "evidence_file": None,
        "decision_file": None,
        "decision": decision.to_json(),
        "raw_dir": item.raw_dir,
        "runner_id": evidence.runner_id,
    }


def report_document(
    plan: RunPlan, properties: Sequence[DecidedProperty], screening: Screening | None = None
) -> dict[str, Any]:
    """The replay-report/2 document (summary.json; ``--json`` adds every other entry from
    the store). A run that selected nothing (``--changed``, or a shard with no part)
    decided nothing and blocks nothing."""
    decisions = [item.decision for item in properties]
    listed = [dict(item.entry) for item in properties if item.entry is not None]
    return {
        "schema": REPORT_SCHEMA,
        "run_id": plan.run_id,
        "run_dir": str(plan.run_dir),
        "run_log": plan.run_log(),
        "exit_status": 0 if plan.nothing_selected else worst_exit(decisions),
        "decisions": listed,
        "decisions_left_out": len(properties) - len(listed),
        "properties": len(properties),
        "properties_file": PROPERTIES_FILE,
        "lanes": lane_counts(item.decision.lane.value for item in properties),
        "screening": screening_summary(plan, properties, screening),
        "skipped": sum(item.skipped_on_patch for item in properties),
        # Tests the base has that the overlaid trees lack: they judge neither side.
        "removed_tests": [] if plan.overlay is None else list(plan.overlay.removed_tests),
    }


def lane_counts(lanes: Iterable[str]) -> dict[str, int]:
    """Lane -> how many properties went there (lanes in order of first appearance)."""
    counts: dict[str, int] = {}
    for lane in lanes:
        counts[lane] = counts.get(lane, 0) + 1
    return counts


def not_run_on_patch(replays: Sequence[Replay]) -> bool:
    """The project skipped every replay of the patch side: the test did not run there."""
    return bool(replays) and all(replay.label == Label.SKIPPED for replay in replays)


def skipped_line(skipped: int, total: int) -> str | None:
    """``skipped 3 of 80: the project skips them on the patch`` under the table (None: no
    skip)."""
    if not skipped:
        return None
    return f"skipped {skipped} of {total}: the project skips them on the patch"


def table_row(entry: Mapping[str, Any]) -> tuple[str, ...]:
    """A report entry as a row of ``replay``'s table: property, each side's labels, the
    moved call counts, lane, code, reasons."""

    def side(name: str) -> str:
        labels, reasons = entry.get(f"{name}_labels") or [], entry.get(f"{name}_reasons") or []
        return labels_summary(zip(labels, [*reasons, *[None] * len(labels)], strict=False))

    code = str(entry.get("code"))
    return (
        str(entry.get("property_id")),
        side("base"),
        side("patch"),
        "; ".join(str(delta) for delta in entry.get("call_deltas") or ()) or "-",
        str(entry.get("lane")),
        code,
        table_reasons(code, [str(reason) for reason in entry.get("reasons") or ()]),
    )


def not_listed_line(properties: Sequence[DecidedProperty]) -> str | None:
    """The line under the table that counts the properties it leaves out (None: it left
    none out): those that behaved alike on both sides (``no_freeze``)."""
    left_out = sum(not item.needs_a_look for item in properties)
    if not left_out:
        return None
    if left_out < len(properties):
        what = "more"
    elif left_out == 1:
        what = "property"
    else:
        what = "properties, all"
    return (
        f"{left_out} {what} in no_freeze (behaved alike on both sides): --all lists "
        f"{'them' if left_out > 1 else 'it'}"
    )


# Codes whose reasons the table's other columns already say: the two sides' states, or
# the moved call counts.
_SHOWN_ELSEWHERE = frozenset({"not_reproduced", "call_budget"})


def table_reasons(code: str, reasons: Sequence[str]) -> str:
    """A decision's reasons for a terminal table (``fails_on_base_too; ...``), "-" when
    the other columns already say them."""
    if code in _SHOWN_ELSEWHERE or not reasons:
        return "-"
    if code == WEAK:  # its first reason is the one line; the others are in the report
        return reasons[0]
    return "; ".join(reasons)


def screening_summary(
    plan: RunPlan, properties: Sequence[DecidedProperty], screening: Screening | None
) -> dict[str, Any]:
    """How many properties were screened and how many replayed N times."""
    ids = [item.property_id for item in properties]
    if screening is not None and screening.policy.enabled:
        return screening.summary(ids)
    return {**plan.screen_policy.to_json(), "screened": 0, "replayed": len(ids)}


def screening_line(summary: Mapping[str, Any]) -> str:
    """``screened 736, replayed 3``: properties screened, and those replayed N times."""
    return f"screened {summary.get('screened', 0)}, replayed {summary.get('replayed', 0)}"


def label_summary(replays: Sequence[Replay]) -> str:
    """``assert_pass x5`` / ``assert_pass x3, assert_fail x2`` for the table; a replay
    without a verdict names its reason: ``harness_error(oom) x1``."""
    return labels_summary([(replay.label, replay.reason) for replay in replays])


def labels_summary(replays: Iterable[tuple[Any, Any]]) -> str:
    """:func:`label_summary` of (label, reason) pairs, as a report entry lists them."""
    counts: dict[str, int] = {}
    for label, reason in replays:
        name = str(label)
        if not Label.is_completed(name) and reason:
            name = f"{name}({reason})"
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{name} x{count}" for name, count in counts.items()) or "-"


def never_collected(labelled: Mapping[str, Mapping[str, Sequence[Replay]]]) -> tuple[str, ...]:
    """Properties no replay on any side collected (every replay ``harness_error`` /
    ``not_found``): a node id that names no test, the user's mistake, not the runner's."""
    property_ids: dict[str, None] = {}
    for per_property in labelled.values():
        property_ids.update(dict.fromkeys(per_property))
    return tuple(
        property_id
        for property_id in property_ids
        if all(
            replay.label == Label.HARNESS_ERROR and replay.reason == "not_found"
            for per_property in labelled.values()
            for replay in per_property.get(property_id, ())
        )
        and any(per_property.get(property_id) for per_property in labelled.values())
    )
