"""Bilateral replay: plan (pin everything, write the run log), then execute, then decide.

``plan_replay`` resolves both revisions to full SHAs, the image reference to one
image ID on the first engine of the pool (never pulled), digests the fixture, checks a
shrink report against it, plans the tests (``--changed``, ``--tests-from``:
:mod:`orchestrator.services.replay_tests`; a ``--shard``'s part of them; when nothing
names the tests and the run is cut, the tests the command collects on both revisions),
fixes the screening policy, the workers per side and the recorded durations it schedules
by (the one record, :mod:`orchestrator.services.durations`, which also orders and cuts
batches and shards), and writes ``run-log.json`` into the run folder before any replay
runs. ``execute`` replays both sides at once (:func:`orchestrator.services.sides.run_sides`,
spread over the pool's engines): with screening, every property K times first, then only
the properties with signal until they have N (:mod:`orchestrator.core.screening`), one
``run_sides`` call per phase, each property's second phase on the engine of its first. It
compares each property's oracle slice on both revisions
(:func:`orchestrator.services.oracle.property_oracles`), builds one evidence document per
property, decides with the pure core (:mod:`orchestrator.core.replay_run`) and writes
``evidence-<n>.json``, ``decision-<n>.json``, ``durations.json`` and ``summary.json``
(and folds the measured durations into the repository's record,
:mod:`orchestrator.services.durations`). The result is a frozen :class:`ReplayOutcome`
that other services (the ledger) build on.

Around that flow (:mod:`orchestrator.services.run_writer`): the run folder is checked
before anything runs and marked ``INCOMPLETE`` until ``summary.json`` is written; a
``--property`` that names no test on either side is bad input, before any replay when
the sources tell, else after collection (never an infra case); the ledger (opened by the
command before anything ran, :func:`open_ledger_for_run`) is written after the folder is
complete, and a ledger that fails leaves the report whole (``recording_error``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import files, interrupts
from orchestrator.adapters import git as git_adapter
from orchestrator.adapters.input_file import check_input
from orchestrator.core.digest import NULL_DIGEST, digest
from orchestrator.core.oracle import OracleChange
from orchestrator.core.pool import lanes_for, narrow_targets, plan_batches_on, sides_at_once
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
    never_collected,
    report_document,
)
from orchestrator.core.schedule import (
    container_limits,
    default_jobs,
    measured_durations,
    order_longest_first,
)
from orchestrator.core.screening import (
    RAW,
    SECOND_PHASE,
    RawLink,
    Screening,
    combine,
    raw_layout,
    replay_targets,
    screen,
    screen_replays,
    second_phase_dir,
)
from orchestrator.errors import InputError, LedgerError, SchemaError
from orchestrator.model import Decision, Evidence, Lane, Replay, ShrinkSummary
from orchestrator.services import durations as durations_store
from orchestrator.services import run_writer
from orchestrator.services.engines import Pool, single_pool
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
    SidesOutcome,
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

    from orchestrator.core.test_files import TestOverlay
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
    # The ledger, opened (and checked) before anything ran; None: open ``url`` to record.
    store: Any = None


@dataclass(frozen=True, kw_only=True)
class ReplayOutcome:
    """What a replay produced: the plan it ran, one evidence and decision per property."""

    plan: RunPlan
    properties: tuple[PropertyOutcome, ...]
    report: Mapping[str, Any]
    exit_status: int
    # Recording was asked and failed (the run folder is complete, the ledger untouched).
    recording_error: str | None = None

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
    from orchestrator.core.bounds import (
        MAX_JOBS,
        MAX_REPLAYS,
        MAX_SLOTS,
        MAX_TIMEOUT_S,
        screen_problem,
    )

    if options.replays < 1:
        raise InputError("--replays must be at least 1")
    if options.screen is not None and options.screen < 1:
        raise InputError("--screen must be at least 1 (--replays-all replays without screening)")
    for flag, count, maximum in (
        ("--replays", options.replays, MAX_REPLAYS),
        ("--screen", options.screen, MAX_REPLAYS),
        ("--jobs", options.jobs, MAX_JOBS),
        ("--slots", options.slots, MAX_SLOTS),
    ):
        _check_count(flag, count, maximum)
    problem = screen_problem(options.screen, options.replays)
    if problem is not None:
        raise InputError(problem)
    if options.screen is not None and options.replays_all:
        raise InputError("--screen and --replays-all exclude each other")
    if options.jobs is not None and options.jobs < 1:
        raise InputError("--jobs must be at least 1")
    if not 0 < options.timeout_s <= MAX_TIMEOUT_S:
        raise InputError(
            f"--timeout must be a positive number of seconds, at most {MAX_TIMEOUT_S:g}"
        )
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
    # Input files: each a regular file under the cap, refused before anything is opened.
    for flag, path in (
        ("--fixture", options.fixture),
        ("--shrink-report", options.shrink_report),
        ("--origin", options.origin),
    ):
        if path is not None:
            check_input(path, name=f"{flag} {path}")


def _check_count(flag: str, count: int | None, maximum: int) -> None:
    from orchestrator.core.bounds import count_problem

    problem = None if count is None else count_problem(flag, count, maximum=maximum)
    if problem is not None:
        raise InputError(problem)


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
        source = f"--origin {origin}"
        data = files.read_bytes(origin, name=source)
        payload = files.parse_json(data, source)
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
    before_containers: Callable[[], object] | None = None,
) -> RunPlan:
    """Pin both revisions, the image, the fixture and the selection; write run-log.json.
    No replay runs yet (a collection may, to cut a run whose tests are not named).

    ``before_containers`` runs once the revisions and the image are pinned, before any
    container starts (a collection) and before the run folder is written: the command
    waits there for the ledger it opened meanwhile."""
    from orchestrator.adapters.docker import engine_url, resolve_image
    from orchestrator.core.replay_env import interpreter_from_labels, replay_variables

    validate_options(options)
    if pool is None:
        if client is None:
            raise ValueError("plan_replay needs a client or a pool")
        pool = single_pool(client, url=engine_url(os.environ), runner_id=options.runner_id)
    check_test_options(options)
    pytest_args(options.command, options.property_ids)  # a bad --command is exit 2 first
    repo = options.repo.resolve()
    base_rev = git_adapter.resolve_rev(repo, options.base)
    patch_rev = git_adapter.resolve_rev(repo, options.patch)
    for rev in dict.fromkeys((base_rev, patch_rev)):  # before anything is written
        git_adapter.check_tree_size(repo, rev)
    tests = plan_tests(options, repo, base_rev, patch_rev)
    args = pytest_args(options.command, tests.property_ids)

    fixture_digest = NULL_DIGEST
    fixture: Path | None = None
    fixture_bytes: bytes | None = None
    if options.fixture is not None:
        # Read once, from the path given (a link there is refused, not followed): these
        # bytes are digested, kept in the run folder and mounted.
        fixture_bytes = files.read_bytes(options.fixture, name=f"--fixture {options.fixture}")
        fixture = options.fixture.resolve()
        fixture_digest = digest(files.parse_json(fixture_bytes, str(fixture)))
    shrink: ShrinkSummary | None = None
    origin_digest = fixture_digest
    origin_bytes = fixture_bytes
    if options.shrink_report is not None:
        report_doc = files.parse_json(
            files.read_bytes(
                options.shrink_report, name=f"--shrink-report {options.shrink_report}"
            ),
            str(options.shrink_report),
        )
        shrink = shrink_from_report(report_doc, fixture_digest)
        origin_digest = shrink.origin_digest or fixture_digest
        origin_bytes = origin_bytes_from(report_doc, options.origin, origin_digest)
    elif options.origin is not None:
        raise InputError("--origin goes with --shrink-report (it is the shrink's input)")

    if not options.changed:  # --changed picks tests the patch touched, never a typo
        refuse_unknown_properties(
            repo, base_rev, patch_rev, options.property_ids, overlay=tests.overlay
        )

    # ImageNotFoundError: exit 3, never a pull. The first engine pins the ID.
    image = resolve_image(pool.first.client, options.image)
    side_paths = {
        side: planned_pythonpath(repo, rev, options.pythonpath)
        for side, rev in ((BASE, base_rev), (PATCH, patch_rev))
    }
    run_id = run_id or options.run_id or new_run_id(now.timestamp())
    root = default_root if default_root is not None else Path.cwd()
    scheduling = plan_scheduling(options, pool=pool, repo=repo, base_rev=base_rev, root=root)
    pool = replace(pool, durations=scheduling.durations)
    run_dir = run_folder(options, run_id, default_root)
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
        scheduling=scheduling,
    )
    if before_containers is not None:
        before_containers()
    run_writer.check_run_folder(run_dir)
    # Marked incomplete from here; the fixture's copy first: a collection mounts it too.
    kept = None
    if plan.kept_fixture is not None and fixture_bytes is not None:
        kept = (plan.kept_fixture.name, fixture_bytes)
    run_writer.start_run_folder(run_dir, started_at=plan.run_log()["started_at"], kept=kept)
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
    run_writer.write_run_log(run_dir, plan.run_log())
    return plan


def plan_scheduling(
    options: ReplayOptions, *, pool: Pool, repo: Path, base_rev: str, root: Path
) -> Scheduling:
    """Screening replays, workers per side and the recorded durations of the repository
    (the one record of durations: workers split by it, and batches and shards are cut and
    ordered by it)."""
    from orchestrator.adapters.docker import engine_cpus

    first = pool.first
    cpus = engine_cpus(first.client)
    key = durations_store.repository_key(repo, base_rev)
    store = durations_store.store_path(root, key).resolve()
    return Scheduling(
        screen=screen_replays(
            options.screen,
            replays_all=options.replays_all,
            named=bool(options.property_ids) or options.changed,
        ),
        jobs=options.jobs
        if options.jobs is not None
        else default_jobs(cpus, sides=sides_at_once(first.slots)),
        engine_cpus=cpus,
        repository=key,
        durations_file=store,
        durations=durations_store.read_durations(store),
    )


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


def run_folder(options: ReplayOptions, run_id: str, default_root: Path | None = None) -> Path:
    """``--out``, or ``.replay/runs/<run-id>`` under ``default_root`` (the current folder)."""
    root = default_root if default_root is not None else Path.cwd()
    return (options.out or root / ".replay" / "runs" / run_id).resolve()


def unknown_message(property_ids: Sequence[str]) -> str:
    """The one line for node ids that name no test on either side. Pure."""
    more = f" (and {len(property_ids) - 1} more)" if len(property_ids) > 1 else ""
    return f"no test collected as {property_ids[0]} on either side{more}"


def refuse_unknown_properties(
    repo: Path,
    base_rev: str,
    patch_rev: str,
    property_ids: Sequence[str],
    *,
    overlay: TestOverlay | None = None,
) -> None:
    """Exit 2 before any replay for a ``--property`` that the sources show is defined on
    neither side (no such file, or no such test in it: the oracle slice's "absent").
    Where the source cannot tell (a star import, an outside base class), the replays
    decide after collection."""
    if not property_ids:
        return
    oracle = property_oracles(repo, base_rev, patch_rev, property_ids, overlay=overlay)
    absent = [
        property_id
        for property_id in property_ids
        if oracle[property_id].base_digest is None and oracle[property_id].patch_digest is None
    ]
    if absent:
        raise InputError(unknown_message(absent))


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
        # The run folder's copy: the bytes that were digested are the bytes mounted.
        fixture=plan.kept_fixture,
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
        from orchestrator.adapters.docker import engine_url

        pool = single_pool(client, url=engine_url(os.environ), runner_id=options.runner_id)
    properties: tuple[PropertyOutcome, ...] = ()
    screening: Screening | None = None
    extra: dict[str, Any] = {}
    if not plan.nothing_selected:
        # Batches are cut and ordered by the run's one record of durations.
        pool = replace(pool, durations=plan.scheduling.durations)
        sides = (side_spec(plan, BASE, pins.base_rev), side_spec(plan, PATCH, pins.patch_rev))
        settled: tuple[PropertyOutcome, ...] = ()
        if plan.screen_policy.enabled:
            outcome, oracle, screening, settled = screen_and_replay(
                plan, sides, pool=pool, progress=progress
            )
        else:
            outcome = run_sides(
                sides_plan(plan),
                sides,
                progress=progress,
                run_id=plan.run_id,
                keep_raw=plan.run_dir / RAW,
                pool=pool,
            )
            named = [p for p in outcome.labelled[BASE] if p != NO_TEST_REPORTED]
            oracle = property_oracles(
                options.repo, pins.base_rev, pins.patch_rev, named, overlay=plan.overlay
            )
        labelled = outcome.labelled
        never = never_collected(labelled)
        if never:  # the user's typo, not the runner's: no evidence, no infra row
            raise InputError(unknown_message(never))
        done = {item.evidence.property_id for item in settled}
        rest = decide_all(
            plan,
            labelled,
            oracle,
            screening,
            only=[p for p in labelled[BASE] if p not in done],
            runners=outcome.runners,
            raw_dirs=outcome.raw_dirs,
        )
        write_outcomes(plan, rest)
        properties = tuple(sorted((*settled, *rest), key=lambda item: item.index))
        if plan.engines:
            extra["engines"] = [dict(engine) for engine in outcome.engines]
        if outcome.attempts:
            extra["attempts"] = [attempt.to_json() for attempt in outcome.attempts]
        # --no-record writes the run folder only: durations go into the record with the
        # ledger. A shard keeps its own: its siblings must cut the selection from the same
        # record (``orchestrator merge`` folds the shards' durations in).
        record_run_durations(plan, labelled, keep=ledger is not None and plan.shard is None)
    report = report_document(plan, properties, screening)
    report.update(extra)
    report, recording_error = complete_and_record(plan, properties, report, ledger)
    return ReplayOutcome(
        plan=plan,
        properties=properties,
        report=report,
        exit_status=report["exit_status"],
        recording_error=recording_error,
    )


def complete_and_record(
    plan: RunPlan,
    properties: Sequence[PropertyOutcome],
    report: dict[str, Any],
    ledger: LedgerRequest | None,
) -> tuple[dict[str, Any], str | None]:
    """Write ``summary.json``, mark the run folder complete, then record in the ledger
    (when asked) and write ``summary.json`` again with what the ledger gave.

    The report is whole before the ledger is touched, so a ledger failure cannot lose it
    (the one line it ends with is returned). The ledger only ever holds complete runs."""
    run_writer.write_json(plan.run_dir, "summary.json", report)
    recording_error = None
    # From here a signal waits (a commit is never cut from the run folder it belongs to),
    # except while the ledger's lock is awaited: that wait ends at once on Ctrl-C.
    with interrupts.shielded():
        run_writer.finish_run_folder(plan.run_dir)  # complete, whatever the ledger does
        if ledger is not None:
            try:
                report["ledger"], recording_error = _record(plan, properties, ledger, report)
            except KeyboardInterrupt:  # while waiting for the lock: nothing was recorded
                run_writer.mark_incomplete(plan.run_dir, "interrupted before recording")
                raise
            run_writer.write_json(plan.run_dir, "summary.json", report)  # the ledger's ids
    return report, recording_error


def _record(
    plan: RunPlan,
    properties: Sequence[PropertyOutcome],
    ledger: LedgerRequest,
    report: Mapping[str, Any],
) -> tuple[dict[str, Any], str | None]:
    """The report's ``ledger`` entry, and the one line a failed recording ends with."""
    from orchestrator.adapters.ledger import display_url

    try:
        recorded = record_in_ledger(
            plan,
            properties,
            ledger,
            finished_at=datetime.now(UTC),
            exit_status=report["exit_status"],
        )
    except LedgerError as error:
        message = f"{error}; the run folder {plan.run_dir} is complete"
        entry = {"url": display_url(ledger.url), "recorded": False, "error": str(error)}
        return {**entry, "entries": []}, message
    return {**recorded, "recorded": True}, None


class PendingLedger:
    """The ledger a run records in, opened (created or upgraded) on a thread of its own
    while the run plans: SQLAlchemy's import and the schema check cost the time that
    pinning the revisions and the image takes anyway. :meth:`result` waits for it (in
    short waits, so Ctrl-C is acted on) and raises what opening raised: a URL or path
    that cannot be used (exit 2), a database that fails (exit 3)."""

    def __init__(self, url: str) -> None:
        import threading

        self.url = url
        self._store: Any = None
        self._error: BaseException | None = None
        self._done = threading.Event()
        threading.Thread(target=self._open, name="open ledger", daemon=True).start()

    def _open(self) -> None:
        from orchestrator.adapters.ledger import Ledger

        try:
            self._store = Ledger.open(self.url)
        except BaseException as error:  # handed to the main thread by result()
            self._error = error
        finally:
            self._done.set()

    def result(self) -> Any:
        while not self._done.wait(timeout=0.2):  # short waits: Ctrl-C acted on between
            interrupts.checkpoint()
        if self._error is not None:
            raise self._error
        return self._store

    def close(self) -> None:
        if self._done.is_set() and self._store is not None:
            self._store.close()


def open_ledger_for_run(url: str) -> PendingLedger:
    """Start opening the run's ledger; it is checked before anything is written or run."""
    return PendingLedger(url)


def write_outcomes(plan: RunPlan, outcomes: Sequence[PropertyOutcome]) -> None:
    """``evidence-<n>.json`` and ``decision-<n>.json`` of each property."""
    run_writer.write_json_many(
        plan.run_dir,
        (
            document
            for item in outcomes
            for document in (
                (f"evidence-{item.index}.json", item.evidence.to_json()),
                (f"decision-{item.index}.json", item.decision.to_json()),
            )
        ),
    )


def screen_and_replay(
    plan: RunPlan,
    sides: Sequence[SideSpec],
    *,
    pool: Pool,
    progress: Progress | None,
) -> tuple[SidesOutcome, dict[str, OracleChange], Screening, tuple[PropertyOutcome, ...]]:
    """Screen every property K times per side, then replay those with signal until they
    have N replays per side, each on the engine of its screening.

    Returns both phases as one outcome (K, or N replays per property; the engine of each
    property; its raw folder), every property's oracle, the screening, and the properties
    without signal already decided and written: their evidence is complete after
    screening, so they are settled (their oracle digests computed, decided, written) while
    the ones with signal replay.
    """
    options, pins = plan.options, plan.pins
    policy = plan.screen_policy
    first = run_sides(
        sides_plan(plan, replays=policy.screen),
        sides,
        progress=progress,
        run_id=plan.run_id,
        keep_raw=plan.run_dir / RAW,
        pool=pool,
    )
    screened = first.labelled
    started = time.perf_counter()
    named = [property_id for property_id in screened[BASE] if property_id != NO_TEST_REPORTED]
    inputs = oracle_inputs(options.repo, pins.base_rev, pins.patch_rev, named, overlay=plan.overlay)
    # Only a property whose files differ between the sides can have a changed oracle: those
    # are sliced now, for the signal; the others only need their digests, later.
    oracle = compare_inputs({p: pair for p, pair in inputs.items() if not same_files(pair)})
    screening = screen(policy, screened, oracle, base=BASE, patch=PATCH)
    unchanged = {p: pair for p, pair in inputs.items() if same_files(pair)}
    quiet = [property_id for property_id in screened[BASE] if property_id not in screening.signals]
    _log().debug(
        "screening.screened",
        properties=len(screened[BASE]),
        signals=len(screening.signals),
        seconds=round(time.perf_counter() - started, 3),
    )
    settler = ThreadPoolExecutor(max_workers=1, thread_name_prefix="settle")
    try:
        settling = settler.submit(
            settle,
            plan,
            screened=first,
            unchanged=unchanged,
            oracle=oracle,
            screening=screening,
            quiet=quiet,
        )
        outcome = replay_signals(plan, screening, first, sides, pool=pool, progress=progress)
        digests, settled = settling.result()
    finally:
        settler.shutdown(wait=False, cancel_futures=True)
    return outcome, {**digests, **oracle}, screening, settled


def settle(
    plan: RunPlan,
    *,
    screened: SidesOutcome,
    unchanged: Mapping[str, tuple[Sources, Sources]],
    oracle: Mapping[str, OracleChange],
    screening: Screening,
    quiet: Sequence[str],
) -> tuple[dict[str, OracleChange], tuple[PropertyOutcome, ...]]:
    """The oracle digests of properties whose files are the same on both sides, and the
    properties without signal decided on their screening replays, their files written."""
    started = time.perf_counter()
    digests = compare_inputs(unchanged)
    settled = decide_all(
        plan,
        screened.labelled,
        {**digests, **oracle},
        screening,
        only=quiet,
        runners=screened.runners,
        raw_dirs=screened.raw_dirs,
    )
    write_outcomes(plan, settled)
    _log().debug(
        "screening.settled",
        properties=len(settled),
        seconds=round(time.perf_counter() - started, 3),
    )
    return digests, settled


def _log() -> Any:
    from orchestrator.log import get_logger

    return get_logger(__name__)


def replay_signals(
    plan: RunPlan,
    screening: Screening,
    first: SidesOutcome,
    sides: Sequence[SideSpec],
    *,
    pool: Pool,
    progress: Progress | None,
) -> SidesOutcome:
    """The second phase: N - K replays of the properties with signal, longest first (their
    screening replays and the recorded durations say how long), each on the engine that
    screened it, after their K. Its raw files join the screening's (:func:`raw_layout`)."""
    screened = first.labelled
    if not screening.signals or screening.more == 0:
        return replace(first, labelled=combine(screened, {}, screening))
    known = {**plan.scheduling.durations, **measured_durations(screened)}
    ordered = order_longest_first(list(screening.signals), known)
    targeted = tuple(
        replace(side, targets=replay_targets(ordered, screened[side.name])) for side in sides
    )
    engine_of_runner: dict[str, int] = {}
    for engine in pool.engines:
        engine_of_runner.setdefault(engine.runner_id, engine.index)
    engine_of = {p: engine_of_runner.get(first.runners.get(p, ""), 0) for p in ordered}
    slots = [engine.slots for engine in pool.engines]
    second = run_sides(
        sides_plan(plan, replays=screening.more, property_ids=ordered),
        targeted,
        progress=progress,
        run_id=plan.run_id,
        keep_raw=plan.run_dir / RAW / SECOND_PHASE,
        pool=replace(pool, durations=known),
        batches=plan_batches_on(ordered, slots, known, engine_of),
    )
    attempts = tuple(
        replace(attempt, raw_dir=second_phase_dir(attempt.raw_dir)) for attempt in second.attempts
    )
    later = {p: second_phase_dir(raw_dir) for p, raw_dir in second.raw_dirs.items()}
    dirs, links = raw_layout(
        {p: first.raw_dirs.get(p, RAW) for p in later}, later, screen=screening.policy.screen
    )
    link_raw(plan.run_dir, links, sides=[side.name for side in sides])
    drop_second_phase(plan.run_dir, keep=[attempt.raw_dir for attempt in attempts])
    return SidesOutcome(
        labelled=combine(screened, second.labelled, screening),
        runners=first.runners,
        raw_dirs={**first.raw_dirs, **dirs},
        attempts=(*first.attempts, *attempts),
        engines=combined_engines(first.engines, second.engines),
    )


def link_raw(run_dir: Path, links: Sequence[RawLink], *, sides: Sequence[str]) -> None:
    """Give each link's replay files their place in its target folder (hard links: the
    bytes are not copied; a copy where the file system refuses). Never overwrites."""
    from orchestrator.adapters.results import replay_file_name

    for link in links:
        for side in sides:
            source = run_dir / link.source / side
            if not source.is_dir():
                continue
            target = run_dir / link.target / side
            target.mkdir(parents=True, exist_ok=True)
            for path in sorted(source.iterdir()):
                number = _replay_number(path.name)
                if number is None or (link.upto is not None and number > link.upto):
                    continue
                dest = target / replay_file_name(number + link.offset)
                if dest.exists():
                    continue
                try:
                    os.link(path, dest)
                except OSError:
                    shutil.copyfile(path, dest)


def drop_second_phase(run_dir: Path, *, keep: Sequence[str]) -> None:
    """Remove ``raw/replays`` once its files were linked where they belong, but for the
    folders of attempts (an engine that went away) that the run folder names."""
    root = run_dir / RAW / SECOND_PHASE
    if not root.is_dir():
        return
    kept = {(run_dir / folder).resolve() for folder in keep}
    if not kept:
        shutil.rmtree(root, ignore_errors=True)
        return
    for entry in root.iterdir():
        if entry.resolve() not in kept:
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def combined_engines(
    first: Sequence[Mapping[str, Any]], second: Sequence[Mapping[str, Any]]
) -> tuple[Mapping[str, Any], ...]:
    """Each engine as both phases saw it: its batches of both (the second's under
    ``replays/``), the first phase's properties (it decided them), and the second phase's
    status when that went wrong."""
    later = {entry.get("url"): entry for entry in second}
    engines = []
    for entry in first:
        merged = dict(entry)
        again = later.get(entry.get("url"))
        if again is not None:
            merged["batches"] = [
                *(entry.get("batches") or ()),
                *(f"{SECOND_PHASE}/{key}" for key in again.get("batches") or ()),
            ]
            if merged.get("status") == "ok" and again.get("status") != "ok":
                merged["status"], merged["detail"] = again.get("status"), again.get("detail")
            merged["image_shipped"] = entry.get("image_shipped") or again.get("image_shipped")
        engines.append(merged)
    return tuple(engines)


def _replay_number(name: str) -> int | None:
    stem = name.removeprefix("replay-").removesuffix(".json")
    if name.startswith("replay-") and name.endswith(".json") and re.fullmatch(r"[0-9]+", stem):
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
            _log().warning(
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
    from orchestrator.adapters.ledger import Ledger, display_url
    from orchestrator.services.ledger_jobs import (
        queue_infra,
        record_decisions_once,
        record_run,
        write_flake_freeze_from_replay,
    )

    # The run folder's copy (the bytes every replay read) when it was kept.
    kept = plan.kept_fixture
    if kept is not None and not kept.is_file():
        kept = plan.options.fixture
    fixture_bytes = files.read_bytes(kept) if kept is not None else None
    shrink_path = plan.pins.shrink.shrink_path if plan.pins.shrink is not None else ()
    # Nothing shrunk: the origin is the fixture itself. Otherwise the shrink report (or
    # --origin) carries the unshrunk payload; without it the ledger refuses the freeze.
    origin_bytes = plan.origin_bytes
    entries = []
    with contextlib.ExitStack() as opened:
        store = request.store
        if store is None:
            store = opened.enter_context(Ledger.open(request.url))
        opened.enter_context(store.transaction())
        record_run(
            store,
            plan.run_id,
            plan.started_at,
            finished_at,
            exit_status,
            plan.options.command,
            {"run_dir": str(plan.run_dir), "properties": len(properties)},
        )
        recorded = record_decisions_once(
            store,
            [(item.evidence, item.decision) for item in properties],
            request.now,
            run_id=plan.run_id,
        )
        for item, (event_id, new) in zip(properties, recorded, strict=True):
            evidence, decision = item.evidence, item.decision
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
