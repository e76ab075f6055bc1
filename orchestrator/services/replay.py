"""Bilateral replay: plan (pin everything, write the run log), then execute, then decide.

``plan_replay`` resolves both revisions to full SHAs, the image reference to one
image ID (never pulled), digests the fixture, checks a shrink report against it
and writes ``run-log.json`` into the run folder before anything runs.
``execute`` replays both sides at once (:func:`orchestrator.services.engine.replay_sides`),
checks the oracle, builds one evidence document per property, decides with the
pure core and writes ``evidence-<n>.json``, ``decision-<n>.json`` and
``summary.json``. The result is a frozen :class:`ReplayOutcome` that other
services (the ledger) build on.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import files
from orchestrator.adapters import git as git_adapter
from orchestrator.core.digest import NULL_DIGEST, digest
from orchestrator.errors import InputError, SchemaError
from orchestrator.model import (
    REPORT_SCHEMA,
    RUN_LOG_SCHEMA,
    Decision,
    Evidence,
    Label,
    Lane,
    Replay,
    ShrinkSummary,
)
from orchestrator.services.engine import (
    ISOLATIONS,
    NO_TEST_REPORTED,
    ReplayPlan,
    SideSpec,
    new_run_id,
    replay_sides,
)

if TYPE_CHECKING:
    from docker import DockerClient

    from orchestrator.services.engine import Progress

BASE = "base"
PATCH = "patch"
PYTEST_LAUNCHERS = (
    ("pytest",),
    ("py.test",),
    ("python", "-m", "pytest"),
    ("python3", "-m", "pytest"),
)
# pytest options whose value is the next argument (so it is not taken for a path).
PYTEST_VALUE_OPTIONS = frozenset(
    {
        "-k", "-m", "-p", "-c", "-o", "-W", "-n", "--rootdir", "--confcutdir", "--basetemp",
        "--deselect", "--ignore", "--ignore-glob", "--maxfail", "--tb", "--durations",
        "--import-mode", "--override-ini", "--log-level", "--junitxml", "--timeout",
        "--capture", "--color",
    }
)  # fmt: skip


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
    seed: int = 0
    runner_id: str = "local"
    out: Path | None = None
    isolation: str = "side"


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


@dataclass(frozen=True, kw_only=True)
class RunPlan:
    run_id: str
    run_dir: Path
    started_at: datetime
    options: ReplayOptions
    pins: Pins
    replay_plan: ReplayPlan
    # The unshrunk payload's bytes (None when unknown): a flake freeze stores them beside
    # the minimal fixture, because shrinking can hide a size-dependent failure.
    origin_bytes: bytes | None = None

    def run_log(self) -> dict[str, Any]:
        return run_log_document(self)


@dataclass(frozen=True, kw_only=True)
class LedgerRequest:
    """Record the run in the ledger: every decision as an event, infra cases queued and,
    with ``freeze``, a flake freeze attempted for every property (the ledger refuses all
    but ``flake_queue_eligible`` decisions with complete records, and logs why)."""

    url: str
    now: datetime
    freeze: bool = False
    owner: str | None = None
    expires_at: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class PropertyOutcome:
    index: int
    evidence: Evidence
    decision: Decision


@dataclass(frozen=True, kw_only=True)
class ReplayOutcome:
    """What a replay produced: the plan it ran, one evidence and decision per property."""

    plan: RunPlan
    properties: tuple[PropertyOutcome, ...]
    report: Mapping[str, Any]
    exit_status: int

    @property
    def run_id(self) -> str:
        return self.plan.run_id

    @property
    def pins(self) -> Pins:
        return self.plan.pins

    @property
    def evidences(self) -> tuple[Evidence, ...]:
        return tuple(item.evidence for item in self.properties)

    @property
    def decisions(self) -> tuple[Decision, ...]:
        return tuple(item.decision for item in self.properties)


# ---------------------------------------------------------------- pure planning


def pytest_args_from_command(command: str, property_ids: Sequence[str]) -> tuple[str, ...]:
    """The pytest arguments of ``--command``; with properties, its paths give way to them. Pure.

    ``pytest -q tests/`` -> ``("-q", "tests/")``. When properties are selected, the
    command's positional paths are dropped (the node ids select the tests) and its
    options are kept.
    """
    try:
        words = shlex.split(command)
    except ValueError as error:
        raise InputError(f"--command: {error}") from None
    for launcher in PYTEST_LAUNCHERS:
        if tuple(words[: len(launcher)]) == launcher:
            args = words[len(launcher) :]
            break
    else:
        raise InputError(f"--command must start with pytest (got {command!r})")
    if not property_ids:
        return tuple(args)
    kept: list[str] = []
    takes_value = False
    for word in args:
        if takes_value:
            kept.append(word)
            takes_value = False
        elif word.startswith("-"):
            kept.append(word)
            takes_value = word in PYTEST_VALUE_OPTIONS
    return tuple(kept)


def run_log_document(plan: RunPlan) -> dict[str, Any]:
    """records.md "Run log", plus what else was pinned. Pure."""
    pins, options = plan.pins, plan.options
    return {
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
        "replays": options.replays,
        "timeout_s": options.timeout_s,
        "isolation": options.isolation,
        "property_ids": list(options.property_ids),
        "pytest_args": list(plan.replay_plan.pytest_args),
        "probe_version": pins.probe_version,
        "started_at": plan.started_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "repo": str(options.repo),
    }


def validate_options(options: ReplayOptions) -> None:
    if options.replays < 1:
        raise InputError("--replays must be at least 1")
    if options.timeout_s <= 0:
        raise InputError("--timeout must be a positive number of seconds")
    if options.isolation not in ISOLATIONS:
        raise InputError(f"--isolation must be one of: {', '.join(ISOLATIONS)}")
    if options.shrink_report is not None and options.fixture is None:
        raise InputError("--shrink-report needs --fixture (the minimal fixture it describes)")
    if not options.runner_id.strip():
        raise InputError("--runner-id must not be empty")
    for property_id in options.property_ids:
        if not property_id.strip() or "::" not in property_id:
            raise InputError(f"--property {property_id!r}: expected a pytest node id (path::test)")


def shrink_from_report(doc: Any, fixture_digest: str) -> ShrinkSummary:
    """The report's summary, checked against the fixture it should describe. Pure."""
    from orchestrator.core.evidence import parse_shrink_report

    try:
        summary = parse_shrink_report(doc)
    except SchemaError as error:
        raise InputError(f"--shrink-report: {error}") from None
    if summary.minimal_digest != fixture_digest:
        raise InputError(
            f"--shrink-report: its minimal digest {summary.minimal_digest} is not the"
            f" fixture's {fixture_digest}"
        )
    return summary


def origin_bytes_from(report_doc: Any, origin: Path | None, origin_digest: str) -> bytes | None:
    """The unshrunk payload's bytes, from --origin or the report's ``origin``, checked
    against the report's ``origin_digest``; None when neither carries it."""
    from orchestrator.core.digest import canonical_json

    if origin is not None:
        data = origin.read_bytes() if origin.is_file() else None
        if data is None:
            raise InputError(f"--origin {origin}: no such file")
        payload = files.read_json(str(origin))
        source = f"--origin {origin}"
    elif isinstance(report_doc, dict) and "origin" in report_doc:
        payload = report_doc["origin"]
        data = canonical_json(payload)
        source = "--shrink-report's origin"
    else:
        return None
    if digest(payload) != origin_digest:
        raise InputError(
            f"{source}: its digest {digest(payload)} is not the report's origin_digest"
            f" {origin_digest}"
        )
    return data


def probe_version() -> str:
    """The probe's version, as the driver will report it in every replay file."""
    from orchestrator.probe import PROBE_VERSION

    return str(PROBE_VERSION)


# ---------------------------------------------------------------- imperative plan


def plan_replay(
    options: ReplayOptions,
    *,
    client: DockerClient,
    now: datetime,
    run_id: str | None = None,
    default_root: Path | None = None,
) -> RunPlan:
    """Pin both revisions, the image and the fixture; write run-log.json. Nothing runs yet."""
    from orchestrator.adapters.engine import resolve_image

    validate_options(options)
    pytest_args = pytest_args_from_command(options.command, options.property_ids)
    repo = options.repo.resolve()
    base_rev = git_adapter.resolve_rev(repo, options.base)
    patch_rev = git_adapter.resolve_rev(repo, options.patch)

    fixture_digest = NULL_DIGEST
    fixture: Path | None = None
    if options.fixture is not None:
        fixture = options.fixture.resolve()
        fixture_digest = digest(files.read_json(str(fixture)))
    shrink: ShrinkSummary | None = None
    origin_digest = fixture_digest
    origin_bytes = fixture.read_bytes() if fixture is not None else None
    if options.shrink_report is not None:
        report_doc = files.read_json(str(options.shrink_report))
        shrink = shrink_from_report(report_doc, fixture_digest)
        origin_digest = shrink.origin_digest or fixture_digest
        origin_bytes = origin_bytes_from(report_doc, options.origin, origin_digest)
    elif options.origin is not None:
        raise InputError("--origin goes with --shrink-report (it is the shrink's input)")

    image = resolve_image(client, options.image)  # ImageNotFoundError: exit 3, never a pull
    run_id = run_id or new_run_id(now.timestamp())
    root = default_root if default_root is not None else Path.cwd()
    run_dir = (options.out or root / ".replay" / "runs" / run_id).resolve()
    plan = RunPlan(
        run_id=run_id,
        run_dir=run_dir,
        started_at=now,
        options=replace(options, repo=repo, fixture=fixture),
        origin_bytes=origin_bytes,
        pins=Pins(
            base_rev=base_rev,
            patch_rev=patch_rev,
            image_ref=options.image,
            image_id=image.id,
            repo_digests=tuple(image.repo_digests),
            fixture_digest=fixture_digest,
            origin_digest=origin_digest,
            shrink=shrink,
            probe_version=probe_version(),
        ),
        replay_plan=ReplayPlan(
            image_id=image.id,
            pytest_args=pytest_args,
            property_ids=options.property_ids,
            fixture=fixture,
            replays=options.replays,
            timeout_s=options.timeout_s,
            seed=options.seed,
            runner_id=options.runner_id,
            isolation=options.isolation,
        ),
    )
    if (run_dir / "run-log.json").exists():
        raise InputError(f"{run_dir}: already holds a run (run-log.json); pick another --out")
    files.write_json_atomic(run_dir / "run-log.json", plan.run_log())
    return plan


# ---------------------------------------------------------------- evidence and decision


def oracle_changes(
    repo: Path, base_rev: str, patch_rev: str, property_ids: Sequence[str]
) -> dict[str, bool]:
    """Property id -> do the files that define it differ between the two revisions?

    The fixture is one host file mounted on both sides, so its digest is the
    same on both by construction; only the property's files can move. Each
    revision's files are read once for all properties.
    """
    files_of = {
        property_id: git_adapter.property_files(property_id) for property_id in property_ids
    }
    paths = sorted({path for files_ in files_of.values() for path in files_})
    if not paths:
        return dict.fromkeys(property_ids, False)
    on_base = git_adapter.read_blobs(repo, base_rev, paths)
    on_patch = git_adapter.read_blobs(repo, patch_rev, paths)
    return {
        property_id: any(on_base[path] != on_patch[path] for path in files_)
        for property_id, files_ in files_of.items()
    }


def build_evidence(
    plan: RunPlan,
    property_id: str,
    base: Sequence[Replay],
    patch: Sequence[Replay],
    *,
    oracle_moved: bool,
) -> Evidence:
    """records.md "Evidence" for one property. Pure."""
    pins, options = plan.pins, plan.options
    return Evidence(
        base_rev=pins.base_rev,
        patch_rev=pins.patch_rev,
        image_digest=pins.image_id,
        runner_id=options.runner_id,
        command=options.command,
        property_id=property_id,
        seed=options.seed,
        fixture_digest=pins.fixture_digest,
        origin_digest=pins.origin_digest,
        oracle_changed=oracle_moved,
        shrink=pins.shrink,
        replays=options.replays,
        base=tuple(base),
        patch=tuple(patch),
    )


def call_sets(replays: Sequence[Replay]) -> dict[str, list[int]]:
    """Dependency -> the distinct call counts seen over a side's replays. Pure."""
    names = sorted({name for replay in replays for name in replay.calls})
    return {name: sorted({replay.calls.get(name, 0) for replay in replays}) for name in names}


def call_deltas(base: Sequence[Replay], patch: Sequence[Replay]) -> list[str]:
    """``clock {1}->{2}`` for every dependency whose set of counts moved. Pure."""
    on_base, on_patch = call_sets(base), call_sets(patch)
    deltas = []
    for name in sorted(set(on_base) | set(on_patch)):
        before, after = on_base.get(name, [0]), on_patch.get(name, [0])
        if before != after:
            deltas.append(f"{name} {_set(before)}->{_set(after)}")
    return deltas


def _set(values: Sequence[int]) -> str:
    return "{" + ",".join(str(v) for v in values) + "}"


def report_entry(item: PropertyOutcome) -> dict[str, Any]:
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
        "calls_base": call_sets(evidence.base),
        "calls_patch": call_sets(evidence.patch),
        "call_deltas": call_deltas(evidence.base, evidence.patch),
        "oracle_changed": evidence.oracle_changed,
        "evidence_file": f"evidence-{item.index}.json",
        "decision_file": f"decision-{item.index}.json",
        "decision": decision.to_json(),
    }


def worst_exit(decisions: Sequence[Decision]) -> int:
    """The exit status of the worst lane (undecided beats non-blocking, blocking beats both)."""
    if not decisions:
        return Lane.INFRA_QUEUE.exit_status
    return max(decisions, key=lambda decision: decision.lane.severity).lane.exit_status


def report_document(plan: RunPlan, properties: Sequence[PropertyOutcome]) -> dict[str, Any]:
    """The replay-report/1 document (summary.json, and ``--json``). Pure."""
    decisions = [item.decision for item in properties]
    return {
        "schema": REPORT_SCHEMA,
        "run_id": plan.run_id,
        "run_dir": str(plan.run_dir),
        "run_log": plan.run_log(),
        "exit_status": worst_exit(decisions),
        "decisions": [report_entry(item) for item in properties],
    }


def decide_all(
    plan: RunPlan,
    labelled: Mapping[str, Mapping[str, tuple[Replay, ...]]],
    oracle: Mapping[str, bool],
) -> tuple[PropertyOutcome, ...]:
    """Evidence and a decision per property, in the order the properties were named. Pure."""
    from orchestrator.core.lanes import decide

    outcomes = []
    for index, property_id in enumerate(labelled[BASE], start=1):
        evidence = build_evidence(
            plan,
            property_id,
            labelled[BASE][property_id],
            labelled[PATCH].get(property_id, ()),
            oracle_moved=oracle.get(property_id, False),
        )
        outcomes.append(PropertyOutcome(index=index, evidence=evidence, decision=decide(evidence)))
    return tuple(outcomes)


def _import_in_background(module: str) -> None:
    """Import ``module`` while the containers run: the ledger's SQLAlchemy import costs a
    third of a second that would otherwise come after the replays. A failure here is
    left for the real import, on the main thread, to report."""
    import importlib
    import threading

    def load() -> None:
        with contextlib.suppress(Exception):
            importlib.import_module(module)

    threading.Thread(target=load, name=f"import {module}", daemon=True).start()


def execute(
    plan: RunPlan,
    *,
    client: DockerClient,
    progress: Progress | None = None,
    ledger: LedgerRequest | None = None,
) -> ReplayOutcome:
    """Replay both sides at once, decide every property, write the run folder (and the
    ledger, when asked)."""
    options, pins = plan.options, plan.pins
    if ledger is not None:
        _import_in_background("orchestrator.services.ledger_jobs")
    sides = (
        SideSpec(name=BASE, repo=options.repo, rev=pins.base_rev),
        SideSpec(name=PATCH, repo=options.repo, rev=pins.patch_rev),
    )
    labelled = replay_sides(
        plan.replay_plan,
        sides,
        client=client,
        progress=progress,
        run_id=plan.run_id,
        keep_raw=plan.run_dir / "raw",
    )
    named = [property_id for property_id in labelled[BASE] if property_id != NO_TEST_REPORTED]
    oracle = oracle_changes(options.repo, pins.base_rev, pins.patch_rev, named)
    properties = decide_all(plan, labelled, oracle)
    for item in properties:
        files.write_json_atomic(
            plan.run_dir / f"evidence-{item.index}.json", item.evidence.to_json()
        )
        files.write_json_atomic(
            plan.run_dir / f"decision-{item.index}.json", item.decision.to_json()
        )
    report = report_document(plan, properties)
    if ledger is not None:
        report["ledger"] = record_in_ledger(
            plan,
            properties,
            ledger,
            finished_at=datetime.now(UTC),
            exit_status=report["exit_status"],
        )
    files.write_json_atomic(plan.run_dir / "summary.json", report)
    return ReplayOutcome(
        plan=plan, properties=properties, report=report, exit_status=report["exit_status"]
    )


def record_in_ledger(
    plan: RunPlan,
    properties: Sequence[PropertyOutcome],
    request: LedgerRequest,
    *,
    finished_at: datetime,
    exit_status: int,
) -> dict[str, Any]:
    """Record the run and each decision (and queue infra cases, and try freezes) in the
    ledger, in one transaction."""
    from orchestrator.adapters.ledger import display_url
    from orchestrator.services.ledger_jobs import (
        open_ledger,
        queue_infra,
        record_decision,
        record_run,
        write_flake_freeze_from_replay,
    )

    fixture_bytes = plan.options.fixture.read_bytes() if plan.options.fixture is not None else None
    shrink_path = plan.pins.shrink.shrink_path if plan.pins.shrink is not None else ()
    # Nothing shrunk: the origin is the fixture itself. Otherwise the shrink report (or
    # --origin) carries the unshrunk payload; without it the ledger refuses the freeze.
    origin_bytes = plan.origin_bytes
    entries = []
    with open_ledger(request.url, {}, Path.cwd()) as store, store.transaction():
        record_run(
            store,
            plan.run_id,
            plan.started_at,
            finished_at,
            exit_status,
            plan.options.command,
            {"run_dir": str(plan.run_dir), "properties": len(properties)},
        )
        for item in properties:
            evidence, decision = item.evidence, item.decision
            entry: dict[str, Any] = {
                "property_id": evidence.property_id,
                "decision_event": record_decision(
                    store, evidence, decision, request.now, run_id=plan.run_id
                ),
            }
            if decision.lane is Lane.INFRA_QUEUE:
                entry["infra_queue_id"] = queue_infra(
                    store, evidence, decision, request.now, run_id=plan.run_id
                )
            elif request.freeze:
                written = write_flake_freeze_from_replay(
                    store,
                    evidence,
                    decision,
                    request.owner,
                    request.expires_at,
                    fixture_bytes,
                    origin_bytes,
                    shrink_path,
                    request.now,
                    run_id=plan.run_id,
                )
                entry["freeze_id"] = written.freeze_id
                entry["freeze_refusals"] = list(written.codes)
            entries.append(entry)
    return {"url": display_url(request.url), "entries": entries}


def label_summary(replays: Sequence[Replay]) -> str:
    """``assert_pass x5`` / ``assert_pass x3, assert_fail x2`` for the table. Pure."""
    counts: dict[str, int] = {}
    for replay in replays:
        name = replay.label
        if replay.label in (Label.HARNESS_ERROR, Label.TIMEOUT) and replay.reason:
            name = f"{replay.label}({replay.reason})"
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{name} x{count}" for name, count in counts.items()) or "-"
