"""Options several commands share: one declaration, one help text, one rule each.

Each option is an ``Annotated`` alias declared here once (those of the commands outside
the replay family in :mod:`orchestrator.commands._command_options`), and a field of an
option group (:mod:`orchestrator.commands._option_groups`) is annotated with it: every
command that takes the group gets the same flag, help, environment variable and
validation. Where commands differ only in whether an option is required, one
``typer.Option`` is shared by two annotations (``RevOption`` and ``OptionalRevOption``); a
command names its own spelling with ``_grouped.take``/``Variant``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import click
import typer

from orchestrator.adapters.ledger_location import ENV_VAR
from orchestrator.commands._ledger_option import (
    JSON_FLAG,
    LEDGER_DEFAULT_SHOWN,
    LEDGER_HELP,
    default_ledger,
    ledger_or_default,
)
from orchestrator.core.bounds import (
    MAX_EVIDENCE_CAP,
    MAX_INPUT_BYTES,
    MAX_JOBS,
    MAX_REPLAYS,
    MAX_SHRINK_ATTEMPTS,
    MAX_SLOTS,
    MAX_TIMEOUT_S,
    describe_bytes,
)

__all__ = ["MAX_JOBS", "MAX_REPLAYS", "MAX_SHRINK_ATTEMPTS", "MAX_SLOTS"]

# --fixture and every other JSON file a command reads ----------------------------------

INPUT_FILE_RULE = f"a regular file, not a link, at most {describe_bytes(MAX_INPUT_BYTES)}"
FIXTURE_HELP = f"JSON fixture, mounted read-only, as $REPLAY_FIXTURE ({INPUT_FILE_RULE})."

# --ledger -------------------------------------------------------------------------------

# Help, default and rule are those of the read commands' plain-Click option (one of each).


def _ledger_or_default(value: str) -> str:
    return ledger_or_default(value)


LedgerOption = Annotated[
    str,
    typer.Option(
        "--ledger",
        metavar="URL",
        envvar=ENV_VAR,
        show_envvar=True,
        default_factory=default_ledger,
        callback=_ledger_or_default,
        show_default=LEDGER_DEFAULT_SHOWN,
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
    help="Seconds one replay (one pytest session; a budget sample is one) may take; past it "
    "the replay is killed and labelled timeout. Default: replay's and shrink's timeout = in "
    "[tool.orchestrator], else 60; replay without --property (a whole suite, or --changed's "
    "tests, in one session): 3 x their recorded durations + 60, at least 600, or 1800 "
    f"without a record (docs/lanes.md). From {MIN_TIMEOUT_S:g} to {MAX_TIMEOUT_S:g} (a day).",
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
    tuple[str, ...],
    typer.Option(
        "--env",
        metavar="KEY=VALUE",
        help="A variable for every replay (repeatable), recorded in the run log and the "
        "evidence; TZ is unset unless given here.",
    ),
]
PythonpathOption = Annotated[
    tuple[str, ...],
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
    tuple[str, ...],
    typer.Option(
        "--test-path",
        metavar="PATH",
        help="With --tests-from: one more test file or folder to take from that revision "
        "(test data outside the test folder; repeatable).",
    ),
]

TestsFromRevOption = Annotated[
    str | None, typer.Option("--tests-from", metavar="REV", help=TESTS_FROM_HELP)
]
"""``--tests-from`` of a command with one revision (``accept``, ``shrink --test``): there
are no sides to name, only revisions."""

# --fixture ------------------------------------------------------------------------------

FixtureOption = Annotated[Path | None, typer.Option("--fixture", help=FIXTURE_HELP)]

# --rev, --property NODEID: one test at one revision (accept, budget, shrink --test) ------

_REV = typer.Option("--rev", help="The revision to replay (any git revision; pinned to its SHA).")
RevOption = Annotated[str, _REV]
OptionalRevOption = Annotated[str | None, _REV]
_PROPERTY = typer.Option(
    "--property",
    metavar="NODEID",
    help="The property: a pytest node id (path::test or path::Class::test).",
)
PropertyOption = Annotated[str, _PROPERTY]
OptionalPropertyOption = Annotated[str | None, _PROPERTY]
"""One property; ``replay`` takes several (``PropertiesOption``)."""

# --json ---------------------------------------------------------------------------------


def json_option(document: str | None = None, *, text: str | None = None) -> Any:
    """``--json``: print the command's one JSON document (``replay-report/1``, ...); its
    help says which, or is ``text``. The one declaration of the flag (the read commands'
    plain-Click one takes it from ``_ledger_option``)."""
    return typer.Option(JSON_FLAG, help=text or f"Print the {document} JSON document.")


# replay's own options -------------------------------------------------------------------
# Declared here, beside the groups that check them, so the command reads as a list.

ISOLATIONS = ("side", "container")  # == services.sides.ISOLATIONS (kept light)
ISOLATION_HELP = (
    "side: one container per side runs the N replays, each a fresh pytest process "
    "forked from a driver that imported pytest once (none of the project's modules); "
    "container: one container per replay (slower; nothing shared, not even /tmp)."
)

_REPO = typer.Option("--repo", help="The git repository to replay.")
RepoOption = Annotated[Path, _REPO]
OptionalRepoOption = Annotated[Path | None, _REPO]
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
    tuple[str, ...],
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
FalseBlockRateOption = Annotated[
    float | None,
    typer.Option(
        "--false-block-rate",
        min=0.0,
        max=1.0,
        help="A blocking verdict that rests on a side whose replays are mixed (base P and "
        "patch M, a call count that varies) blocks only at this false-block rate per run, "
        "by an exact test; until then it is replayed more (see --evidence-cap). 1 turns "
        "the rule off. Default: the project's (pyproject.toml), else 0.01.",
        show_default=False,
    ),
]
EvidenceCapOption = Annotated[
    int | None,
    typer.Option(
        "--evidence-cap",
        min=1,
        max=MAX_EVIDENCE_CAP,
        help="Replays per side a verdict on a mixed side may get, in rounds (N, 2N, ..., "
        "the cap), before it is set aside as weak_evidence (not blocking). Default: the "
        "project's (pyproject.toml), else 20.",
        show_default=False,
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
MemoryOption = Annotated[
    str | None,
    typer.Option(
        "--memory",
        help="Memory of each side's container, e.g. 768m or 2g. Default: 512m per --jobs "
        "worker, and 6 KB more per test for a suite whose recorded tests number more than "
        "50,000 (pytest holds every collected test for the session).",
    ),
]
SeedOption = Annotated[
    int, typer.Option("--seed", help="Seed given to every replay as $REPLAY_SEED.")
]
"""``--seed`` of ``replay`` and ``shrink --test`` (every candidate run is a replay)."""
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
    tuple[str, ...],
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
ReuseOption = Annotated[
    bool,
    typer.Option(
        "--reuse/--no-reuse",
        help="Reuse the base side's screening when an earlier run stored it under the same "
        "key (its tree, image, command, environment, seed, probe...), and store each side "
        "that screened cleanly, in the ledger and --evidence-cache (--no-reuse: neither).",
    ),
]
EvidenceCacheOption = Annotated[
    Path | None,
    typer.Option(
        "--evidence-cache",
        envvar="ORCHESTRATOR_EVIDENCE_CACHE",
        file_okay=False,
        help="A folder (a CI cache step keeps it) where sides' screening evidence is "
        "stored and looked up, beside the ledger; bounded by "
        "$ORCHESTRATOR_EVIDENCE_CACHE_BYTES (default 2 GiB).",
    ),
]
OutOption = Annotated[
    Path | None, typer.Option("--out", help="Run folder (default .replay/runs/<run-id>/).")
]
ReportJsonOption = Annotated[bool, json_option("replay-report/2 (every property)")]
AllRowsOption = Annotated[
    bool,
    typer.Option(
        "--all",
        help="List every property in the table, in the run's order (by default the ones "
        "that need a look, every lane but no_freeze, blocking first, and one line counting "
        "the others). --json, the run folder and the reports always hold every property.",
    ),
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

# accept's own options -------------------------------------------------------------------

MutantOption = Annotated[
    str,
    typer.Option(
        "--mutant",
        help="The hand-written mutant: a patch file applied to --rev, or a revision.",
    ),
]
ACCEPT_REPLAYS = 3
AcceptReplaysOption = Annotated[
    int | None, typer.Option("--replays", min=1, max=MAX_REPLAYS, help="Replays per side.")
]
AcceptJsonOption = Annotated[bool, json_option("acceptance/1")]

# budget's own options -------------------------------------------------------------------

BudgetMsOption = Annotated[
    float | None, typer.Option("--budget-ms", min=0.0, help="The written latency budget, in ms.")
]
SamplesOption = Annotated[
    int,
    typer.Option(
        "--samples", min=5, max=MAX_REPLAYS, help=f"How many samples (5 to {MAX_REPLAYS})."
    ),
]
BudgetCommandOption = Annotated[
    str | None, typer.Option("--command", help="The pytest command whose options are used.")
]
AdmitOption = Annotated[
    bool,
    typer.Option(
        "--admit",
        help="Run the timing admission (docs/lanes.md section 4) and record its code "
        "(and a timing freeze on timing_debt_opened) in the ledger.",
    ),
]
AdmitOwnerOption = Annotated[
    str | None, typer.Option("--owner", help="Who owns the timing freeze (with --admit).")
]
MaxAgeOption = Annotated[
    str, typer.Option("--max-age", help="The freeze's age, 1h..72h (with --admit).")
]
OracleKeysOption = Annotated[
    str, typer.Option("--oracle-keys", help="Comma-separated oracle keys of the fixture.")
]
LockedDigestOption = Annotated[
    str | None,
    typer.Option(
        "--locked-digest",
        help="The fixture's locked oracle digest (sha256:...). Default: the fixture's "
        "own oracle digest, i.e. no lock beyond the file given.",
    ),
]
RunnerLabelOption = Annotated[str | None, typer.Option("--runner-id", help="Label of this runner.")]
BudgetJsonOption = Annotated[bool, json_option("budget-report/1")]

# shrink's own options -------------------------------------------------------------------

ShrinkFixtureArgument = Annotated[
    str,
    typer.Argument(
        metavar="FIXTURE",
        help=f"The failing JSON fixture, or - for standard input ({INPUT_FILE_RULE}).",
    ),
]
HostPropertyOption = Annotated[
    str | None,
    typer.Option(
        "--property",
        metavar="MODULE:FUNCTION",
        help="A host-side property: called with the payload, it fails by raising or "
        "returning False.",
    ),
]
PropertyPathOption = Annotated[
    tuple[Path, ...],
    typer.Option(
        "--path",
        metavar="DIR",
        help="With --property: a folder to import it from (repeatable; the current "
        "folder is searched last).",
    ),
]
ShrinkTestOption = Annotated[
    str | None,
    typer.Option(
        "--test",
        metavar="NODEID",
        help="A pytest test that reads $REPLAY_FIXTURE, run at --rev of --repo in the "
        "--image container for every candidate.",
    ),
]
AttemptsOption = Annotated[
    int | None,
    typer.Option(
        "--attempts",
        min=1,
        max=MAX_SHRINK_ATTEMPTS,
        help="Shrink this many times; stable only if all agree (>= 2).",
    ),
]
MinimalOutOption = Annotated[
    Path | None,
    typer.Option("--out", metavar="FILE", help="Write the minimal fixture here (atomically)."),
]
ShrinkJsonOption = Annotated[bool, json_option("shrink-report/1")]

# reproduce's own options ----------------------------------------------------------------

REPRODUCE_SIDES = ("base", "patch", "both")

RunDirArgument = Annotated[
    Path, typer.Argument(metavar="RUN_DIR", help="A finished run folder (replay's --out).")
]
RecordedPropertyArgument = Annotated[
    str, typer.Argument(metavar="PROPERTY", help="One of the run's properties (its node id).")
]
SideOption = Annotated[
    str,
    typer.Option(
        "--side",
        help="Which side's replay to run again; both: base, then patch, shown side by side.",
        click_type=click.Choice(list(REPRODUCE_SIDES)),
    ),
]
ReplayNumberOption = Annotated[
    int | None,
    typer.Option(
        "--replay",
        metavar="N",
        min=1,
        help="Which replay (1 to the number the run recorded of the property on the "
        "chosen side(s): its screening replays when it was decided on them). Default: "
        "the first that did not pass on the chosen side(s), else 1.",
        show_default=False,
    ),
]
ShellOption = Annotated[
    bool,
    typer.Option(
        "--shell",
        help="Open an interactive shell in the replay's container instead of running "
        "the test: tree, fixture and environment in place, the exact command printed.",
    ),
]
PdbOption = Annotated[
    bool,
    typer.Option(
        "--pdb",
        help="Run pytest with --pdb on a terminal of its own, attached to yours "
        "(no deadline: you decide when it ends).",
    ),
]
KeepOption = Annotated[
    bool,
    typer.Option(
        "--keep",
        help="Keep the container running afterwards, for docker exec (it stays labelled: "
        "the next replay or reproduce on this machine removes it).",
    ),
]
RunRepoOption = Annotated[
    Path | None,
    typer.Option(
        "--repo",
        help="The repository holding the run's commits (default: the one the run log "
        "names), e.g. your clone of a repository a CI run replayed.",
    ),
]
"""Not ``--repo`` of the commands that replay a revision: here it only says where the
commits the run log pinned are, when not where the run found them."""
