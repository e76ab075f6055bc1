"""``orchestrator replay``: replay a test command on a base and a patch revision; decide."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import click
import typer

from orchestrator.commands._options import (
    FIXTURE_HELP,
    MAX_JOBS,
    MAX_REPLAYS,
    MAX_SLOTS,
    RUNNER_IMAGE,
    TESTS_FROM_HELP,
    EnvOption,
    LedgerOption,
    OptionalImageOption,
    OptionalTimeoutOption,
    PythonpathOption,
    TestPathOption,
    WritableTreeOption,
)
from orchestrator.commands._output import echo_line
from orchestrator.commands._table import Column, print_table

if TYPE_CHECKING:
    from orchestrator.services.replay_shrink import ShrinkingReplay

ISOLATION_HELP = (
    "side: one container per side runs the N replays, each a fresh pytest process "
    "forked from a driver that imported pytest once (none of the project's modules); "
    "container: one container per replay (slower; nothing shared, not even /tmp)."
)


_COLUMNS = (
    Column(heading="property"),
    Column(heading="base"),
    Column(heading="patch"),
    Column(heading="call deltas"),
    Column(heading="lane"),
    Column(heading="code"),
    Column(heading="reasons"),
)


def replay(
    ctx: typer.Context,
    *,
    repo: Annotated[Path, typer.Option("--repo", help="The git repository to replay.")] = Path("."),
    base: Annotated[
        str, typer.Option("--base", help="Base revision (any git revision; pinned to its SHA).")
    ],
    patch: Annotated[str, typer.Option("--patch", help="Patch revision (pinned to its SHA).")],
    image: OptionalImageOption = None,
    command: Annotated[
        str | None,
        typer.Option(
            "--command",
            help="The test command; with --property its paths give way. Default: the "
            "project's command and test-paths (pyproject.toml), else pytest -q.",
            show_default=False,
        ),
    ] = None,
    property_ids: Annotated[
        list[str] | None,
        typer.Option(
            "--property",
            help="A pytest node id to decide (repeatable). Default: every test the command runs.",
        ),
    ] = None,
    changed: Annotated[
        bool,
        typer.Option(
            "--changed",
            help="Instead of every test the command runs, only those the patch touched: "
            "tests whose oracle differs between base and patch, and every test of a test "
            "module that imports a module the patch changed (read statically; "
            "docs/lanes.md says what that misses). Not with --property.",
        ),
    ] = False,
    tests_from: Annotated[
        str | None,
        typer.Option("--tests-from", metavar="base|patch|REV", help=TESTS_FROM_HELP),
    ] = None,
    test_paths: TestPathOption = None,
    fixture: Annotated[
        Path | None,
        typer.Option("--fixture", help=FIXTURE_HELP),
    ] = None,
    shrink_report: Annotated[
        Path | None,
        typer.Option(
            "--shrink-report",
            help="What `orchestrator shrink --json` printed for --fixture (goes into evidence).",
        ),
    ] = None,
    shrink: Annotated[
        bool,
        typer.Option(
            "--shrink",
            help="When the property fails on the patch, shrink --fixture against it there "
            "(2 attempts, one warm container), then replay it with the minimal fixture and "
            "the shrink report; the run folder keeps both fixtures. Needs one --property.",
        ),
    ] = False,
    origin: Annotated[
        Path | None,
        typer.Option(
            "--origin",
            help="The unshrunk payload the shrink started from, when the shrink report does "
            "not carry it (checked against its origin_digest; stored beside a freeze).",
        ),
    ] = None,
    replays: Annotated[
        int | None,
        typer.Option(
            "--replays",
            min=1,
            max=MAX_REPLAYS,
            help="Replays per side of every property with signal, its screening replays "
            "included (with --replays-all: of every property). Default: the project's "
            "(pyproject.toml), else 5.",
            show_default=False,
        ),
    ] = None,
    screen: Annotated[
        int | None,
        typer.Option(
            "--screen",
            min=1,
            max=MAX_REPLAYS,
            help="Replay every property K times per side first, then only where there is "
            "signal (a replay not assert_pass, call counts that differ between the sides, an "
            "oracle that changed) until it has --replays N (K <= N). Default: 1 when no "
            "--property is named, off when properties are named.",
        ),
    ] = None,
    replays_all: Annotated[
        bool,
        typer.Option("--replays-all", help="No screening: replay every property --replays times."),
    ] = False,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            min=1,
            max=MAX_JOBS,
            help="pytest workers per replay in each side's container, each running whole "
            "test modules (balanced by recorded durations). Default: the engine's CPUs "
            "divided between the sides it runs at once (see --slots), at least 1.",
        ),
    ] = None,
    timeout: OptionalTimeoutOption = None,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed given to every replay as $REPLAY_SEED.")
    ] = 0,
    runner_id: Annotated[
        str | None,
        typer.Option(
            "--runner-id",
            help="Recorded as the evidence's runner_id (default local; with --engine each "
            "engine's URL, after this and @ when given).",
            show_default=False,
        ),
    ] = None,
    engines: Annotated[
        list[str] | None,
        typer.Option(
            "--engine",
            metavar="URL",
            help="A Docker engine to run on (repeatable: a pool; both sides of a property "
            "run on one engine): unix://PATH, tcp://HOST:PORT (TLS from DOCKER_TLS_VERIFY "
            "and DOCKER_CERT_PATH) or ssh://[USER@]HOST. The first pins the image; the "
            "others get it shipped from it when they lack it. Default: DOCKER_HOST or the "
            "local socket.",
        ),
    ] = None,
    slots: Annotated[
        int | None,
        typer.Option(
            "--slots",
            min=1,
            max=MAX_SLOTS,
            help="Sides each engine runs at once (a property takes two). Default: the "
            "engine's CPU count.",
            show_default=False,
        ),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            metavar="I/N",
            help="Replay part I of N of the selected properties (a CI matrix job); join "
            "the N run folders with `orchestrator merge`.",
        ),
    ] = None,
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run-id",
            help="The run's id (default: time and random). A retried CI job that passes the "
            "same id records no second decision for a property in the ledger.",
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Run folder (default .replay/runs/<run-id>/).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the replay-report/1 JSON document.")
    ] = False,
    isolation: Annotated[
        str,
        typer.Option(
            "--isolation", help=ISOLATION_HELP, click_type=click.Choice(["side", "container"])
        ),
    ] = "side",
    env: EnvOption = None,
    pythonpath: PythonpathOption = None,
    writable_tree: WritableTreeOption = False,
    ledger: LedgerOption,
    record: Annotated[
        bool,
        typer.Option(
            "--record/--no-record",
            help="Append every decision to the ledger's event log and queue infra cases "
            "(--no-record: write only the run folder).",
        ),
    ] = True,
    freeze: Annotated[
        bool,
        typer.Option(
            "--freeze",
            help="Also write a flake freeze for each flake_queue_eligible property (needs "
            "--owner and --expires, checked before anything runs; any other decision is "
            "refused and the refusal logged in the ledger).",
        ),
    ] = False,
    owner: Annotated[
        str | None, typer.Option("--owner", help="Who owns the freeze (with --freeze).")
    ] = None,
    expires: Annotated[
        str | None,
        typer.Option(
            "--expires", help="When the freeze expires: ISO-8601 time, or 72h / 3d from now."
        ),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option("--html", help="After the run, write its HTML page here (see `report`)."),
    ] = None,
    junit: Annotated[
        Path | None, typer.Option("--junit", help="After the run, write JUnit XML here.")
    ] = None,
    summary: Annotated[
        Path | None,
        typer.Option(
            "--summary",
            help='After the run, append its Markdown summary here (e.g. "$GITHUB_STEP_SUMMARY").',
        ),
    ] = None,
) -> None:
    """Replay --command on --base and --patch, N times each, in hermetic containers; decide.

    Pins both revisions to full SHAs and the image to its ID, writes run-log.json
    into the run folder before anything runs, replays both sides at once (no
    network, read-only sources, non-root, resource limits), labels every replay
    from facts (assert_pass, assert_fail, timeout, harness_error), decides one lane
    per property and writes evidence-<n>.json, decision-<n>.json and summary.json.

    Without --property, every test is first screened (--screen, once per side), and
    only the tests with signal are replayed until they have --replays; the others are
    decided on their screening replays. --replays-all replays every test --replays times.

    Every decision is appended to the ledger's event log (--no-record: the run
    folder only); infra cases are queued there for `orchestrator infra list`.

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
    from orchestrator.core.durations import parse_expiry
    from orchestrator.core.pool import check_engine_urls
    from orchestrator.core.project_config import replay_settings
    from orchestrator.core.replay_env import check_pythonpath, parse_env
    from orchestrator.core.replay_run import ReplayOptions
    from orchestrator.core.shards import parse_shard
    from orchestrator.errors import InputError, Interrupted, LedgerError, OrchestratorError
    from orchestrator.files import dumps
    from orchestrator.services.engines import open_pool
    from orchestrator.services.project_config import default_image, load_config
    from orchestrator.services.replay import (
        LedgerRequest,
        execute,
        open_ledger_for_run,
        plan_replay,
        run_folder,
        validate_options,
    )
    from orchestrator.services.run_writer import check_run_folder, note_incomplete
    from orchestrator.services.sides import new_run_id

    # The project's own defaults, read at the base revision (never the patch's).
    loaded = load_config(repo, base)
    settings = replay_settings(
        loaded.config,
        command=command,
        image=image,
        replays=replays,
        timeout_s=timeout,
        pythonpath=check_pythonpath(pythonpath) if pythonpath is not None else None,
        env=parse_env(env) if env is not None else None,
    )
    replays = settings.replays
    options = ReplayOptions(
        repo=repo,
        base=base,
        patch=patch,
        image=settings.image or RUNNER_IMAGE,
        command=settings.command,
        property_ids=tuple(property_ids or ()),
        fixture=fixture,
        shrink_report=shrink_report,
        origin=origin,
        replays=settings.replays,
        timeout_s=settings.timeout_s,
        seed=seed,
        runner_id=runner_id if runner_id is not None else "local",
        out=out,
        isolation=isolation,
        screen=screen,
        replays_all=replays_all,
        jobs=jobs,
        engines=check_engine_urls(engines or ()),
        slots=slots,
        shard=parse_shard(shard) if shard is not None else None,
        run_id=run_id,
        env=settings.env,
        pythonpath=settings.pythonpath,
        writable_tree=writable_tree,
        tests_from=tests_from,
        test_paths=tuple(test_paths or ()),
        changed=changed,
    )
    now = datetime.now(UTC)
    # Every usage mistake is found here, before an engine is asked for anything.
    validate_options(options)
    if (owner or expires) and not freeze:
        raise InputError("--owner and --expires go with --freeze")
    if freeze and not record:
        raise InputError("--freeze writes to the ledger: it cannot go with --no-record")
    missing = [
        name
        for name, value in (("--owner", owner), ("--expires", expires))
        if freeze and not (value or "").strip()
    ]
    if missing:
        raise InputError(f"--freeze needs {' and '.join(missing)}")
    if shrink:
        from orchestrator.services.replay_shrink import validate_shrink_options

        validate_shrink_options(options)
    if settings.image is None:  # after every usage check: this asks the engine
        first_engine = options.engines[0] if options.engines else None
        options = replace(
            options, image=default_image(os.environ, loaded.project, url=first_engine)
        )
    expires_at = parse_expiry(expires, now) if freeze and expires else None
    ledger_request = None
    if record:
        ledger_request = LedgerRequest(
            url=ledger,
            now=now,
            freeze=freeze,
            owner=owner,
            expires_at=expires_at,
        )
    if html or junit or summary:  # a report path that cannot be written: exit 2 before running
        from orchestrator.commands.report import check_replay_targets

        check_replay_targets(html=html, junit=junit, summary=summary)
    # The run folder and the ledger are checked before the engine is asked for anything.
    run_id = options.run_id or new_run_id(now.timestamp())
    run_dir = run_folder(options, run_id)
    check_run_folder(run_dir)
    json_logs = bool(getattr(ctx.obj, "json_logs", False))
    logger = log.get_logger("orchestrator.replay")
    if shrink and (options.shard is not None or len(options.engines) > 1):
        raise InputError("--shrink runs on one engine: not with --shard or several --engine")
    with contextlib.ExitStack() as resources:
        pending = None
        if ledger_request is not None:  # opened while the run plans, checked before it runs
            pending = open_ledger_for_run(ledger_request.url)
            resources.callback(pending.close)
        try:
            if shrink:
                from orchestrator.adapters.docker import connect

                client = connect(os.environ, url=options.engines[0] if options.engines else None)
                resources.callback(client.close)
                if pending is not None and ledger_request is not None:
                    ledger_request = replace(ledger_request, store=pending.result())
                shrunk = _replay_and_shrink(
                    options=options,
                    client=client,
                    now=now,
                    run_id=run_id,
                    json_logs=json_logs,
                    ledger_request=ledger_request,
                    as_json=as_json,
                    logger=logger,
                )
            else:
                pool = open_pool(
                    options.engines, os.environ, runner_id=runner_id, slots=slots, durations=None
                )
                resources.callback(pool.close)
                pool.image_ref = options.image
                plan = plan_replay(
                    options,
                    now=now,
                    pool=pool,
                    run_id=run_id,
                    before_containers=pending.result if pending is not None else None,
                )
                if pending is not None and ledger_request is not None:
                    ledger_request = replace(ledger_request, store=pending.result())
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
                with _progress(json_logs, replays, logger) as progress:
                    outcome = execute(plan, progress=progress, ledger=ledger_request, pool=pool)
        except (KeyboardInterrupt, Interrupted):
            raise Interrupted(interrupted_detail(run_dir)) from None
        except OrchestratorError as error:
            note_incomplete(run_dir, f"failed: {error}")
            raise
    if shrink:
        from orchestrator.errors import ShrinkStoppedError
        from orchestrator.services.replay_shrink import STOPPED

        if html or junit or summary:
            from orchestrator.commands.report import write_after_replay

            shrunk_dir = Path(shrunk.report["run_dir"])
            write_after_replay(shrunk_dir, html=html, junit=junit, summary=summary, err=as_json)
        _raise_if_not_recorded(shrunk.report.get("ledger"))
        if shrunk.outcome == STOPPED:  # the line that names the candidate, exit 3
            raise ShrinkStoppedError(shrunk.message)
        if shrunk.exit_status:
            raise typer.Exit(shrunk.exit_status)
        return
    if as_json:
        typer.echo(dumps(outcome.report))
    else:
        _print_tests(outcome.plan)
        if not outcome.plan.nothing_selected:
            _print_table(outcome)
            _print_screening(outcome.report.get("screening"))
        _print_ledger(outcome.report.get("ledger"))
        typer.echo(f"run folder: {plan.run_dir}")
    _hint_writable_tree(outcome, logger)
    if html or junit or summary:  # other views of the run folder just written
        from orchestrator.commands.report import write_after_replay

        write_after_replay(plan.run_dir, html=html, junit=junit, summary=summary, err=as_json)
    logger.info("replay.done", run_id=plan.run_id, exit_status=outcome.exit_status)
    if outcome.recording_error is not None:
        raise LedgerError(f"not recorded: {outcome.recording_error}")  # the report is whole
    if outcome.exit_status:
        raise typer.Exit(outcome.exit_status)


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


def _raise_if_not_recorded(ledger: Any) -> None:
    """A run that was decided but not recorded ends in one line, exit 3 (its report is
    whole: printed, and in summary.json)."""
    from orchestrator.errors import LedgerError

    if ledger and ledger.get("recorded") is False:
        raise LedgerError(f"not recorded: {ledger.get('error')}")


def _replay_and_shrink(
    *,
    options: Any,
    client: Any,
    now: datetime,
    run_id: str,
    json_logs: bool,
    ledger_request: Any,
    as_json: bool,
    logger: Any,
) -> ShrinkingReplay:
    """``replay --shrink``: print the deciding run like a replay, then how the shrink went."""
    from orchestrator.files import dumps
    from orchestrator.services.replay_shrink import STOPPED, replay_and_shrink

    def shrink_progress(attempt: int, number: int, size: Any, verdict: str) -> None:
        logger.debug(
            "shrink.candidate", attempt=attempt, candidate=number, size=size, verdict=verdict
        )

    with _progress(json_logs, options.replays, logger) as progress:
        result = replay_and_shrink(
            options,
            client=client,
            now=now,
            progress=progress,
            shrink_progress=shrink_progress,
            ledger=ledger_request,
            run_id=run_id,
        )
    if as_json:
        typer.echo(dumps(result.report))
    else:
        _print_table(result.deciding)
        _print_ledger(result.report.get("ledger"))
        if result.outcome != STOPPED:  # a stopped shrink's line ends the run (stderr)
            echo_line(f"shrink: {result.outcome}: {result.message}")
        typer.echo(f"run folder: {result.report['run_dir']}")
    logger.info("replay.done", run_id=result.deciding.run_id, exit_status=result.exit_status)
    return result


@contextmanager
def _progress(
    json_logs: bool, total: int, logger: Any
) -> Iterator[Callable[[str, int, int], None]]:
    """A bar per side on a terminal; a structlog line per finished replay otherwise."""
    if json_logs or not sys.stderr.isatty():

        def report(side: str, done: int, of: int) -> None:
            logger.info("replay.progress", side=side, done=done, total=of)

        yield report
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description:>6}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bars:
        tasks = {side: bars.add_task(side, total=total) for side in ("base", "patch")}

        def advance(side: str, done: int, of: int) -> None:
            if side not in tasks:
                tasks[side] = bars.add_task(side, total=of)
            bars.update(tasks[side], completed=done, total=of)

        yield advance


def _print_tests(plan: Any) -> None:
    """Above the table: what --changed selected, and whose tests were the oracle."""
    if plan.selection is not None:
        echo_line(f"changed: {plan.selection.summary()}")
    overlay = plan.overlay
    if overlay is not None:
        typer.echo(
            f"tests from {overlay.ref} ({overlay.rev[:12]}): the oracle on both sides, "
            f"{overlay.summary()}"
        )


def _print_table(outcome: Any) -> None:
    from orchestrator.core.replay_run import (
        call_deltas,
        label_summary,
        not_run_on_patch,
        skipped_line,
        table_reasons,
    )

    print_table(
        _COLUMNS,
        (
            (
                str(item.evidence.property_id),
                label_summary(item.evidence.base),
                label_summary(item.evidence.patch),
                "; ".join(call_deltas(item.evidence.base, item.evidence.patch)) or "-",
                item.decision.lane.value,
                item.decision.code,
                table_reasons(item.decision.code, item.decision.reasons),
            )
            for item in outcome.properties
        ),
    )
    skipped = skipped_line(
        sum(not_run_on_patch(item.evidence.patch) for item in outcome.properties),
        len(outcome.properties),
    )
    if skipped is not None:
        typer.echo(skipped)
    # Row 2 blocks without comparing: say what moved, and for a new test what to run next.
    for item in outcome.properties:
        if item.decision.code == "oracle_changed":
            reasons = "; ".join(item.decision.reasons)
            echo_line(f"oracle changed: {item.evidence.property_id}: {reasons}")


def _hint_writable_tree(outcome: Any, logger: Any) -> None:
    """A replay that wrote into its read-only tree names the flag that allows it."""
    from orchestrator.core.labels import READ_ONLY_TREE, WRITABLE_TREE_HINT

    touched = sorted(
        {
            str(item.evidence.property_id)
            for item in outcome.properties
            for replay in (*item.evidence.base, *item.evidence.patch)
            if replay.reason == READ_ONLY_TREE
        }
    )
    if touched:
        logger.warning(
            "replay.read_only_tree",
            hint=f"tests wrote into their read-only tree: {WRITABLE_TREE_HINT}",
            properties=touched,
        )


def _print_screening(summary: Any) -> None:
    from orchestrator.core.replay_run import screening_line

    if summary and summary.get("policy") == "screen":
        echo_line(screening_line(summary))


def _print_ledger(ledger: Any) -> None:
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
