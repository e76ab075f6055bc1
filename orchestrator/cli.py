"""The command-line interface: parse arguments, call a service, print.

Commands live in ``orchestrator.commands.<name>`` and are discovered here. This
module owns the one handler that turns an exception into an exit status
(``orchestrator.errors.exit_code_for``); commands never call ``sys.exit``.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import pkgutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from difflib import get_close_matches
from typing import Any

import click
import typer
from typer.core import TyperGroup

from orchestrator import commands, interrupts, log
from orchestrator.errors import ExitCode, Interrupted, OrchestratorError, exit_code_for, one_line

HELP = """\
Bilateral replay for CI: sort a red run into "the patch broke it", "the test is
flaky" and "the runner broke", with evidence.

Exit status: 0 ok or a non-blocking lane, 1 a blocking verdict, 2 bad usage or
input, 3 undecided or infrastructure failure, 130 interrupted.
"""

app = typer.Typer(
    name="orchestrator",
    help=HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@dataclass(frozen=True, kw_only=True)
class GlobalOptions:
    log_format: log.LogFormat
    json_logs: bool


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"orchestrator {version('orchestrator')}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    log_format: str = typer.Option(
        "auto",
        "--log-format",
        help="auto (JSON lines when CI is set), console or json. Logs go to stderr.",
        click_type=click.Choice(["auto", "console", "json"]),
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug detail."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    fmt: log.LogFormat = log_format  # type: ignore[assignment]
    from orchestrator.core.text_safety import terminal_safe

    log.configure(fmt, os.environ, verbose=verbose, console_filter=terminal_safe)
    ctx.obj = GlobalOptions(log_format=fmt, json_logs=log.is_json(fmt, os.environ))


def _register_commands() -> None:
    for module_info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if module_info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{commands.__name__}.{module_info.name}")
        module.register(app)


_register_commands()


class _LazyGroup(TyperGroup):
    """The root command: a subcommand is converted from Typer to Click only when it is
    asked for. Converting all of them (every parameter's annotations evaluated) cost more
    than the imports on every start; the root's help lists them from their help texts."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.lazy: dict[str, tuple[Callable[[], click.Command], str, bool]] = {}
        self.built: dict[str, click.Command] = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.lazy)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.built:
            entry = self.lazy.get(cmd_name)
            if entry is None:
                return None
            self.built[cmd_name] = entry[0]()
        return self.built[cmd_name]

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return click.Group.resolve_command(self, ctx, args)
        except click.UsageError as error:
            matches = get_close_matches(args[0], list(self.lazy)) if args else []
            if matches and "Did you mean" not in error.message:
                suggestions = ", ".join(f"{match!r}" for match in matches)
                error.message = (  # type: ignore[misc]  # Click's own suggestions do so too
                    f"{error.message.rstrip('.')}. Did you mean {suggestions}?"
                )
            raise

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, text) for name, (_, text, hidden) in self.lazy.items() if not hidden]
        if not rows:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in rows)
        with formatter.section("Commands"):
            # A bare Command shortens the help exactly as the converted one would.
            formatter.write_dl(
                [
                    (name, click.Command(name, help=text).get_short_help_str(limit))
                    for name, text in rows
                ]
            )


def _help_text(text: str | None) -> str:
    return (text or "").split("\f", 1)[0]


def build_command() -> click.Command:
    """The root Click group of ``app``, its subcommands converted on demand."""
    from typer.main import (
        get_command_from_info,
        get_command_name,
        get_group,
        get_group_from_info,
        solve_typer_info_help,
    )

    root = typer.Typer(
        name=app.info.name,
        help=HELP,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        cls=_LazyGroup,
    )
    root.callback()(_root)
    group = get_group(root)
    assert isinstance(group, _LazyGroup)
    short = app.pretty_exceptions_short
    for info in app.registered_commands:
        assert info.callback is not None
        name = info.name or get_command_name(info.callback.__name__)
        text = inspect.cleandoc(info.help) if info.help else inspect.getdoc(info.callback)
        group.lazy[name] = (
            functools.partial(
                get_command_from_info, info, pretty_exceptions_short=short, rich_markup_mode=None
            ),
            _help_text(text),
            bool(info.hidden),
        )
    for sub in app.registered_groups:
        sub_name = sub.name if isinstance(sub.name, str) else None
        assert sub.typer_instance is not None
        name = sub_name or str(sub.typer_instance.info.name)
        group.lazy[name] = (
            functools.partial(
                get_group_from_info,
                sub,
                pretty_exceptions_short=short,
                suggest_commands=app.suggest_commands,
                rich_markup_mode=None,
            ),
            _help_text(solve_typer_info_help(sub)),
            bool(sub.hidden) if isinstance(sub.hidden, bool) else False,
        )
    return group


def error_line(message: str) -> None:
    """The one-line error every command prints for a refused input or a failure."""
    from orchestrator.core.text_safety import terminal_safe

    first_line = message.strip().splitlines()[0] if message.strip() else "unknown error"
    click.echo(f"orchestrator: error: {terminal_safe(first_line)}", err=True)


def usage_error(error: click.exceptions.UsageError) -> None:
    """Click's usage block in two lines: the problem, then where the help is."""
    message = " ".join(line.strip() for line in error.format_message().splitlines())
    if message[:1].isupper() and message[1:2].islower():
        message = message[0].lower() + message[1:]  # "Missing option" -> "missing option"
    error_line(message.rstrip("."))
    if error.ctx is not None:
        click.echo(f"Try '{error.ctx.command_path} --help' for help.", err=True)


def _is_bare_group(error: click.exceptions.UsageError) -> bool:
    # click >= 8.2 raises this for `orchestrator` or `orchestrator freeze` alone: the help
    # is the answer (printed by the error itself), not a one-line complaint.
    no_args_is_help = getattr(click.exceptions, "NoArgsIsHelpError", None)
    return no_args_is_help is not None and isinstance(error, no_args_is_help)


def interrupted_line(detail: str = "") -> None:
    """The one line of an interruption, whichever signal and wherever it landed."""
    received = interrupts.received()
    head = f"interrupted ({interrupts.signal_name(received)})" if received else "interrupted"
    detail = detail.removeprefix("interrupted").lstrip(";:, ")
    error_line(f"{head}; {detail}" if detail else head)


def internal_error(error: Exception) -> ExitCode:
    """An exception no layer turned into an OrchestratorError: one line, exit 3.

    The traceback goes to the debug log (``--verbose``), never onto the terminal.
    """
    import errno
    import traceback

    log.get_logger("orchestrator").debug(
        "internal_error.traceback", traceback=traceback.format_exc()
    )
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        error_line(f"disk full: {one_line(error)} (disk_full)")
    else:
        what = f"{type(error).__name__}: {one_line(error)}"
        error_line(f"internal error: {what} (internal_error; --verbose shows the traceback)")
    return ExitCode.UNDECIDED


def main(argv: list[str] | None = None) -> None:
    command = build_command()
    try:
        result = command.main(args=argv, prog_name="orchestrator", standalone_mode=False)
    except SystemExit:
        raise
    except BaseException as error:
        interrupts.close()  # the status is being decided: a late signal cannot cut it
        sys.exit(_report(error))
    interrupts.close()
    if interrupts.received() is not None:
        # Typer turns a KeyboardInterrupt raised inside a command into a plain 130.
        interrupted_line()
        sys.exit(ExitCode.INTERRUPTED)
    sys.exit(result if isinstance(result, int) else ExitCode.OK)


def _report(error: BaseException) -> int:
    """Print the one line (or Click's usage block) for ``error``; its exit status."""
    if isinstance(error, Interrupted):
        interrupted_line(str(error))
        return ExitCode.INTERRUPTED
    if isinstance(error, OrchestratorError):
        error_line(str(error))
        return exit_code_for(error)
    if isinstance(error, KeyboardInterrupt | click.exceptions.Abort):
        interrupted_line()
        return ExitCode.INTERRUPTED
    if isinstance(error, click.exceptions.UsageError):
        if _is_bare_group(error):
            error.show()
        else:
            usage_error(error)
        return ExitCode.USAGE
    if isinstance(error, click.exceptions.ClickException):
        error_line(error.format_message())
        return ExitCode.USAGE
    if isinstance(error, click.exceptions.Exit):
        if interrupts.received() is not None:
            interrupted_line()
            return ExitCode.INTERRUPTED
        return error.exit_code
    if isinstance(error, Exception):  # a bug or a local fault no layer named: one line
        return internal_error(error)
    raise error  # GeneratorExit and the like: not ours to report
