"""Options several commands share: one declaration, one help text, one rule each.

A command declares ``ledger: LedgerOption``, ``timeout: TimeoutOption = DEFAULT_TIMEOUT_S``
or ``image: ImageOption`` and gets the same flag, help, environment variable and
validation as every other command.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer

from orchestrator.adapters.ledger_location import ENV_VAR, default_ledger_url
from orchestrator.core.bounds import (
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
