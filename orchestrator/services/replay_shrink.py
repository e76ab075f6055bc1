"""``replay --shrink``: from a wide failing payload to a decision on its minimal fixture.

1. Replay the property on both sides with the wide ``--fixture`` (``wide/``, a run folder
   of its own; nothing goes to the ledger yet).
2. When the property failed on the patch (some ``assert_fail``), shrink the fixture
   against that test at the patch revision, in the same image with the same seed,
   ``SHRINK_ATTEMPTS`` times from scratch (:mod:`orchestrator.services.shrink`).
3. Replay the property with the minimal fixture and the shrink report (``minimal/``),
   exactly as ``replay --fixture fixture-minimal.json --shrink-report shrink-report.json``
   would; that run decides and is the one recorded in the ledger.

The run folder keeps both fixtures::

    <run>/fixture-origin.json    the --fixture bytes as given
    <run>/wide/                  the replay with them (run-log.json, evidence, decisions, raw/)
    <run>/shrink-report.json     shrink-report/1 of the shrink against the patch
    <run>/fixture-minimal.json   its minimal fixture
    <run>/minimal/               the replay with the minimal fixture
    <run>/summary.json           replay-report/1 of the deciding run, with "shrink"

When the property does not fail on the patch (or no longer fails in the shrink's
container), nothing is shrunk and the wide replay decides. A candidate with no verdict
stops the shrink: the wide replay is recorded, and the run ends with
:class:`~orchestrator.errors.ShrinkStoppedError` (exit 3).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import files
from orchestrator.core.replay_run import PATCH, ReplayOptions
from orchestrator.errors import InputError, PropertyDoesNotFailError, ShrinkStoppedError
from orchestrator.log import get_logger
from orchestrator.model import Label
from orchestrator.services.replay import (
    LedgerRequest,
    ReplayOutcome,
    execute,
    plan_replay,
    record_in_ledger,
)
from orchestrator.services.shrink import (
    CandidateProgress,
    ShrinkTestPlan,
    ShrinkTestRequest,
    shrink_test,
)
from orchestrator.services.sides import new_run_id, pytest_arguments

if TYPE_CHECKING:
    from docker import DockerClient

    from orchestrator.core.shrink import ShrinkReport
    from orchestrator.services.sides import Progress

log = get_logger(__name__)

SHRINK_ATTEMPTS = 2
WIDE = "wide"
MINIMAL = "minimal"
FIXTURE_ORIGIN = "fixture-origin.json"
FIXTURE_MINIMAL = "fixture-minimal.json"
SHRINK_REPORT = "shrink-report.json"

# What happened to the shrink ("outcome" in the summary's "shrink").
SHRUNK = "shrunk"
NOT_FAILING = "not_failing_on_patch"  # the wide replay did not fail on the patch
NOT_REPRODUCED = "not_reproduced"  # the test passed on the wide fixture in the shrink
STOPPED = "stopped"  # a candidate gave no verdict


@dataclass(frozen=True, kw_only=True)
class ShrinkingReplay:
    """What ``replay --shrink`` produced: the deciding run and the summary document."""

    deciding: ReplayOutcome
    wide: ReplayOutcome
    shrink: ShrinkReport | None
    outcome: str
    message: str
    report: dict[str, Any]

    @property
    def exit_status(self) -> int:
        return int(self.report["exit_status"])


def validate_shrink_options(options: ReplayOptions) -> None:
    """Usage mistakes of ``replay --shrink``, found before any engine is asked. Pure."""
    if options.fixture is None:
        raise InputError("--shrink needs --fixture (the wide payload to shrink)")
    if options.shrink_report is not None or options.origin is not None:
        raise InputError("--shrink writes its own shrink report: drop --shrink-report/--origin")
    if len(options.property_ids) != 1:
        raise InputError("--shrink needs exactly one --property (the test to shrink against)")


def run_folder(options: ReplayOptions, run_id: str, default_root: Path | None = None) -> Path:
    root = default_root if default_root is not None else Path.cwd()
    return (options.out or root / ".replay" / "runs" / run_id).resolve()


def fails_on_patch(outcome: ReplayOutcome) -> bool:
    """Did the (one) property fail on the patch in some replay? Pure."""
    return any(
        replay.label == Label.ASSERT_FAIL
        for item in outcome.properties
        for replay in item.evidence.patch
    )


def shrink_plan(wide: ReplayOutcome) -> ShrinkTestPlan:
    """Shrink against the property at the patch revision, in the wide run's image, seed,
    timeout and pytest options. Pure."""
    plan, options = wide.plan, wide.plan.options
    test = options.property_ids[0]
    request = ShrinkTestRequest(
        repo=options.repo,
        rev=plan.pins.patch_rev,
        image=plan.pins.image_id,
        test=test,
        seed=options.seed,
        timeout_s=options.timeout_s,
        attempts=SHRINK_ATTEMPTS,
        runner_id=options.runner_id,
        command=options.command,
    )
    return ShrinkTestPlan(
        request=request,
        repo=options.repo,
        rev=plan.pins.patch_rev,
        image_id=plan.pins.image_id,
        pytest_args=pytest_arguments(plan.pytest_args, (test,)),
    )


def replay_and_shrink(
    options: ReplayOptions,
    *,
    client: DockerClient,
    now: datetime,
    progress: Progress | None = None,
    shrink_progress: CandidateProgress | None = None,
    ledger: LedgerRequest | None = None,
    run_id: str | None = None,
    default_root: Path | None = None,
) -> ShrinkingReplay:
    """Wide replay, shrink against the patch, replay with the minimal fixture (see the
    module). Raises :class:`ShrinkStoppedError` after writing the summary when a candidate
    stopped the shrink."""
    validate_shrink_options(options)
    assert options.fixture is not None  # validate_shrink_options checked it
    run_id = run_id or new_run_id(now.timestamp())
    run_dir = run_folder(options, run_id, default_root)
    for folder in (run_dir, run_dir / WIDE, run_dir / MINIMAL):
        if (folder / "run-log.json").exists() or (folder / "summary.json").exists():
            raise InputError(f"{folder}: already holds a run; pick another --out")

    wide_plan = plan_replay(
        replace(options, out=run_dir / WIDE), client=client, now=now, run_id=f"{run_id}-{WIDE}"
    )
    shutil.copyfile(wide_plan.options.fixture or options.fixture, run_dir / FIXTURE_ORIGIN)
    wide = execute(wide_plan, client=client, progress=progress)

    if not fails_on_patch(wide):
        message = f"{options.property_ids[0]} did not fail on the patch: nothing to shrink"
        return _decided_by_wide(run_dir, wide, ledger, NOT_FAILING, message)

    plan = shrink_plan(wide)
    log.info("replay.shrinking", test=plan.request.test, rev=plan.rev, run_id=run_id)
    try:
        shrunk = shrink_test(
            plan,
            files.read_json(str(run_dir / FIXTURE_ORIGIN)),
            client=client,
            run_id=f"{run_id}-shrink",
            progress=shrink_progress,
        )
    except PropertyDoesNotFailError as error:
        return _decided_by_wide(run_dir, wide, ledger, NOT_REPRODUCED, str(error))
    except ShrinkStoppedError as error:
        _decided_by_wide(run_dir, wide, ledger, STOPPED, str(error))
        raise
    report = shrunk.report
    files.write_json_atomic(run_dir / SHRINK_REPORT, report.to_json())
    files.write_json_atomic(run_dir / FIXTURE_MINIMAL, report.minimal)

    minimal_plan = plan_replay(
        replace(
            options,
            fixture=run_dir / FIXTURE_MINIMAL,
            shrink_report=run_dir / SHRINK_REPORT,
            out=run_dir / MINIMAL,
        ),
        client=client,
        now=now,
        run_id=f"{run_id}-{MINIMAL}",
    )
    minimal = execute(minimal_plan, client=client, progress=progress, ledger=ledger)
    message = (
        f"shrunk to {report.minimal_digest} ({'stable' if report.stable else 'unstable'}, "
        f"{report.identical_minima}/{report.attempts} identical minima)"
    )
    document = summary_document(
        run_dir,
        minimal,
        wide=wide,
        decided_in=MINIMAL,
        outcome=SHRUNK,
        message=message,
        shrink=report,
    )
    files.write_json_atomic(run_dir / "summary.json", document)
    return ShrinkingReplay(
        deciding=minimal,
        wide=wide,
        shrink=report,
        outcome=SHRUNK,
        message=message,
        report=document,
    )


def _decided_by_wide(
    run_dir: Path,
    wide: ReplayOutcome,
    ledger: LedgerRequest | None,
    outcome: str,
    message: str,
) -> ShrinkingReplay:
    """Nothing was shrunk: the wide replay decides (and is recorded)."""
    recorded = None
    if ledger is not None:
        recorded = record_in_ledger(wide.plan, wide.properties, ledger)
    document = summary_document(
        run_dir,
        wide,
        wide=wide,
        decided_in=WIDE,
        outcome=outcome,
        message=message,
        shrink=None,
        ledger=recorded,
    )
    files.write_json_atomic(run_dir / "summary.json", document)
    log.info("replay.not_shrunk", outcome=outcome, detail=message)
    return ShrinkingReplay(
        deciding=wide, wide=wide, shrink=None, outcome=outcome, message=message, report=document
    )


def summary_document(
    run_dir: Path,
    deciding: ReplayOutcome,
    *,
    wide: ReplayOutcome,
    decided_in: str,
    outcome: str,
    message: str,
    shrink: ShrinkReport | None,
    ledger: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The deciding run's replay-report/1, placed at the run folder, with "shrink". Pure."""
    document = dict(deciding.report)
    document["run_dir"] = str(run_dir)
    document["decisions"] = [
        {
            **entry,
            "evidence_file": f"{decided_in}/{entry['evidence_file']}",
            "decision_file": f"{decided_in}/{entry['decision_file']}",
        }
        for entry in deciding.report["decisions"]
    ]
    if ledger is not None:
        document["ledger"] = ledger
    wide_entry = wide.report["decisions"][0] if wide.report["decisions"] else None
    document["shrink"] = {
        "outcome": outcome,
        "message": message,
        "decided_in": decided_in,
        "property_id": wide.plan.options.property_ids[0],
        "rev": wide.plan.pins.patch_rev,
        "side": PATCH,
        "fixture_origin": FIXTURE_ORIGIN,
        "origin_digest": wide.plan.pins.fixture_digest,
        "fixture_minimal": FIXTURE_MINIMAL if shrink is not None else None,
        "minimal_digest": shrink.minimal_digest if shrink is not None else None,
        "shrink_report": SHRINK_REPORT if shrink is not None else None,
        "stable": shrink.stable if shrink is not None else None,
        "property_calls": [calls for _, calls in shrink.minima] if shrink is not None else [],
        "wide_run_dir": WIDE,
        "wide_decision": None if wide_entry is None else wide_entry["decision"],
        "minimal_run_dir": MINIMAL if decided_in == MINIMAL else None,
    }
    return document
