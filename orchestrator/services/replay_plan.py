"""Planning a replay: pin both revisions, the image, the fixture (and a shrink report
checked against it), the tests (``--changed``, ``--tests-from``:
:mod:`orchestrator.services.replay_tests`; a ``--shard``'s part; when nothing names the
tests and the run is cut, the tests the command collects on both revisions), the
screening policy, the workers per side and the recorded durations it schedules by
(:mod:`orchestrator.services.durations`); then write ``run-log.json``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import files
from orchestrator.adapters import git as git_adapter
from orchestrator.core.digest import NULL_DIGEST, canonical_json, digest
from orchestrator.core.evidence import parse_shrink_report
from orchestrator.core.neutralise import Neutralisation, installed_from_packages, side_config
from orchestrator.core.pool import lanes_for, narrow_targets, sides_at_once
from orchestrator.core.pytest_command import pytest_args, pytest_paths
from orchestrator.core.replay_deadline import Deadline, replay_deadline
from orchestrator.core.replay_env import (
    INI_FILES,
    interpreter_from_labels,
    pytest_addopts,
    replay_variables,
    split_words,
)
from orchestrator.core.replay_run import (
    BASE,
    PATCH,
    Pins,
    ReplayOptions,
    RunPlan,
    Scheduling,
)
from orchestrator.core.schedule import (
    container_limits,
    screening_jobs,
)
from orchestrator.core.screening import (
    screen_replays,
)
from orchestrator.core.shards import shard_record
from orchestrator.core.side_evidence import screening_stored
from orchestrator.errors import InputError, SchemaError
from orchestrator.log import get_logger
from orchestrator.model import ShrinkSummary
from orchestrator.probe import PROBE_VERSION
from orchestrator.services import durations as durations_store
from orchestrator.services import run_writer
from orchestrator.services.oracle import (
    property_oracles,
)
from orchestrator.services.replay_tests import TestsPlan, plan_tests
from orchestrator.services.sides import (
    FIXTURE,
    ReplayPlan,
    SideSpec,
    collect_tests,
    new_run_id,
    plan_limits,
    planned_pythonpath,
    side_pythonpath,
)
from orchestrator.services.sides.pool import Pool

if TYPE_CHECKING:
    from orchestrator.core.test_files import TestOverlay

log = get_logger(__name__)


def shrink_from_report(doc: Any, fixture_digest: str) -> ShrinkSummary:
    """The report's summary, checked against the fixture it should describe. Pure."""
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
    return str(PROBE_VERSION)


@dataclass(frozen=True, kw_only=True)
class PinnedFixture:
    """The fixture as every replay reads it, and the shrink that made it (if any)."""

    path: Path | None = None  # resolved; None: the run has no fixture
    data: bytes | None = None
    digest: str = NULL_DIGEST
    origin_digest: str = NULL_DIGEST
    origin_bytes: bytes | None = None
    shrink: ShrinkSummary | None = None


def pin_fixture(options: ReplayOptions) -> PinnedFixture:
    """Read the fixture once, from the path given (a link there is refused, not followed):
    these bytes are digested, kept in the run folder and mounted. A shrink report is
    checked against them and names the unshrunk payload."""
    if options.fixture is None:
        return PinnedFixture()
    data = files.read_bytes(options.fixture, name=f"--fixture {options.fixture}")
    path = options.fixture.resolve()
    fixture_digest = digest(files.parse_json(data, str(path)))
    pinned = PinnedFixture(
        path=path, data=data, digest=fixture_digest, origin_digest=fixture_digest, origin_bytes=data
    )
    if options.shrink_report is None:
        return pinned
    report_doc = files.parse_json(
        files.read_bytes(options.shrink_report, name=f"--shrink-report {options.shrink_report}"),
        str(options.shrink_report),
    )
    shrink = shrink_from_report(report_doc, fixture_digest)
    origin_digest = shrink.origin_digest or fixture_digest
    return replace(
        pinned,
        shrink=shrink,
        origin_digest=origin_digest,
        origin_bytes=origin_bytes_from(report_doc, options.origin, origin_digest),
    )


def plan_replay(
    options: ReplayOptions,
    *,
    pool: Pool,
    now: datetime,
    run_id: str | None = None,
    default_root: Path | None = None,
    before_containers: Callable[[], object] | None = None,
    records_in_ledger: bool = False,
) -> RunPlan:
    """Pin both revisions, the image, the fixture and the selection; write run-log.json.
    No replay runs yet (a collection may, to cut a run whose tests are not named).

    ``before_containers`` runs once the revisions and the image are pinned, before any
    container starts (a collection) and before the run folder is written: the command
    waits there for the ledger it opened meanwhile. ``records_in_ledger``: the run
    records in a ledger (where its sides' screening is stored for reuse)."""
    repo = options.repo.resolve()
    base_rev = git_adapter.resolve_rev(repo, options.base)
    patch_rev = git_adapter.resolve_rev(repo, options.patch)
    for rev in dict.fromkeys((base_rev, patch_rev)):  # before anything is written
        git_adapter.check_tree_size(repo, rev)
    tests = plan_tests(options, repo, base_rev, patch_rev)
    args = pytest_args(options.command, tests.property_ids)
    fixture = pin_fixture(options)
    if not options.changed:  # --changed picks tests the patch touched, never a typo
        refuse_unknown_properties(
            repo, base_rev, patch_rev, options.property_ids, overlay=tests.overlay
        )
    # ImageNotFoundError: exit 3, never a pull. The first engine pins the ID.
    image = pool.first.resolve_image(options.image)
    side_paths = {
        side: planned_pythonpath(repo, rev, options.pythonpath)
        for side, rev in ((BASE, base_rev), (PATCH, patch_rev))
    }
    run_id = run_id or options.run_id or new_run_id(now.timestamp())
    root = default_root if default_root is not None else Path.cwd()
    scheduling = plan_scheduling(
        options,
        pool=pool,
        repo=repo,
        base_rev=base_rev,
        root=root,
        records_in_ledger=records_in_ledger,
    )
    deadline = plan_deadline(options, repo, (base_rev, patch_rev), tests, scheduling.durations)
    plan = RunPlan(
        run_id=run_id,
        run_dir=run_folder(options, run_id, default_root),
        started_at=now,
        options=replace(options, repo=repo, fixture=fixture.path, timeout_s=deadline.timeout_s),
        origin_bytes=fixture.origin_bytes,
        pins=Pins(
            base_rev=base_rev,
            patch_rev=patch_rev,
            image_ref=options.image,
            image_id=image.id,
            repo_digests=tuple(image.repo_digests),
            fixture_digest=fixture.digest,
            origin_digest=fixture.origin_digest,
            shrink=fixture.shrink,
            probe_version=probe_version(),
            interpreter=interpreter_from_labels(image.labels),
            image_labels=dict(image.labels),
        ),
        pytest_args=args,
        engines=tuple(pool.describe()) if pool.named or options.slots is not None else (),
        environment=replay_variables(
            seed=options.seed,
            fixture=FIXTURE if fixture.path is not None else None,
            extra=options.env,
        ),
        side_paths=side_paths,
        pythonpath={side: side_pythonpath(paths.entries) for side, paths in side_paths.items()},
        overlay=tests.overlay,
        selection=tests.selection,
        targets=tests.targets,
        scheduling=scheduling,
        neutralisation=plan_neutralisation(
            options, repo, {BASE: base_rev, PATCH: patch_rev}, args, image.labels
        ),
        timeout_rule=deadline.rule,
    )
    if before_containers is not None:
        before_containers()
    return start_run(plan, fixture.data, replace(pool, durations=scheduling.durations))


PACKAGES_LABEL = "orchestrator.packages"  # a project image's pinned packages


def plan_neutralisation(
    options: ReplayOptions,
    repo: Path,
    revs: Mapping[str, str],
    command_args: Sequence[str],
    image_labels: Mapping[str, str],
) -> Neutralisation:
    """What the replays neutralise (core.neutralise), with what each side's configuration
    asks of those plugins: its ini file's ``addopts`` at its revision, ``PYTEST_ADDOPTS``
    (``--env``) and the command; and, for a project image, which of them it installed."""
    env_addopts = split_words(dict(options.env).get("PYTEST_ADDOPTS", ""))
    sides = {}
    for side, rev in revs.items():
        addopts, ini_file = pytest_addopts(git_adapter.read_blobs(repo, rev, INI_FILES))
        sides[side] = side_config(addopts, ini_file, env_addopts, command_args)
    return Neutralisation(
        seed=options.seed,
        sides=sides,
        installed=installed_from_packages(image_labels.get(PACKAGES_LABEL)),
    )


def start_run(plan: RunPlan, fixture_bytes: bytes | None, pool: Pool) -> RunPlan:
    """Open the run folder (marked incomplete from here; the fixture's copy first: a
    collection mounts it too), fix what the run replays and write its run log."""
    run_writer.check_run_folder(plan.run_dir)
    kept = None
    if plan.kept_fixture is not None and fixture_bytes is not None:
        kept = (plan.kept_fixture.name, fixture_bytes)
    run_writer.start_run_folder(plan.run_dir, started_at=plan.run_log()["started_at"], kept=kept)
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
    run_writer.write_run_log(plan.run_dir, plan.run_log())
    return plan


def plan_scheduling(
    options: ReplayOptions,
    *,
    pool: Pool,
    repo: Path,
    base_rev: str,
    root: Path,
    records_in_ledger: bool = False,
) -> Scheduling:
    """Screening replays, workers per side and the recorded durations of the repository
    (the one record of durations: workers split by it, and batches and shards are cut and
    ordered by it). The default workers follow whether the run's screening is stored
    (:func:`~orchestrator.core.side_evidence.screening_stored`: ``records_in_ledger``, an
    evidence cache; :func:`~orchestrator.core.schedule.screening_jobs`)."""
    first = pool.first
    cpus = first.cpus()
    key = durations_store.repository_key(repo, base_rev)
    store = durations_store.store_path(root, key).resolve()
    durations = durations_store.read_durations(store)
    screen = screen_replays(
        options.screen,
        replays_all=options.replays_all,
        named=bool(options.property_ids) or options.changed,
    )
    reusable = screening_stored(
        reuse=options.reuse,
        screens=screen > 0,
        ledger=records_in_ledger,
        cache=options.evidence_cache is not None,
    )
    return Scheduling(
        screen=screen,
        jobs=options.jobs
        if options.jobs is not None
        else screening_jobs(
            cpus,
            sides=sides_at_once(first.slots),
            recorded_ms=sum(durations.values()),
            reusable=reusable,
        ),
        engine_cpus=cpus,
        repository=key,
        durations_file=store,
        durations=durations,
    )


def plan_deadline(
    options: ReplayOptions,
    repo: Path,
    revs: Sequence[str],
    tests: TestsPlan,
    durations: Mapping[str, float],
) -> Deadline:
    """Each replay's deadline: the one given, else derived (core.replay_deadline) from the
    recorded durations of the tests the run hands pytest, found on both trees."""
    named = bool(options.property_ids)
    paths: set[str] = set()
    if options.timeout_source is None and not named and tests.selection is None:
        for rev in dict.fromkeys(revs):
            paths.update(git_adapter.list_tree(repo, rev))
        if tests.overlay is not None:
            paths.update(tests.overlay.files)
    deadline = replay_deadline(
        given=None if options.timeout_source is None else options.timeout_s,
        given_by=options.timeout_source or "",
        named=named,
        paths=paths,
        command_paths=pytest_paths(options.command),
        durations=durations,
        selected=() if tests.selection is None else tests.selection.selected,
    )
    log.info("replay.deadline", timeout_s=deadline.timeout_s, rule=deadline.rule)
    return deadline


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
    limits = container_limits(
        scheduling.jobs,
        scheduling.engine_cpus,
        tests=len(scheduling.durations),
        memory_mb=options.memory_mb,
    )
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
