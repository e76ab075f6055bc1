"""The options of the commands declared with plain Click (the read commands, which start
without importing Typer): ``--ledger``, with the same flag, help, environment variable,
default and rule as ``_options.LedgerOption``, which takes them from here; ``--json``,
whose flag ``_options.json_option`` takes from here; and ``freeze list --expired``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from orchestrator.adapters.ledger_location import ENV_VAR, default_ledger_url

LEDGER_HELP = "The ledger: a SQLAlchemy URL, sqlite:///PATH or postgresql+psycopg://USER@HOST/DB."
LEDGER_DEFAULT_SHOWN = ".replay/ledger.db in the current folder"

F = TypeVar("F", bound=Callable[..., Any])


def default_ledger() -> str:
    return default_ledger_url(Path.cwd())


def ledger_or_default(value: str) -> str:
    # `--ledger ""` (say, an unset CI secret spelled out) means the default, as an empty
    # $ORCHESTRATOR_LEDGER does.
    return value or default_ledger()


def _ledger_callback(ctx: click.Context, param: click.Parameter, value: str) -> str:
    return ledger_or_default(value)


def ledger_option(function: F) -> F:
    """Declare ``ledger: str`` on a Click command."""
    return click.option(
        "--ledger",
        "ledger",
        metavar="URL",
        envvar=ENV_VAR,
        show_envvar=True,
        default=default_ledger,
        callback=_ledger_callback,
        show_default=LEDGER_DEFAULT_SHOWN,
        help=LEDGER_HELP,
    )(function)


JSON_FLAG = "--json"  # every command's: print its one JSON document instead of text


def json_flag(help_text: str) -> Callable[[F], F]:
    """Declare ``as_json: bool`` (``--json``) on a Click command."""
    return click.option(JSON_FLAG, "as_json", is_flag=True, help=help_text)


def expired_flag(function: F) -> F:
    """Declare ``expired: bool`` (``freeze list --expired``)."""
    return click.option("--expired", is_flag=True, help="Only rows past their expiry now.")(
        function
    )
