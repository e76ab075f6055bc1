"""Options several commands share: one declaration, one help text, one rule each.

A command declares ``ledger: LedgerOption``, ``timeout: TimeoutOption = DEFAULT_TIMEOUT_S``
or ``image: ImageOption`` and gets the same flag, help, environment variable and
validation as every other command.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import click
import typer

from orchestrator.adapters.ledger_location import ENV_VAR, default_ledger_url
from orchestrator.core.bounds import (
    MAX_INPUT_BYTES,
    MAX_JOBS,
    MAX_REPLAYS,
    MAX_SHRINK_ATTEMPTS,
    MAX_SLOTS,
    MAX_TIMEOUT_S,
    count_problem,
    describe_bytes,
    screen_problem,
)
from orchestrator.errors import InputError

if TYPE_CHECKING:
    from orchestrator.core.replay_run import ReplayOptions
    from orchestrator.core.shards import Shard

__all__ = ["MAX_JOBS", "MAX_REPLAYS", "MAX_SHRINK_ATTEMPTS", "MAX_SLOTS"]

# --fixture and every other JSON file a command reads ----------------------------------

INPUT_FILE_RULE = f"a regular file, not a link, at most {describe_bytes(MAX_INPUT_BYTES)}"
FIXTURE_HELP = f"JSON fixture, mounted read-only, as $REPLAY_FIXTURE ({INPUT_FILE_RULE})."

# --ledger -------------------------------------------------------------------------------

LEDGER_HELP = "The ledger: a SQLAlchemy URL, sqlite:///PATH or postgresql+psycopg://USER@HOST/DB."


def _default_ledger() -> str:
    return default_ledger_url(Path.cwd())


def _ledger_or_default(value: str) -> str:
    # `--ledger ""` (say, an unset CI secret spelled out) means the default, as an empty
    # $ORCHESTRATOR_LEDGER does.
    return value or _default_ledger()


LedgerOption = Annotated[
    str,
    typer.Option(
        "--ledger",
        metavar="URL",
        envvar=ENV_VAR,
        show_envvar=True,
        default_factory=_default_ledger,
        callback=_ledger_or_default,
        show_default=".replay/ledger.db in the current folder",
        help=LEDGER_HELP,
    ),
]
"""The ledger's URL: ``--ledger``, else ``$ORCHESTRATOR_LEDGER``, else the embedded file."""

# --timeout ------------------------------------------------------------------------------

DEFAULT_TIMEOUT_S = 60.0
MIN_TIMEOUT_S = 0.1


def seconds(value: Any) -> float:
    """A number of seconds from ``MIN_TIMEOUT_S`` to ``MAX_TIMEOUT_S`` (nan, inf and
    anything past a day are refused)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or not MIN_TIMEOUT_S <= number <= MAX_TIMEOUT_S:
        raise typer.BadParameter(
            f"{value!r} is not a number of seconds (from {MIN_TIMEOUT_S:g} to {MAX_TIMEOUT_S:g})"
        )
    return number


_TIMEOUT = typer.Option(
    "--timeout",
    metavar="SECONDS",
    parser=seconds,
    help="Seconds one replay (a budget sample is one) may take; past it the replay is "
    f"killed and labelled timeout. From {MIN_TIMEOUT_S:g} to {MAX_TIMEOUT_S:g} (a day).",
)
TimeoutOption = Annotated[float, _TIMEOUT]
OptionalTimeoutOption = Annotated[float | None, _TIMEOUT]
"""``--timeout`` for a command whose default comes from the project's configuration."""

# --image --------------------------------------------------------------------------------

RUNNER_IMAGE = "orchestrator-runner:latest"  # == adapters.docker.RUNNER_IMAGE (kept light)


def image_reference(value: Any) -> str:
    """An image reference or ID the engine could read (a malformed one is exit 2 here)."""
    from orchestrator.core.image_reference import reference_problem

    text = str(value)
    problem = reference_problem(text)
    if problem is not None:
        raise typer.BadParameter(problem)
    return text


_IMAGE = typer.Option(
    "--image",
    metavar="IMAGE",
    parser=image_reference,
    help="Runner image, a tag or an ID; pinned to its image ID, never pulled.",
)
ImageOption = Annotated[str, _IMAGE]
OptionalImageOption = Annotated[str | None, _IMAGE]
"""``--image`` for a command with its own default when the option is left out."""

# --env, --pythonpath, --writable-tree: the container's environment ------------------------

EnvOption = Annotated[
    list[str] | None,
    typer.Option(
        "--env",
        metavar="KEY=VALUE",
        help="A variable for every replay (repeatable), recorded in the run log and the "
        "evidence; TZ is unset unless given here.",
    ),
]
PythonpathOption = Annotated[
    list[str] | None,
    typer.Option(
        "--pythonpath",
        metavar="DIR",
        help="A folder of the tree to import from (repeatable), before pytest's pythonpath "
        "and a src/ layout, which are found on their own.",
    ),
]
WritableTreeOption = Annotated[
    bool,
    typer.Option(
        "--writable-tree",
        help="Give each side a private writable copy of its tree, fresh for every replay "
        "(default: read-only; a write into it is harness_error read_only_tree).",
    ),
]

# --tests-from, --test-path ---------------------------------------------------------------

TESTS_FROM_HELP = (
    "Judge both sides by one revision's test files: they are laid over every exported tree "
    "before anything runs (added, modified and deleted test files all follow it). Test files: "
    "everything under each property's test folder (tests/; without --property, the folders "
    "the command names, or, when it names none, the folder of every test module), every "
    "conftest.py, test_*.py and *_test.py, and --test-path."
)

TestPathOption = Annotated[
    list[str] | None,
    typer.Option(
        "--test-path",
        metavar="PATH",
        help="With --tests-from: one more test file or folder to take from that revision "
        "(test data outside the test folder; repeatable).",
    ),
]

# --fixture ------------------------------------------------------------------------------

FixtureOption = Annotated[Path | None, typer.Option("--fixture", help=FIXTURE_HELP)]

# replay's own options -------------------------------------------------------------------
# Declared here, beside the groups that check them, so the command reads as a list.

ISOLATIONS = ("side", "container")  # == services.sides.ISOLATIONS (kept light)
ISOLATION_HELP = (
    "side: one container per side runs the N replays, each a fresh pytest process "
    "forked from a driver that imported pytest once (none of the project's modules); "
    "container: one container per replay (slower; nothing shared, not even /tmp)."
)

RepoOption = Annotated[Path, typer.Option("--repo", help="The git repository to replay.")]
BaseOption = Annotated[
    str, typer.Option("--base", help="Base revision (any git revision; pinned to its SHA).")
]
PatchOption = Annotated[str, typer.Option("--patch", help="Patch revision (pinned to its SHA).")]
CommandOption = Annotated[
    str | None,
    typer.Option(
        "--command",
        help="The test command; with --property its paths give way. Default: the "
        "project's command and test-paths (pyproject.toml), else pytest -q.",
        show_default=False,
    ),
]
PropertiesOption = Annotated[
    list[str] | None,
    typer.Option(
        "--property",
        help="A pytest node id to decide (repeatable). Default: every test the command runs.",
    ),
]
ChangedOption = Annotated[
    bool,
    typer.Option(
        "--changed",
        help="Instead of every test the command runs, only those the patch touched: "
        "tests whose oracle differs between base and patch, and every test of a test "
        "module that imports a module the patch changed (read statically; "
        "docs/lanes.md says what that misses). Not with --property.",
    ),
]
TestsFromOption = Annotated[
    str | None, typer.Option("--tests-from", metavar="base|patch|REV", help=TESTS_FROM_HELP)
]
ShrinkReportOption = Annotated[
    Path | None,
    typer.Option(
        "--shrink-report",
        help="What `orchestrator shrink --json` printed for --fixture (goes into evidence).",
    ),
]
ShrinkOption = Annotated[
    bool,
    typer.Option(
        "--shrink",
        help="When the property fails on the patch, shrink --fixture against it there "
        "(2 attempts, one warm container), then replay it with the minimal fixture and "
        "the shrink report; the run folder keeps both fixtures. Needs one --property.",
    ),
]
OriginOption = Annotated[
    Path | None,
    typer.Option(
        "--origin",
        help="The unshrunk payload the shrink started from, when the shrink report does "
        "not carry it (checked against its origin_digest; stored beside a freeze).",
    ),
]
ReplaysOption = Annotated[
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
]
ScreenOption = Annotated[
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
]
ReplaysAllOption = Annotated[
    bool, typer.Option("--replays-all", help="No screening: replay every property --replays times.")
]
JobsOption = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        min=1,
        max=MAX_JOBS,
        help="pytest workers per replay in each side's container, each running whole "
        "test modules (balanced by recorded durations). Default: the engine's CPUs "
        "divided between the sides it runs at once (see --slots), at least 1.",
    ),
]
SeedOption = Annotated[
    int, typer.Option("--seed", help="Seed given to every replay as $REPLAY_SEED.")
]
RunnerIdOption = Annotated[
    str | None,
    typer.Option(
        "--runner-id",
        help="Recorded as the evidence's runner_id (default local; with --engine each "
        "engine's URL, after this and @ when given).",
        show_default=False,
    ),
]
EnginesOption = Annotated[
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
]
SlotsOption = Annotated[
    int | None,
    typer.Option(
        "--slots",
        min=1,
        max=MAX_SLOTS,
        help="Sides each engine runs at once (a property takes two). Default: the "
        "engine's CPU count.",
        show_default=False,
    ),
]
ShardOption = Annotated[
    str | None,
    typer.Option(
        "--shard",
        metavar="I/N",
        help="Replay part I of N of the selected properties (a CI matrix job); join "
        "the N run folders with `orchestrator merge`.",
    ),
]
RunIdOption = Annotated[
    str | None,
    typer.Option(
        "--run-id",
        help="The run's id (default: time and random). A retried CI job that passes the "
        "same id records no second decision for a property in the ledger.",
    ),
]
OutOption = Annotated[
    Path | None, typer.Option("--out", help="Run folder (default .replay/runs/<run-id>/).")
]
ReportJsonOption = Annotated[
    bool, typer.Option("--json", help="Print the replay-report/1 JSON document.")
]
IsolationOption = Annotated[
    str,
    typer.Option("--isolation", help=ISOLATION_HELP, click_type=click.Choice(list(ISOLATIONS))),
]
RecordOption = Annotated[
    bool,
    typer.Option(
        "--record/--no-record",
        help="Append every decision to the ledger's event log and queue infra cases "
        "(--no-record: write only the run folder).",
    ),
]
FreezeOption = Annotated[
    bool,
    typer.Option(
        "--freeze",
        help="Also write a flake freeze for each flake_queue_eligible property (needs "
        "--owner and --expires, checked before anything runs; any other decision is "
        "refused and the refusal logged in the ledger).",
    ),
]
OwnerOption = Annotated[
    str | None, typer.Option("--owner", help="Who owns the freeze (with --freeze).")
]
ExpiresOption = Annotated[
    str | None,
    typer.Option("--expires", help="When the freeze expires: ISO-8601 time, or 72h / 3d from now."),
]
HtmlOption = Annotated[
    Path | None,
    typer.Option("--html", help="After the run, write its HTML page here (see `report`)."),
]
JunitOption = Annotated[
    Path | None, typer.Option("--junit", help="After the run, write JUnit XML here.")
]
SummaryOption = Annotated[
    Path | None,
    typer.Option(
        "--summary",
        help='After the run, append its Markdown summary here (e.g. "$GITHUB_STEP_SUMMARY").',
    ),
]

# The option groups: each checks its own options (exit 2, before any engine is asked) ----

# A run id names a folder, containers and volumes: nothing that needs quoting.
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def _check_count(flag: str, count: int | None, maximum: int) -> None:
    problem = None if count is None else count_problem(flag, count, maximum=maximum)
    if problem is not None:
        raise InputError(problem)


@dataclass(frozen=True, kw_only=True)
class Selection:
    """What is replayed: the repository, the two revisions, the command and its tests."""

    repo: Path
    base: str
    patch: str
    command: str
    property_ids: tuple[str, ...] = ()
    changed: bool = False
    shard: str | None = None  # I/N as given

    def validate(self) -> None:
        from orchestrator.core.pytest_command import pytest_args, split_node_id

        for property_id in self.property_ids:
            if not split_node_id(property_id).names_a_test:
                raise InputError(
                    f"--property {property_id!r}: expected a pytest node id (path::test)"
                )
        if self.changed and self.property_ids:
            raise InputError(
                "--changed selects the properties itself: it does not go with --property"
            )
        pytest_args(self.command, self.property_ids)  # a bad --command is exit 2
        self.parsed_shard()

    def parsed_shard(self) -> Shard | None:
        from orchestrator.core.shards import parse_shard

        return None if self.shard is None else parse_shard(self.shard)


@dataclass(frozen=True, kw_only=True)
class Oracle:
    """Whose test files judge both sides (``--tests-from``; each side its own without)."""

    tests_from: str | None = None
    test_paths: tuple[str, ...] = ()

    def validate(self) -> None:
        from orchestrator.services.tests_from import normal_test_paths

        if self.test_paths and self.tests_from is None:
            raise InputError(
                "--test-path goes with --tests-from (it names more test files to take)"
            )
        if self.tests_from is not None and not self.tests_from.strip():
            raise InputError("--tests-from needs base, patch or a revision")
        normal_test_paths(self.test_paths)


@dataclass(frozen=True, kw_only=True)
class FixtureAndShrink:
    """The payload every replay reads, the shrink it came from, or the shrink to run."""

    fixture: Path | None = None
    shrink_report: Path | None = None
    origin: Path | None = None  # the unshrunk payload, when the shrink report lacks it
    seed: int = 0
    shrink: bool = False  # --shrink: shrink the fixture when the patch fails

    def validate(self) -> None:
        from orchestrator.adapters.input_file import check_input

        if self.shrink_report is not None and self.fixture is None:
            raise InputError("--shrink-report needs --fixture (the minimal fixture it describes)")
        if self.shrink:
            if self.fixture is None:
                raise InputError("--shrink needs --fixture (the wide payload to shrink)")
            if self.shrink_report is not None or self.origin is not None:
                raise InputError(
                    "--shrink writes its own shrink report: drop --shrink-report/--origin"
                )
        if self.origin is not None and self.shrink_report is None:
            raise InputError("--origin goes with --shrink-report (it is the shrink's input)")
        # Each a regular file under the cap, refused before anything is opened.
        for flag, path in (
            ("--fixture", self.fixture),
            ("--shrink-report", self.shrink_report),
            ("--origin", self.origin),
        ):
            if path is not None:
                check_input(path, name=f"{flag} {path}")


@dataclass(frozen=True, kw_only=True)
class Scheduling:
    """How many replays, where they run and how many at once."""

    replays: int = 5
    screen: int | None = None  # None: the default rule (core.screening)
    replays_all: bool = False
    jobs: int | None = None
    engines: tuple[str, ...] = ()
    slots: int | None = None
    isolation: str = "side"
    runner_id: str | None = None  # as given: a pool names its engines by URL without it

    def validate(self) -> None:
        if self.replays < 1:
            raise InputError("--replays must be at least 1")
        if self.screen is not None and self.screen < 1:
            raise InputError(
                "--screen must be at least 1 (--replays-all replays without screening)"
            )
        for flag, count, maximum in (
            ("--replays", self.replays, MAX_REPLAYS),
            ("--screen", self.screen, MAX_REPLAYS),
            ("--jobs", self.jobs, MAX_JOBS),
            ("--slots", self.slots, MAX_SLOTS),
        ):
            _check_count(flag, count, maximum)
        problem = screen_problem(self.screen, self.replays)
        if problem is not None:
            raise InputError(problem)
        if self.screen is not None and self.replays_all:
            raise InputError("--screen and --replays-all exclude each other")
        if self.jobs is not None and self.jobs < 1:
            raise InputError("--jobs must be at least 1")
        if self.isolation not in ISOLATIONS:
            raise InputError(f"--isolation must be one of: {', '.join(ISOLATIONS)}")
        if self.runner_id is not None and not self.runner_id.strip():
            raise InputError("--runner-id must not be empty")
        if self.slots is not None and self.slots < 1:
            raise InputError("--slots must be at least 1")


@dataclass(frozen=True, kw_only=True)
class Limits:
    """What each replay's container gets: the image, the time, the environment."""

    image: str | None = None  # None: the project's default, asked of the engine last
    timeout_s: float = DEFAULT_TIMEOUT_S
    env: tuple[tuple[str, str], ...] = ()
    pythonpath: tuple[str, ...] = ()
    writable_tree: bool = False

    def validate(self) -> None:
        from orchestrator.core.replay_env import check_pythonpath, parse_env

        if not 0 < self.timeout_s <= MAX_TIMEOUT_S:
            raise InputError(
                f"--timeout must be a positive number of seconds, at most {MAX_TIMEOUT_S:g}"
            )
        parse_env([f"{key}={value}" for key, value in self.env])
        check_pythonpath(self.pythonpath)


@dataclass(frozen=True, kw_only=True)
class Recording:
    """Where the run is recorded: its id, the ledger, and the freezes it may write."""

    ledger: str
    record: bool = True
    freeze: bool = False
    owner: str | None = None
    expires: str | None = None
    run_id: str | None = None

    def validate(self) -> None:
        if self.run_id is not None and not _RUN_ID.match(self.run_id):
            raise InputError(
                f"--run-id {self.run_id!r}: letters, digits, '.', '_' and '-' only (at most 100)"
            )
        if (self.owner or self.expires) and not self.freeze:
            raise InputError("--owner and --expires go with --freeze")
        if self.freeze and not self.record:
            raise InputError("--freeze writes to the ledger: it cannot go with --no-record")
        missing = [
            name
            for name, value in (("--owner", self.owner), ("--expires", self.expires))
            if self.freeze and not (value or "").strip()
        ]
        if missing:
            raise InputError(f"--freeze needs {' and '.join(missing)}")

    def expires_at(self, now: datetime) -> datetime | None:
        """When a freeze expires (a bad --expires is exit 2)."""
        from orchestrator.core.durations import parse_expiry

        return parse_expiry(self.expires, now) if self.freeze and self.expires else None


@dataclass(frozen=True, kw_only=True)
class Outputs:
    """What the run leaves besides its run folder, and what it prints."""

    out: Path | None = None
    as_json: bool = False
    html: Path | None = None
    junit: Path | None = None
    summary: Path | None = None

    @property
    def views(self) -> bool:
        return bool(self.html or self.junit or self.summary)

    def validate(self) -> None:
        if self.views:  # a report path that cannot be written: exit 2 before running
            from orchestrator.commands.report import check_replay_targets

            check_replay_targets(html=self.html, junit=self.junit, summary=self.summary)


@dataclass(frozen=True, kw_only=True)
class ReplayArguments:
    """``replay``'s command line, in its groups, checked in one place."""

    selection: Selection
    oracle: Oracle
    fixture: FixtureAndShrink
    scheduling: Scheduling
    limits: Limits
    recording: Recording
    outputs: Outputs

    def validate(self) -> None:
        """Every usage mistake, found before an engine is asked for anything."""
        for group in (
            self.scheduling,
            self.limits,
            self.recording,
            self.selection,
            self.oracle,
            self.fixture,
            self.outputs,
        ):
            group.validate()
        if self.fixture.shrink:
            if len(self.selection.property_ids) != 1:
                raise InputError(
                    "--shrink needs exactly one --property (the test to shrink against)"
                )
            if self.selection.shard is not None or len(self.scheduling.engines) > 1:
                raise InputError(
                    "--shrink runs on one engine: not with --shard or several --engine"
                )

    def replay_options(self, image: str) -> ReplayOptions:
        """The run's options as the services take them, with the image to pin."""
        from orchestrator.core.replay_run import ReplayOptions

        selection, scheduling, limits = self.selection, self.scheduling, self.limits
        return ReplayOptions(
            repo=selection.repo,
            base=selection.base,
            patch=selection.patch,
            image=image,
            command=selection.command,
            property_ids=selection.property_ids,
            changed=selection.changed,
            shard=selection.parsed_shard(),
            tests_from=self.oracle.tests_from,
            test_paths=self.oracle.test_paths,
            fixture=self.fixture.fixture,
            shrink_report=self.fixture.shrink_report,
            origin=self.fixture.origin,
            seed=self.fixture.seed,
            replays=scheduling.replays,
            screen=scheduling.screen,
            replays_all=scheduling.replays_all,
            jobs=scheduling.jobs,
            engines=scheduling.engines,
            slots=scheduling.slots,
            isolation=scheduling.isolation,
            runner_id=scheduling.runner_id if scheduling.runner_id is not None else "local",
            timeout_s=limits.timeout_s,
            env=limits.env,
            pythonpath=limits.pythonpath,
            writable_tree=limits.writable_tree,
            run_id=self.recording.run_id,
            out=self.outputs.out,
        )
