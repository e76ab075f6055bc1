"""The command-line interface: parse arguments, call a service, print.

Commands live in ``orchestrator.commands.<name>``; they are listed here (``COMMANDS``)
and each module is imported when its command is asked for. This module owns the one
handler that turns an exception into an exit status (``orchestrator.errors.exit_code_for``);
commands never call ``sys.exit``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

import click

from orchestrator import interrupts, log
from orchestrator.commands._lazy import LazyGroup, module_command
from orchestrator.errors import ExitCode, Interrupted, OrchestratorError, exit_code_for, one_line

HELP = """\
Bilateral replay for CI: sort a red run into "the patch broke it", "the test is
flaky" and "the runner broke", with evidence.

Exit status: 0 ok or a non-blocking lane, 1 a blocking verdict, 2 bad usage or
input, 3 undecided or infrastructure failure, 130 interrupted.
"""

# Every command: its module ``orchestrator.commands.<name>`` and the first paragraph of
# its help, which `orchestrator --help` shortens into the commands' list. The list is
# written out so that the root's help and a command's start import no other command's
# module (nor Typer, which most of them are declared with); tests/unit/test_cli_lazy.py
# holds it equal to the modules' own help texts. Typer's order: commands, then groups.
COMMANDS: dict[str, str] = {
    "accept": "Accept a drafted property only if it is a real check and a mutant kills it.",
    "admit": "Admit (or refuse) a timing freeze: lanes.md section 4's gates, first failing "
    "code wins.",
    "budget": "Sample one check >= 5 times (one revision, same input, same image) and classify it.",
    "check": "Exit 1 listing every live freeze past its expiry (with owners), else exit 0.",
    "classify": "Decide the lane for one property's bilateral evidence (docs/lanes.md section 3).",
    "digest": "Print sha256:<hex> of the canonical JSON (sorted keys, compact, UTF-8).",
    "doctor": "Check the engine, the runner image, git and Python: one line each; then one "
    "line per project image (`orchestrator image build`) on the engine.",
    "merge": "Join the shards of one run (replay --shard 1/N ... N/N) into one report and "
    "one exit status.",
    "replay": "Replay --command on --base and --patch, N times each, in hermetic "
    "containers; decide.",
    "report": "Write other views of finished run folders: nothing is replayed or decided again.",
    "reproduce": "Run one recorded replay of PROPERTY again, exactly as it ran, and say "
    "whether the probe labels it as the run did.",
    "shrink": "Shrink FIXTURE to a minimal payload that still fails the same way.",
    "tally": "Weekly counts from the ledger's event log, oldest week first.",
    "thaw": "Re-probe every freeze at or past its expiry, then thaw it or leave it overdue.",
    "freeze": "Read the freeze ledger: time-boxed quarantine rows, never merge approvals.",
    "image": "The runner image, and images for projects with dependencies.",
    "infra": "The infra queue: timeouts and harness errors, never freeze rows.",
}


@dataclass(frozen=True, kw_only=True)
class GlobalOptions:
    log_format: log.LogFormat
    json_logs: bool


def _version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        from importlib.metadata import version

        click.echo(f"orchestrator {version('orchestrator')}")
        raise click.exceptions.Exit()


@click.pass_context
def _root(ctx: click.Context, log_format: str, verbose: bool) -> None:
    fmt: log.LogFormat = log_format  # type: ignore[assignment]
    from orchestrator.core.text_safety import json_terminal_safe, terminal_safe

    log.configure(
        fmt,
        os.environ,
        verbose=verbose,
        console_filter=terminal_safe,
        json_filter=json_terminal_safe,
    )
    ctx.obj = GlobalOptions(log_format=fmt, json_logs=log.is_json(fmt, os.environ))


class _Root(LazyGroup):
    """The root command, plain Click; what Typer's root did besides parsing is kept."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as error:  # Typer's exit 130, not Click's "Aborted!" path
            raise click.exceptions.Exit(ExitCode.INTERRUPTED) from error

    def _main_shell_completion(
        self,
        ctx_args: MutableMapping[str, Any],
        prog_name: str,
        complete_var: str | None = None,
    ) -> None:
        if complete_var is None:
            complete_var = f"_{prog_name}_COMPLETE".replace("-", "_").upper()
        if os.environ.get(complete_var):  # Typer's completion scripts, as before
            from typer.core import _typer_main_shell_completion

            _typer_main_shell_completion(
                self, ctx_args=ctx_args, prog_name=prog_name, complete_var=complete_var
            )


def build_command() -> click.Command:
    """The root Click group; a command's module is imported when the command is asked
    for."""
    return _Root(
        name="orchestrator",
        help=HELP,
        no_args_is_help=True,
        callback=_root,
        params=[
            click.Option(
                ["--log-format", "log_format"],
                type=click.Choice(["auto", "console", "json"]),
                default="auto",
                show_default=True,
                help="auto (JSON lines when CI is set), console or json. Logs go to stderr.",
            ),
            click.Option(["--verbose", "-v", "verbose"], is_flag=True, help="Log debug detail."),
            click.Option(
                ["--version"],
                is_flag=True,
                expose_value=False,
                is_eager=True,
                callback=_version,
                help="Print the version.",
            ),
        ],
        entries={
            name: (module_command(f"orchestrator.commands.{name}", name), text)
            for name, text in COMMANDS.items()
        },
    )


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
