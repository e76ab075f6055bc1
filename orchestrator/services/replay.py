"""Bilateral replay: plan (pin everything, write the run log), then execute, then decide.

``plan_replay`` resolves both revisions to full SHAs, the image reference to one
image ID (never pulled), digests the fixture, checks a shrink report against it,
plans the tests (``--changed``, ``--tests-from``: :mod:`orchestrator.services.replay_tests`),
fixes the screening policy, the workers per side and the recorded durations it schedules
by, and writes ``run-log.json`` into the run folder before anything runs.
``execute`` replays both sides at once (:func:`orchestrator.services.sides.replay_sides`):
with screening, every property K times first, then only the properties with signal until
they have N (:mod:`orchestrator.core.screening`), one ``replay_sides`` call per phase. It
compares each property's oracle slice on both revisions
(:func:`orchestrator.services.oracle.property_oracles`), builds one evidence document per
property, decides with the pure core (:mod:`orchestrator.core.replay_run`) and writes
``evidence-<n>.json``, ``decision-<n>.json``, ``durations.json`` and ``summary.json``
(and folds the measured durations into the repository's record,
:mod:`orchestrator.services.durations`). The result is a frozen :class:`ReplayOutcome`
that other services (the ledger) build on.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import files
from orchestrator.adapters import git as git_adapter
from orchestrator.core.digest import NULL_DIGEST, digest
from orchestrator.core.oracle import OracleChange
from orchestrator.core.pytest_command import pytest_args, split_node_id
from orchestrator.core.replay_run import (
    BASE,
    PATCH,
    Pins,
    PropertyOutcome,
    ReplayOptions,
    RunPlan,
    Scheduling,
    decide_all,
    report_document,
)
from orchestrator.core.schedule import (
    container_limits,
    default_jobs,
    measured_durations,
    order_longest_first,
)
from orchestrator.core.screening import (
    Screening,
    combine,
    replay_targets,
    screen,
    screen_replays,
)
from orchestrator.errors import InputError, SchemaError
from orchestrator.model import Decision, Evidence, Lane, Replay, ShrinkSummary
from orchestrator.services import durations as durations_store
from orchestrator.services.oracle import (
    Sources,
    compare_inputs,
    oracle_inputs,
    property_oracles,
    same_files,
)
from orchestrator.services.replay_tests import check_test_options, plan_tests
from orchestrator.services.sides import (
    FIXTURE,
    ISOLATIONS,
    NO_TEST_REPORTED,
    ReplayPlan,
    SideSpec,
    new_run_id,
    planned_pythonpath,
    replay_sides,
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


def validate_options(options: ReplayOptions) -> None:
    if options.replays < 1:
        raise InputError("--replays must be at least 1")
    if options.screen is not None and options.screen < 1:
        raise InputError("--screen must be at least 1 (--replays-all replays without screening)")
    if options.screen is not None and options.replays_all:
        raise InputError("--screen and --replays-all exclude each other")
    if options.jobs is not None and options.jobs < 1:
        raise InputError("--jobs must be at least 1")
    if options.timeout_s <= 0:
        raise InputError("--timeout must be a positive number of seconds")
    if options.isolation not in ISOLATIONS:
        raise InputError(f"--isolation must be one of: {', '.join(ISOLATIONS)}")
    if options.shrink_report is not None and options.fixture is None:
        raise InputError("--shrink-report needs --fixture (the minimal fixture it describes)")
    if not options.runner_id.strip():
        raise InputError("--runner-id must not be empty")
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
    client: DockerClient,
    now: datetime,
    run_id: str | None = None,
    default_root: Path | None = None,
) -> RunPlan:
    """Pin both revisions, the image and the fixture; write run-log.json. Nothing runs yet."""
    from orchestrator.adapters.docker import resolve_image
    from orchestrator.core.project_image import interpreter_from_labels
    from orchestrator.core.replay_env import replay_variables

    validate_options(options)
    check_test_options(options)
    pytest_args(options.command, options.property_ids)  # a bad --command is exit 2 first
    repo = options.repo.resolve()
    base_rev = git_adapter.resolve_rev(repo, options.base)
    patch_rev = git_adapter.resolve_rev(repo, options.patch)
    tests = plan_tests(options, repo, base_rev, patch_rev)
    args = pytest_args(options.command, tests.property_ids)

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
    side_paths = {
        side: planned_pythonpath(repo, rev, options.pythonpath)
        for side, rev in ((BASE, base_rev), (PATCH, patch_rev))
    }
    run_id = run_id or new_run_id(now.timestamp())
    root = default_root if default_root is not None else Path.cwd()
    scheduling = plan_scheduling(options, client=client, repo=repo, base_rev=base_rev, root=root)
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
            interpreter=interpreter_from_labels(image.labels),
            image_labels=dict(image.labels),
        ),
        pytest_args=args,
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
        scheduling=scheduling,
    )
    if (run_dir / "run-log.json").exists():
        raise InputError(f"{run_dir}: already holds a run (run-log.json); pick another --out")
    files.write_json_atomic(run_dir / "run-log.json", plan.run_log())
    return plan


def plan_scheduling(
    options: ReplayOptions, *, client: DockerClient, repo: Path, base_rev: str, root: Path
) -> Scheduling:
    """Screening replays, workers per side and the recorded durations of the repository."""
    from orchestrator.adapters.docker import engine_cpus

    cpus = engine_cpus(client)
    key = durations_store.repository_key(repo, base_rev)
    store = durations_store.store_path(root, key).resolve()
    return Scheduling(
        screen=screen_replays(
            options.screen,
            replays_all=options.replays_all,
            named=bool(options.property_ids) or options.changed,
        ),
        jobs=options.jobs if options.jobs is not None else default_jobs(cpus),
        engine_cpus=cpus,
        repository=key,
        durations_file=store,
        durations=durations_store.read_durations(store),
    )


def sides_plan(
    plan: RunPlan,
    *,
    replays: int | None = None,
    property_ids: Sequence[str] | None = None,
) -> ReplayPlan:
    """What the engine needs to replay the plan's sides (``replays`` times each, the named
    ``property_ids`` only when given)."""
    options = plan.options
    scheduling = plan.scheduling
    limits = container_limits(scheduling.jobs, scheduling.engine_cpus)
    named = plan.property_ids if property_ids is None else tuple(property_ids)
    return ReplayPlan(
        image_id=plan.pins.image_id,
        pytest_args=plan.pytest_args
        if property_ids is None
        else pytest_args(options.command, named),
        property_ids=named,
        fixture=options.fixture,
        replays=options.replays if replays is None else replays,
        timeout_s=options.timeout_s,
        seed=options.seed,
        runner_id=options.runner_id,
        isolation=options.isolation,
        memory=limits.memory,
        pids=limits.pids,
        cpus=limits.cpus,
        jobs=scheduling.jobs,
        durations=scheduling.durations_file if scheduling.jobs > 1 else None,
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
        targets=tuple(plan.targets.get(name, ())),
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
    client: DockerClient,
    progress: Progress | None = None,
    ledger: LedgerRequest | None = None,
) -> ReplayOutcome:
    """Replay both sides at once, decide every property, write the run folder (and the
    ledger, when asked)."""
    options, pins = plan.options, plan.pins
    if ledger is not None:
        _import_in_background("orchestrator.services.ledger_jobs")
    properties: tuple[PropertyOutcome, ...] = ()
    screening: Screening | None = None
    if not plan.nothing_selected:
        sides = (side_spec(plan, BASE, pins.base_rev), side_spec(plan, PATCH, pins.patch_rev))
        settled: tuple[PropertyOutcome, ...] = ()
        if plan.screen_policy.enabled:
            labelled, oracle, screening, settled = screen_and_replay(
                plan, sides, client=client, progress=progress
            )
        else:
            labelled = replay_sides(
                sides_plan(plan),
                sides,
                client=client,
                progress=progress,
                run_id=plan.run_id,
                keep_raw=plan.run_dir / "raw",
            )
            named = [p for p in labelled[BASE] if p != NO_TEST_REPORTED]
            oracle = property_oracles(
                options.repo, pins.base_rev, pins.patch_rev, named, overlay=plan.overlay
            )
        done = {item.evidence.property_id for item in settled}
        rest = decide_all(
            plan, labelled, oracle, screening, only=[p for p in labelled[BASE] if p not in done]
        )
        write_outcomes(plan, rest)
        properties = tuple(sorted((*settled, *rest), key=lambda item: item.index))
        # --no-record writes the run folder only: durations go into the record with the ledger.
        record_run_durations(plan, labelled, keep=ledger is not None)
    report = report_document(plan, properties, screening)
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


def write_outcomes(plan: RunPlan, outcomes: Sequence[PropertyOutcome]) -> None:
    """``evidence-<n>.json`` and ``decision-<n>.json`` of each property."""
    files.write_json_many(
        document
        for item in outcomes
        for document in (
            (plan.run_dir / f"evidence-{item.index}.json", item.evidence.to_json()),
            (plan.run_dir / f"decision-{item.index}.json", item.decision.to_json()),
        )
    )


Labelled = Mapping[str, Mapping[str, tuple[Replay, ...]]]


def screen_and_replay(
    plan: RunPlan,
    sides: Sequence[SideSpec],
    *,
    client: DockerClient,
    progress: Progress | None,
) -> tuple[Labelled, dict[str, OracleChange], Screening, tuple[PropertyOutcome, ...]]:
    """Screen every property K times per side, then replay those with signal until they
    have N replays per side.

    Returns the labels (K, or N replays per property), every property's oracle, the
    screening, and the properties without signal already decided and written: their
    evidence is complete after screening, so they are settled (their oracle digests
    computed, decided, written) while the ones with signal replay.
    """
    options, pins = plan.options, plan.pins
    policy = plan.screen_policy
    first = replay_sides(
        sides_plan(plan, replays=policy.screen),
        sides,
        client=client,
        progress=progress,
        run_id=plan.run_id,
        keep_raw=plan.run_dir / "raw",
    )
    named = [property_id for property_id in first[BASE] if property_id != NO_TEST_REPORTED]
    inputs = oracle_inputs(options.repo, pins.base_rev, pins.patch_rev, named, overlay=plan.overlay)
    # Only a property whose files differ between the sides can have a changed oracle: those
    # are sliced now, for the signal; the others only need their digests, later.
    oracle = compare_inputs({p: pair for p, pair in inputs.items() if not same_files(pair)})
    screening = screen(policy, first, oracle, base=BASE, patch=PATCH)
    unchanged = {p: pair for p, pair in inputs.items() if same_files(pair)}
    quiet = [property_id for property_id in first[BASE] if property_id not in screening.signals]
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="settle")
    try:
        settling = pool.submit(
            settle,
            plan,
            screened=first,
            unchanged=unchanged,
            oracle=oracle,
            screening=screening,
            quiet=quiet,
        )
        labelled = replay_signals(plan, screening, first, sides, client=client, progress=progress)
        digests, settled = settling.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return labelled, {**digests, **oracle}, screening, settled


def settle(
    plan: RunPlan,
    *,
    screened: Labelled,
    unchanged: Mapping[str, tuple[Sources, Sources]],
    oracle: Mapping[str, OracleChange],
    screening: Screening,
    quiet: Sequence[str],
) -> tuple[dict[str, OracleChange], tuple[PropertyOutcome, ...]]:
    """The oracle digests of properties whose files are the same on both sides, and the
    properties without signal decided on their screening replays, their files written."""
    digests = compare_inputs(unchanged)
    settled = decide_all(plan, screened, {**digests, **oracle}, screening, only=quiet)
    write_outcomes(plan, settled)
    return digests, settled


def replay_signals(
    plan: RunPlan,
    screening: Screening,
    screened: Mapping[str, Mapping[str, tuple[Replay, ...]]],
    sides: Sequence[SideSpec],
    *,
    client: DockerClient,
    progress: Progress | None,
) -> dict[str, dict[str, tuple[Replay, ...]]]:
    """The second phase: N - K replays of the properties with signal, longest first (their
    screening replays and the recorded durations say how long), after their K."""
    if not screening.signals or screening.more == 0:
        return combine(screened, {}, screening)
    known = {**plan.scheduling.durations, **measured_durations(screened)}
    ordered = order_longest_first(list(screening.signals), known)
    raw = plan.run_dir / "raw"
    second_raw = plan.run_dir / "raw-replays"
    targeted = tuple(
        replace(side, targets=replay_targets(ordered, screened[side.name])) for side in sides
    )
    try:
        replayed = replay_sides(
            sides_plan(plan, replays=screening.more, property_ids=ordered),
            targeted,
            client=client,
            progress=progress,
            run_id=plan.run_id,
            keep_raw=second_raw,
        )
    finally:
        # Replay k of a property's evidence is raw/<side>/replay-<k>.json: the second
        # phase's come after the K screening ones.
        renumber_raw(second_raw, raw, offset=screening.policy.screen)
    return combine(screened, replayed, screening)


def renumber_raw(source: Path, dest: Path, *, offset: int) -> None:
    """Move ``source/<side>/replay-<k>.json`` to ``dest/<side>/replay-<k + offset>.json``
    (other files keep their names), then remove ``source``."""
    from orchestrator.adapters.results import replay_file_name

    if not source.is_dir():
        return
    for side_dir in sorted(path for path in source.iterdir() if path.is_dir()):
        target = dest / side_dir.name
        target.mkdir(parents=True, exist_ok=True)
        for path in sorted(side_dir.iterdir()):
            number = _replay_number(path.name)
            name = path.name if number is None else replay_file_name(number + offset)
            path.replace(target / name)
    shutil.rmtree(source, ignore_errors=True)


def _replay_number(name: str) -> int | None:
    stem = name.removeprefix("replay-").removesuffix(".json")
    if name.startswith("replay-") and name.endswith(".json") and stem.isdigit():
        return int(stem)
    return None


def record_run_durations(
    plan: RunPlan, labelled: Mapping[str, Mapping[str, Sequence[Replay]]], *, keep: bool
) -> None:
    """What the run measured: ``durations.json`` in its folder and, with ``keep``, folded
    into the repository's record."""
    scheduling = plan.scheduling
    if scheduling.repository is None:
        return
    measured = measured_durations(labelled)
    now = datetime.now(UTC)
    durations_store.write_run_durations(plan.run_dir, scheduling.repository, measured, now=now)
    if keep and scheduling.durations_file is not None and measured:
        try:
            durations_store.record_durations(
                scheduling.durations_file, scheduling.repository, measured, now=now
            )
        except OSError as error:  # a record that cannot be kept never fails the run
            from orchestrator.log import get_logger

            get_logger(__name__).warning(
                "durations.not_recorded", path=str(scheduling.durations_file), error=str(error)
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
