"""``replay --shrink``: from a wide failing payload to a decision on its minimal fixture.

1. Replay the property on both sides with the wide ``--fixture`` (nothing goes to the
   ledger yet).
2. When the property failed on the patch (some ``assert_fail``), shrink the fixture
   against that test at the patch revision, in the same image with the same seed,
   timeout and pytest options, ``SHRINK_ATTEMPTS`` times from scratch
   (:mod:`orchestrator.services.shrink`).
3. Move the wide replay into ``wide/`` and replay the property with the minimal fixture
   and the shrink report, exactly as ``replay --fixture fixture-minimal.json
   --shrink-report shrink-report.json`` would. That run decides and is recorded.

The run folder is always a whole run folder of the deciding replay (``run-log.json``,
evidence, decisions, ``raw/``, ``summary.json`` with a ``shrink`` section), so
``classify`` and ``report`` read it as any other; beside it, it keeps both fixtures::

    <run>/fixture-origin.json    the --fixture bytes as given
    <run>/shrink-report.json     shrink-report/1 of the shrink against the patch
    <run>/fixture-minimal.json   its minimal fixture
    <run>/wide/                  the replay with the wide fixture (a run folder)

When the property does not fail on the patch (or no longer fails in the shrink's
container), or a candidate with no verdict stops the shrink, nothing is shrunk: the
wide replay stays where it is, decides and is recorded; a stopped shrink makes the
run's exit status 3 (``replay`` then ends with the line naming the candidate).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import files
from orchestrator.core.replay_run import FIXTURE_FILE, PATCH, ReplayOptions, RunPlan
from orchestrator.errors import (
    ExitCode,
    InputError,
    PropertyDoesNotFailError,
    ShrinkStoppedError,
)
from orchestrator.log import get_logger
from orchestrator.model import PROPERTIES_FILE
from orchestrator.services import run_writer
from orchestrator.services.recording import LedgerRequest, complete_and_record
from orchestrator.services.shrink import (
    CandidateProgress,
    ShrinkTestPlan,
    ShrinkTestRequest,
    shrink_test,
)
from orchestrator.services.sides import pytest_arguments

if TYPE_CHECKING:
    from orchestrator.core.backend import Backend
    from orchestrator.core.shrink import ShrinkReport
    from orchestrator.services.replay import ReplayOutcome

log = get_logger(__name__)

SHRINK_ATTEMPTS = 2
WIDE = "wide"
MINIMAL = "minimal"  # the run id's suffix of the replay with the minimal fixture
RUN_LOG = "run-log.json"
SUMMARY = "summary.json"
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


def check_shrink_folder(run_dir: Path) -> None:
    """A run folder (or its ``wide/``) that already holds a run is refused: the shrink
    moves files within it."""
    for folder in (run_dir, run_dir / WIDE):
        if (folder / RUN_LOG).exists() or (folder / SUMMARY).exists():
            raise InputError(f"{folder}: already holds a run; pick another --out")


def keep_origin(plan: RunPlan) -> None:
    """Keep the wide fixture's bytes beside the run, as the shrink's input."""
    assert plan.options.fixture is not None  # --shrink needs --fixture
    shutil.copyfile(plan.options.fixture, plan.run_dir / FIXTURE_ORIGIN)


def failing_on_patch(outcome: ReplayOutcome) -> str | None:
    """The node id of the first property that failed on the patch in some replay (the
    one asked for, or one of its parametrizations), or None. Pure."""
    for item in outcome.properties:
        if item.fails_on_patch:
            return item.property_id
    return None


def shrink_plan(wide: ReplayOutcome, test: str) -> ShrinkTestPlan:
    """Shrink against ``test`` at the patch revision, in the wide run's image, with its
    seed, timeout, pytest options and ``--tests-from`` overlay (the patch side's). Pure."""
    plan, options = wide.plan, wide.plan.options
    tests = None if plan.overlay is None else plan.overlay.side(PATCH)
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
        tests_from=None if tests is None else tests.rev,
    )
    return ShrinkTestPlan(
        request=request,
        repo=options.repo,
        rev=plan.pins.patch_rev,
        image_id=plan.pins.image_id,
        pytest_args=pytest_arguments(plan.pytest_args, (test,), seed=options.seed),
        tests=tests,
    )


def shrink_phase(
    wide: ReplayOutcome,
    *,
    backend: Backend,
    ledger: LedgerRequest | None,
    replay: Callable[[ReplayOptions, str], ReplayOutcome],
    progress: CandidateProgress | None = None,
) -> ShrinkingReplay:
    """After the wide replay: shrink against the patch, then ``replay`` with the minimal
    fixture (see the module). A candidate that stopped the shrink gives the outcome
    ``stopped`` (the wide replay decides; the summary's exit status is 3, and the message
    is the one line that names the candidate)."""
    run_dir, run_id = wide.plan.run_dir, wide.plan.run_id
    # The wide replay is whole, the run is not: marked until it is decided and recorded.
    run_writer.mark_incomplete(run_dir, "shrinking: this run has not finished")
    test = failing_on_patch(wide)
    if test is None:
        asked = wide.plan.options.property_ids[0]
        message = f"{asked} did not fail on the patch: nothing to shrink"
        return _decided_by_wide(run_dir, wide, ledger, NOT_FAILING, message, test=None)

    plan = shrink_plan(wide, test)
    log.info("replay.shrinking", test=plan.request.test, rev=plan.rev, run_id=run_id)
    try:
        shrunk = shrink_test(
            plan,
            files.read_json(str(run_dir / FIXTURE_ORIGIN)),
            backend=backend,
            run_id=f"{run_id}-shrink",
            progress=progress,
        )
    except PropertyDoesNotFailError as error:
        return _decided_by_wide(run_dir, wide, ledger, NOT_REPRODUCED, str(error), test=test)
    except ShrinkStoppedError as error:
        return _decided_by_wide(run_dir, wide, ledger, STOPPED, str(error), test=test)
    report = shrunk.report
    files.write_json_atomic(run_dir / SHRINK_REPORT, report.to_json())
    files.write_json_atomic(run_dir / FIXTURE_MINIMAL, report.minimal)
    wide = move_run(wide, run_dir / WIDE)

    minimal_options = replace(
        wide.plan.options,
        fixture=run_dir / FIXTURE_MINIMAL,
        shrink_report=run_dir / SHRINK_REPORT,
        out=run_dir,
    )
    minimal = replay(minimal_options, f"{run_id}-{MINIMAL}")
    message = (
        f"shrunk to {report.minimal_digest} ({'stable' if report.stable else 'unstable'}, "
        f"{report.identical_minima}/{report.attempts} identical minima)"
    )
    document = dict(minimal.report)
    document["shrink"] = shrink_section(
        wide, outcome=SHRUNK, message=message, test=test, shrink=report, wide_run_dir=WIDE
    )
    files.write_json_atomic(run_dir / SUMMARY, document)
    return ShrinkingReplay(
        deciding=minimal,
        wide=wide,
        shrink=report,
        outcome=SHRUNK,
        message=message,
        report=document,
    )


def move_run(outcome: ReplayOutcome, dest: Path) -> ReplayOutcome:
    """Move a finished run's own files (not the fixtures beside them) into ``dest``; its
    own copy of the fixture it read (``fixture.json``) goes with it."""
    source = outcome.plan.run_dir
    dest.mkdir(parents=True, exist_ok=True)
    names = [RUN_LOG, SUMMARY, "raw", FIXTURE_FILE, PROPERTIES_FILE]
    for name in names:
        if (source / name).exists():
            (source / name).rename(dest / name)
    report = {**outcome.report, "run_dir": str(dest)}
    files.write_json_atomic(dest / SUMMARY, report)
    return replace(outcome, plan=replace(outcome.plan, run_dir=dest), report=report)


def _decided_by_wide(
    run_dir: Path,
    wide: ReplayOutcome,
    ledger: LedgerRequest | None,
    outcome: str,
    message: str,
    *,
    test: str | None,
) -> ShrinkingReplay:
    """Nothing was shrunk: the wide replay, where it is, decides (and is recorded)."""
    document = dict(wide.report)
    if outcome == STOPPED:
        document["exit_status"] = int(ExitCode.UNDECIDED)
    document["shrink"] = shrink_section(
        wide, outcome=outcome, message=message, test=test, shrink=None, wide_run_dir=None
    )
    # summary.json, the folder complete, then the ledger (services.replay's one order).
    document, _ = complete_and_record(wide.plan, wide.properties, document, ledger)
    log.info("replay.not_shrunk", outcome=outcome, detail=message)
    return ShrinkingReplay(
        deciding=wide, wide=wide, shrink=None, outcome=outcome, message=message, report=document
    )


def shrink_section(
    wide: ReplayOutcome,
    *,
    outcome: str,
    message: str,
    test: str | None,
    shrink: ShrinkReport | None,
    wide_run_dir: str | None,
) -> dict[str, Any]:
    """The ``shrink`` section of a ``replay --shrink`` summary. Pure."""
    wide_decision = wide.properties[0].decision.to_json() if wide.properties else None
    return {
        "outcome": outcome,
        "message": message,
        "property_id": test,  # what was shrunk against (None: nothing failed on the patch)
        "side": PATCH,
        "rev": wide.plan.pins.patch_rev,
        "fixture_origin": FIXTURE_ORIGIN,
        "origin_digest": wide.plan.pins.fixture_digest,
        "fixture_minimal": FIXTURE_MINIMAL if shrink is not None else None,
        "minimal_digest": shrink.minimal_digest if shrink is not None else None,
        "shrink_report": SHRINK_REPORT if shrink is not None else None,
        "stable": shrink.stable if shrink is not None else None,
        "property_calls": [calls for _, calls in shrink.minima] if shrink is not None else [],
        "wide_run_dir": wide_run_dir,
        "wide_decision": wide_decision,
    }
