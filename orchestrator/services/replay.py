"""Bilateral replay: plan (pin everything, write the run log), then execute, then decide.

``plan_replay`` resolves both revisions to full SHAs, the image reference to one
image ID on the first engine of the pool (never pulled), digests the fixture, checks a
shrink report against it, plans the tests (``--changed``, ``--tests-from``:
:mod:`orchestrator.services.replay_tests`; a ``--shard``'s part of them; when nothing
names the tests and the run is cut, the tests the command collects on both revisions)
and writes ``run-log.json`` into the run folder before any replay runs.
``execute`` replays both sides at once (:func:`orchestrator.services.sides.run_sides`,
spread over the pool's engines),
compares each property's oracle slice on both revisions
(:func:`orchestrator.services.oracle.property_oracles`), builds one evidence document per
property, decides with the pure core (:mod:`orchestrator.core.replay_run`) and writes
``evidence-<n>.json``, ``decision-<n>.json`` and ``summary.json``. The result is a frozen
:class:`ReplayOutcome` that other services (the ledger) build on.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import files
from orchestrator.adapters import git as git_adapter
from orchestrator.core.digest import NULL_DIGEST, digest
from orchestrator.core.pool import lanes_for, narrow_targets
from orchestrator.core.pytest_command import pytest_args, split_node_id
from orchestrator.core.replay_run import (
    BASE,
    PATCH,
    Pins,
    PropertyOutcome,
    ReplayOptions,
    RunPlan,
    decide_all,
    report_document,
)
from orchestrator.errors import InputError, SchemaError
from orchestrator.model import Decision, Evidence, Lane, ShrinkSummary
from orchestrator.services.engines import Pool, single_pool
from orchestrator.services.oracle import property_oracles
from orchestrator.services.replay_tests import check_test_options, plan_tests
from orchestrator.services.sides import (
    FIXTURE,
    ISOLATIONS,
    NO_TEST_REPORTED,
    ReplayPlan,
    SideSpec,
    collect_tests,
    new_run_id,
    plan_limits,
    planned_pythonpath,
    run_sides,
    side_pythonpath,
)

if TYPE_CHECKING:
    from docker import DockerClient

    from orchestrator.services.sides import Progress


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


# ---------------------------------------------------------------- checks on the inputs

# A run id names a folder, containers and volumes: nothing that needs quoting.
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


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
    if options.slots is not None and options.slots < 1:
        raise InputError("--slots must be at least 1")
    if options.run_id is not None and not _RUN_ID.match(options.run_id):
        raise InputError(
            f"--run-id {options.run_id!r}: letters, digits, '.', '_' and '-' only (at most 100)"
        )
    from orchestrator.core.replay_env import check_pythonpath, parse_env

    parse_env([f"{key}={value}" for key, value in options.env])
    check_pythonpath(options.pythonpath)
    for property_id in options.property_ids:
        if not split_node_id(property_id).names_a_test:
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
    client: DockerClient | None = None,
    now: datetime,
    run_id: str | None = None,
    default_root: Path | None = None,
    pool: Pool | None = None,
) -> RunPlan:
    """Pin both revisions, the image, the fixture and the selection; write run-log.json.
    No replay runs yet (a collection may, to cut a run whose tests are not named)."""
    from orchestrator.adapters.docker import engine_url, resolve_image
    from orchestrator.core.replay_env import interpreter_from_labels, replay_variables

    validate_options(options)
    if pool is None:
        if client is None:
            raise ValueError("plan_replay needs a client or a pool")
        import os

        pool = single_pool(client, url=engine_url(os.environ), runner_id=options.runner_id)
    check_test_options(options)
    pytest_args(options.command, options.property_ids)  # a bad --command is exit 2 first
    repo = options.repo.resolve()
    base_rev = git_adapter.resolve_rev(repo, options.base)
    patch_rev = git_adapter.resolve_rev(repo, options.patch)
    tests = plan_tests(options, repo, base_rev, patch_rev)
    args = pytest_args(options.command, tests.property_ids)

    fixture_digest = NULL_DIGEST
    fixture: Path | None = None
    fixture_bytes: bytes | None = None
    if options.fixture is not None:
        fixture = options.fixture.resolve()
        # Read once: these bytes are digested, kept in the run folder and mounted.
        fixture_bytes = files.read_bytes(fixture)
        fixture_digest = digest(files.parse_json(fixture_bytes, str(fixture)))
    shrink: ShrinkSummary | None = None
    origin_digest = fixture_digest
    origin_bytes = fixture_bytes
    if options.shrink_report is not None:
        report_doc = files.read_json(str(options.shrink_report))
        shrink = shrink_from_report(report_doc, fixture_digest)
        origin_digest = shrink.origin_digest or fixture_digest
        origin_bytes = origin_bytes_from(report_doc, options.origin, origin_digest)
    elif options.origin is not None:
        raise InputError("--origin goes with --shrink-report (it is the shrink's input)")

    # ImageNotFoundError: exit 3, never a pull. The first engine pins the ID.
    image = resolve_image(pool.first.client, options.image)
    side_paths = {
        side: planned_pythonpath(repo, rev, options.pythonpath)
        for side, rev in ((BASE, base_rev), (PATCH, patch_rev))
    }
    run_id = run_id or options.run_id or new_run_id(now.timestamp())
    root = default_root if default_root is not None else Path.cwd()
    run_dir = (options.out or root / ".replay" / "runs" / run_id).resolve()
    if (run_dir / "run-log.json").exists():
        raise InputError(f"{run_dir}: already holds a run (run-log.json); pick another --out")
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
            interpreter=interpreter_from_labels(image.labels),
            image_labels=dict(image.labels),
        ),
        pytest_args=args,
        engines=tuple(pool.describe()) if pool.named or options.slots is not None else (),
        environment=replay_variables(
            seed=options.seed,
            fixture=FIXTURE if fixture is not None else None,
            extra=options.env,
        ),
        side_paths=side_paths,
        pythonpath={side: side_pythonpath(paths.entries) for side, paths in side_paths.items()},
        overlay=tests.overlay,
        selection=tests.selection,
        targets=tests.targets,
    )
    plan = _select(plan, pool)
    limits = plan_limits(sides_plan(plan))
    plan = replace(
        plan,
        limits={
            "memory": limits.memory,
            "pids": limits.pids,
            "cpus": limits.cpus,
            "tmp_size": limits.tmp_size,
        },
    )
    if plan.kept_fixture is not None and fixture_bytes is not None:
        files.write_atomic(plan.kept_fixture, fixture_bytes)
    files.write_json_atomic(run_dir / "run-log.json", plan.run_log())
    return plan


def _select(plan: RunPlan, pool: Pool) -> RunPlan:
    """Fix what the run replays when it is cut: the tests the command collects on both
    revisions when nothing names them (cut into shards, or over more than one lane of
    engines), then a shard's part of the selection."""
    options = plan.options
    shard = options.shard
    if plan.nothing_selected:
        return plan
    lanes = sum(lanes_for(engine.slots) for engine in pool.engines)
    if not plan.property_ids and (shard is not None or lanes > 1):
        collected = collect_tests(
            sides_plan(plan),
            (
                side_spec(plan, BASE, plan.pins.base_rev),
                side_spec(plan, PATCH, plan.pins.patch_rev),
            ),
            pool=pool,
            run_id=f"{plan.run_id}-collect",
        )
        # Node ids now name the tests: the command's paths give way, as with --property.
        plan = replace(
            plan, collected=collected, pytest_args=pytest_args(options.command, collected)
        )
    if shard is None:
        return plan
    from orchestrator.core.shards import shard_record

    part, record = shard_record(plan.property_ids, shard, pool.durations)
    return replace(plan, part=part, shard=record)


def sides_plan(plan: RunPlan) -> ReplayPlan:
    """What the engine needs to replay the plan's sides."""
    options = plan.options
    return ReplayPlan(
        image_id=plan.pins.image_id,
        pytest_args=plan.pytest_args,
        property_ids=plan.property_ids,
        # The run folder's copy: the bytes that were digested are the bytes mounted.
        fixture=plan.kept_fixture,
        replays=options.replays,
        timeout_s=options.timeout_s,
        seed=options.seed,
        runner_id=options.runner_id,
        isolation=options.isolation,
        interpreter=plan.pins.interpreter,
        env=options.env,
        extra_pythonpath=options.pythonpath,
        writable_tree=options.writable_tree,
        expand_parametrized=True,
    )


def side_spec(plan: RunPlan, name: str, rev: str) -> SideSpec:
    """One side as the engine runs it: with the overlay, if any, what pytest is handed
    there, and its import roots (planned at its revision)."""
    return SideSpec(
        name=name,
        repo=plan.options.repo,
        rev=rev,
        tests=None if plan.overlay is None else plan.overlay.side(name),
        targets=narrow_targets(plan.targets.get(name, ()), plan.part),
        pythonpath=plan.side_paths[name].entries if name in plan.side_paths else None,
    )


# ---------------------------------------------------------------- evidence and decision


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
    client: DockerClient | None = None,
    progress: Progress | None = None,
    ledger: LedgerRequest | None = None,
    pool: Pool | None = None,
) -> ReplayOutcome:
    """Replay both sides at once, decide every property, write the run folder (and the
    ledger, when asked)."""
    options, pins = plan.options, plan.pins
    if ledger is not None:
        _import_in_background("orchestrator.services.ledger_jobs")
    if pool is None:
        if client is None:
            raise ValueError("execute needs a client or a pool")
        import os

        from orchestrator.adapters.docker import engine_url

        pool = single_pool(client, url=engine_url(os.environ), runner_id=options.runner_id)
    properties: tuple[PropertyOutcome, ...] = ()
    extra: dict[str, Any] = {}
    if not plan.nothing_selected:
        outcome = run_sides(
            sides_plan(plan),
            (side_spec(plan, BASE, pins.base_rev), side_spec(plan, PATCH, pins.patch_rev)),
            progress=progress,
            run_id=plan.run_id,
            keep_raw=plan.run_dir / "raw",
            pool=pool,
        )
        labelled = outcome.labelled
        named = [property_id for property_id in labelled[BASE] if property_id != NO_TEST_REPORTED]
        oracle = property_oracles(
            options.repo, pins.base_rev, pins.patch_rev, named, overlay=plan.overlay
        )
        properties = decide_all(
            plan, labelled, oracle, runners=outcome.runners, raw_dirs=outcome.raw_dirs
        )
        if plan.engines:
            extra["engines"] = [dict(engine) for engine in outcome.engines]
        if outcome.attempts:
            extra["attempts"] = [attempt.to_json() for attempt in outcome.attempts]
    for item in properties:
        files.write_json_atomic(
            plan.run_dir / f"evidence-{item.index}.json", item.evidence.to_json()
        )
        files.write_json_atomic(
            plan.run_dir / f"decision-{item.index}.json", item.decision.to_json()
        )
    report = report_document(plan, properties)
    report.update(extra)
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
        record_decision_once,
        record_run,
        write_flake_freeze_from_replay,
    )

    # The run folder's copy (the bytes every replay read) when it was kept.
    kept = plan.kept_fixture
    if kept is not None and not kept.is_file():
        kept = plan.options.fixture
    fixture_bytes = kept.read_bytes() if kept is not None else None
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
            event_id, new = record_decision_once(
                store, evidence, decision, request.now, run_id=plan.run_id
            )
            entry: dict[str, Any] = {
                "property_id": evidence.property_id,
                "decision_event": event_id,
            }
            if not new:  # a retried run: its first recording stands, with what came with it
                entry["already_recorded"] = True
            elif decision.lane is Lane.INFRA_QUEUE:
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
