"""``--ledger`` for the commands declared with plain Click (the read commands, which
start without importing Typer): the same flag, help, environment variable, default and
rule as ``_options.LedgerOption`` (tests/unit/test_cli_lazy.py holds the two equal)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from orchestrator.adapters.ledger_location import ENV_VAR, default_ledger_url

LEDGER_HELP = "The ledger: a SQLAlchemy URL, sqlite:///PATH or postgresql+psycopg://USER@HOST/DB."

F = TypeVar("F", bound=Callable[..., Any])


def _default_ledger() -> str:
    return default_ledger_url(Path.cwd())


def _ledger_or_default(ctx: click.Context, param: click.Parameter, value: str) -> str:
    # `--ledger ""` (say, an unset CI secret spelled out) means the default, as an empty
    # $ORCHESTRATOR_LEDGER does.
    return value or _default_ledger()


def ledger_option(function: F) -> F:
    """Declare ``ledger: str`` on a Click command."""
    return click.option(
        "--ledger",
        "ledger",
        metavar="URL",
        envvar=ENV_VAR,
        show_envvar=True,
        default=_default_ledger,
        callback=_ledger_or_default,
        show_default=".replay/ledger.db in the current folder",
        help=LEDGER_HELP,
    )(function)
