"""``orchestrator replay``: replay a test command on a base and a patch revision; decide."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from orchestrator.commands._grouped import grouped
from orchestrator.commands._option_groups import (
    FixtureAndShrink,
    Limits,
    Oracle,
    Outputs,
    Recording,
    Scheduling,
    Selection,
)
from orchestrator.commands._output import echo_line
from orchestrator.commands._table import Column, print_long_table, print_table

if TYPE_CHECKING:
    from collections.abc import Mapping
    from contextlib import AbstractContextManager

    from orchestrator.commands._option_groups import ReplayArguments
    from orchestrator.commands._progress import SideCallback
    from orchestrator.core.replay_run import RunPlan
    from orchestrator.services.replay import ReplayOutcome, ReplayRequest, ReplayResult
    from orchestrator.services.replay_shrink import ShrinkingReplay

_COLUMNS = (
    Column(heading="property"),
    Column(heading="base"),
    Column(heading="patch"),
    Column(heading="call deltas"),
    Column(heading="lane"),
    Column(heading="code"),
    Column(heading="reasons"),
)


@grouped
def replay(
    ctx: typer.Context,
    *,
    selection: Selection,
    oracle: Oracle,
    fixture: FixtureAndShrink,
    scheduling: Scheduling,
    limits: Limits,
    recording: Recording,
    outputs: Outputs,
) -> None:
    """Replay --command on --base and --patch, N times each, in hermetic containers; decide.

    Pins both revisions to full SHAs and the image to its ID, writes run-log.json
    into the run folder before anything runs, replays both sides at once (no
    network, read-only sources, non-root, resource limits), labels every replay
    from facts (assert_pass, assert_fail, timeout, harness_error), decides one lane
    per property and writes its evidence and decision into the run folder's
    properties.jsonl.gz, and summary.json. The table lists the properties that need a
    look (every lane but no_freeze), blocking first, and counts the others in one line;
    --all lists every property, --json prints every one.

    Without --property, every test is first screened (--screen, once per side), and
    only the tests with signal are replayed until they have --replays; the others are
    decided on their screening replays. --replays-all replays every test --replays times.

    A blocking verdict that rests on a side whose replays are mixed (a new instability,
    a call count that varies) blocks only when an exact test shows it at
    --false-block-rate (per run, default 1 %); until then its test is replayed more on
    both sides, in rounds up to --evidence-cap, and at the cap it is set aside as
    weak_evidence, not blocking, with one line saying what was not shown.

    Every decision is appended to the ledger's event log (--no-record: the run
    folder only); infra cases are queued there for `orchestrator infra list`.

    A side that screened cleanly is stored under a digest of everything that decides
    its evidence (in the ledger, and in --evidence-cache DIR); a later run whose base
    side has that key reuses it and screens only the patch, then replays the tests with
    signal on both sides fresh, as always (--no-reuse: neither).

    A property whose own test code (its oracle) differs between the sides is not
    compared (reject_run). --tests-from lays one revision's test files over both
    trees, so both sides are judged by one oracle: --tests-from patch asks whether a
    pull request's new test fails on base. --changed replays only the tests the
    patch touched (docs/lanes.md, section 8).

    Beyond one machine: --engine URL (repeatable) spreads the properties over a pool
    of Docker engines, longest first, both sides of a property on one engine; an
    engine that stops answering gives its unfinished properties to the others, once.
    --shard I/N replays one part of the selection in a CI matrix job; `orchestrator
    merge` joins the parts into one report and one exit status.

    The run folder holds an INCOMPLETE file until the run has finished; the ledger
    is opened before anything runs and written after summary.json.

    Defaults come from [tool.orchestrator] in the repository's pyproject.toml, read at
    the base revision (never the patch's: a patch cannot change how it is judged):
    command and test-paths, image, replays, timeout, pythonpath, env; an option given
    here wins. An unknown key or a wrong type is exit 2. Without --image or image =,
    the newest image `orchestrator image build` made for the project is used, else
    orchestrator-runner:latest. --repo defaults to the current folder.

    Exit status: the worst lane's (0 non-blocking, 1 blocking, 3 undecided or
    infrastructure failure), 2 for bad input (found before any container starts),
    3 when the run was decided but the ledger could not record it (its report is
    whole), 130 on SIGINT or SIGTERM (the run folder is left marked incomplete).
    """
    from orchestrator import log
    from orchestrator.commands._option_groups import ReplayArguments
    from orchestrator.errors import Interrupted, OrchestratorError
    from orchestrator.services.project_config import load_config
    from orchestrator.services.replay import run_replay
    from orchestrator.services.run_writer import note_incomplete

    # The project's own defaults, read at the base revision (never the patch's).
    loaded = load_config(selection.repo, selection.base)
    arguments = ReplayArguments(
        selection=selection, oracle=oracle, fixture=fixture, scheduling=scheduling,
        limits=limits, recording=recording, outputs=outputs,
    ).with_project(loaded.config)  # fmt: skip
    arguments.validate()
    request = _request(arguments, loaded.project, base_sha=loaded.rev)
    _long_lived_heap()
    logger = log.get_logger("orchestrator.replay")
    json_logs = bool(getattr(ctx.obj, "json_logs", False))
    try:
        result = run_replay(
            request,
            watch=lambda: _progress(json_logs, logger),
            shrink_progress=lambda attempt, number, size, verdict: logger.debug(
                "shrink.candidate", attempt=attempt, candidate=number, size=size, verdict=verdict
            ),
            on_planned=lambda plan: _log_planned(plan, logger),
        )
    except (KeyboardInterrupt, Interrupted):
        raise Interrupted(interrupted_detail(request.run_dir)) from None
    except OrchestratorError as error:
        note_incomplete(request.run_dir, f"failed: {error}")
        raise
    _finish(result, arguments.outputs, logger)


def _long_lived_heap() -> None:
    """A whole suite's run holds millions of objects for its whole length (each test's
    labels, its decision); every full pass of the cyclic collector walks all of them, and
    with the default thresholds it makes one for every few thousand objects the run
    makes: a quarter of the host's work at 100,000 tests. Full passes are made a hundred
    times rarer (the young generations are collected as before)."""
    import gc

    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 1000)


def _request(
    arguments: ReplayArguments, project: str | None, *, base_sha: str | None
) -> ReplayRequest:
    """The run to make of checked arguments: its id, its image, its ledger; the run
    folder is checked before the engine is asked for anything. The default image is the
    project's, built at the base revision ``base_sha`` or an ancestor of it."""
    import os

    from orchestrator.commands._options import RUNNER_IMAGE
    from orchestrator.services.project_config import default_image
    from orchestrator.services.recording import LedgerRequest
    from orchestrator.services.replay import ReplayRequest
    from orchestrator.services.run_writer import check_run_folder
    from orchestrator.services.sides import new_run_id

    now = datetime.now(UTC)
    recording = arguments.recording
    ledger = None
    if recording.record:
        ledger = LedgerRequest(
            url=recording.ledger,
            now=now,
            freeze=recording.freeze,
            owner=recording.owner,
            expires_at=recording.expires_at(now),
        )
    options = arguments.replay_options(arguments.limits.image or RUNNER_IMAGE)
    request = ReplayRequest(
        options=options,
        now=now,
        run_id=options.run_id or new_run_id(now.timestamp()),
        runner_id=arguments.scheduling.runner_id,
        ledger=ledger,
        shrink=arguments.fixture.shrink,
    )
    check_run_folder(request.run_dir)
    if arguments.limits.image is None:  # after every usage check: this asks the engine
        first_engine = options.engines[0] if options.engines else None
        image = default_image(
            os.environ,
            project,
            url=first_engine,
            repo=arguments.selection.repo,
            base=base_sha,
        )
        request = replace(request, options=replace(options, image=image))
    return request


def _finish(result: ReplayResult, outputs: Outputs, logger: Any) -> None:
    """Print the run, write its other views, and end with its exit status."""
    from orchestrator import prompt_exit
    from orchestrator.errors import LedgerError, ShrinkStoppedError

    _print_result(result, outputs)
    _hint_writable_tree(result.deciding, logger)
    if outputs.views:  # other views of the run folder just written
        from orchestrator.commands.report import write_after_replay

        write_after_replay(
            result.run_dir, html=outputs.html, junit=outputs.junit, summary=outputs.summary,
            err=outputs.as_json,
        )  # fmt: skip
    logger.info("replay.done", run_id=result.deciding.run_id, exit_status=result.exit_status)
    prompt_exit.allow()  # everything is written: the process may skip the teardown
    if result.recording_error is not None:
        raise LedgerError(f"not recorded: {result.recording_error}")  # the report is whole
    if result.shrink is not None and _shrink_stopped(result.shrink):
        raise ShrinkStoppedError(result.shrink.message)  # the line that names the candidate
    if result.exit_status:
        raise typer.Exit(result.exit_status)


def _shrink_stopped(shrunk: ShrinkingReplay) -> bool:
    """Whether the run's shrink phase stopped at a candidate with no verdict (its module,
    with the shrinker behind it, is imported only for a run that shrank)."""
    from orchestrator.services.replay_shrink import STOPPED

    return bool(shrunk.outcome == STOPPED)


def _log_planned(plan: RunPlan, logger: Any) -> None:
    logger.info(
        "replay.planned",
        run_id=plan.run_id,
        run_dir=str(plan.run_dir),
        base_rev=plan.pins.base_rev,
        patch_rev=plan.pins.patch_rev,
        image_id=plan.pins.image_id,
        screening=plan.screen_policy.to_json(),
        jobs=plan.scheduling.jobs,
    )


def _print_result(result: ReplayResult, outputs: Outputs) -> None:
    """The report (``--json``: every property's entry, read back from the run's store),
    or the table and the lines around it."""
    from orchestrator.commands._output import echo_report

    if outputs.as_json:
        echo_report(result.report, result.run_dir)
        return
    plan = result.deciding.plan
    _print_tests(plan)
    if not plan.nothing_selected:
        _print_table(result.deciding, result.run_dir, every_row=outputs.all_rows)
        _print_screening(result.report.get("screening"))
        _print_evidence(result.report.get("evidence"))
    _print_ledger(result.report.get("ledger"))
    shrunk = result.shrink
    if shrunk is not None and not _shrink_stopped(shrunk):  # a stopped one's line ends the run
        echo_line(f"shrink: {shrunk.outcome}: {shrunk.message}")
    typer.echo(f"run folder: {result.run_dir}")


def interrupted_detail(run_dir: Path) -> str:
    """What an interruption left, in the words of its one line."""
    from orchestrator import interrupts
    from orchestrator.services.run_writer import is_incomplete, note_incomplete

    name = interrupts.signal_name(interrupts.received()) if interrupts.received() else "signal"
    if note_incomplete(run_dir, f"interrupted ({name}); nothing was recorded"):
        return f"containers and sources removed; {run_dir} is marked incomplete, nothing recorded"
    if (run_dir / "summary.json").is_file() and not is_incomplete(run_dir):
        return f"the run had already finished: {run_dir}"
    return "no run folder written, nothing left behind"


def _progress(json_logs: bool, logger: Any) -> AbstractContextManager[SideCallback]:
    from orchestrator.commands._progress import live_progress

    return live_progress(json_logs, logger, "replay.progress")


def _print_tests(plan: RunPlan) -> None:
    """Above the table: what --changed selected, and whose tests were the oracle."""
    if plan.selection is not None:
        echo_line(f"changed: {plan.selection.summary()}")
    overlay = plan.overlay
    if overlay is not None:
        typer.echo(
            f"tests from {overlay.ref} ({overlay.rev[:12]}): the oracle on both sides, "
            f"{overlay.summary()}"
        )


def _print_table(outcome: ReplayOutcome, run_dir: Path, *, every_row: bool) -> None:
    """The properties that need a look (every lane but no_freeze), blocking first, and one
    line counting the others; with ``every_row`` every property, in the run's order (read
    back from the run's store)."""
    from orchestrator.core.replay_run import not_listed_line, skipped_line, table_row
    from orchestrator.core.reports.view import lane_kind, lane_rank

    properties = outcome.properties
    if every_row:
        from orchestrator.services.property_store import StoreRead

        stored = StoreRead(run_dir)
        print_long_table(
            _COLUMNS, lambda: (table_row(record["entry"]) for record in stored.records())
        )
    else:
        listed = sorted(
            (item for item in properties if item.entry is not None),
            key=lambda item: (lane_kind(item.decision.lane).rank, lane_rank(item.decision.lane)),
        )
        if listed:
            print_table(_COLUMNS, [table_row(item.entry) for item in listed if item.entry])
        line = not_listed_line(properties)
        if line is not None:
            echo_line(line)
    skipped = skipped_line(sum(item.skipped_on_patch for item in properties), len(properties))
    if skipped is not None:
        typer.echo(skipped)
    overlay = outcome.plan.overlay
    removed = None if overlay is None else overlay.removed_tests_line()
    if removed is not None:  # no lane says it: no side ran them
        echo_line(removed)
    # Row 2 blocks without comparing: say what moved, and for a new test what to run next.
    for item in properties:
        if item.decision.code == "oracle_changed":
            reasons = "; ".join(item.decision.reasons)
            echo_line(f"oracle changed: {item.property_id}: {reasons}")


def _hint_writable_tree(outcome: ReplayOutcome, logger: Any) -> None:
    """A replay that wrote into its read-only tree names the flag that allows it."""
    from orchestrator.core.labels import WRITABLE_TREE_HINT

    touched = sorted({item.property_id for item in outcome.properties if item.read_only_tree})
    if touched:
        logger.warning(
            "replay.read_only_tree",
            hint=f"tests wrote into their read-only tree: {WRITABLE_TREE_HINT}",
            properties=touched,
        )


def _print_screening(summary: Mapping[str, Any] | None) -> None:
    from orchestrator.core.replay_run import screening_line

    if summary and summary.get("policy") == "screen":
        echo_line(screening_line(summary))


def _print_evidence(summary: Mapping[str, Any] | None) -> None:
    from orchestrator.core.evidence_rounds import evidence_line

    line = evidence_line(summary) if summary else None
    if line is not None:
        echo_line(line)


def _print_ledger(ledger: Mapping[str, Any] | None) -> None:
    if not ledger:
        return
    for entry in ledger["entries"]:
        if entry.get("freeze_id") is not None:
            echo_line(f"freeze {entry['freeze_id']} written for {entry['property_id']}")
        elif entry.get("freeze_refusals"):
            refused = ", ".join(entry["freeze_refusals"])
            echo_line(f"no freeze for {entry['property_id']}: {refused}")
        elif entry.get("infra_queue_id") is not None:
            echo_line(f"infra queue {entry['infra_queue_id']}: {entry['property_id']}")
    recorded = "" if ledger.get("recorded", True) else " (not recorded)"
    typer.echo(f"ledger: {ledger['url']}{recorded}")


def register(app: typer.Typer) -> None:
    app.command("replay")(replay)
