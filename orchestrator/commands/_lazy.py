"""Groups whose subcommands are imported only when one is asked for.

A group lists its subcommands from a table of names and help texts; a subcommand's
module is imported (and a Typer declaration converted to Click, which imports Typer)
only when that subcommand runs or shows its help. ``orchestrator --help`` and the read
commands, declared with plain Click, never import Typer: its import was the largest
part of their start-up.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

import click

Loader = Callable[[], click.Command]


def module_command(module_name: str, name: str) -> Loader:
    """The command ``name`` of a module: its ``command`` when declared with plain Click,
    else the one its ``register(app)`` adds to a Typer app, converted to Click as Typer's
    conversion of the whole app would."""

    def load() -> click.Command:
        module = importlib.import_module(module_name)
        command = getattr(module, "command", None)
        if isinstance(command, click.Command):
            return command
        return _typer_command(module, name)

    return load


def _typer_command(module: Any, name: str) -> click.Command:
    import typer
    from typer.main import get_command_from_info, get_group_from_info

    app = typer.Typer(rich_markup_mode=None)
    module.register(app)
    short = app.pretty_exceptions_short
    for info in app.registered_commands:
        if info.name == name:
            return get_command_from_info(info, pretty_exceptions_short=short, rich_markup_mode=None)
    for sub in app.registered_groups:
        if sub.name == name:
            return get_group_from_info(
                sub,
                pretty_exceptions_short=short,
                suggest_commands=app.suggest_commands,
                rich_markup_mode=None,
            )
    raise LookupError(f"{module.__name__} registers no command {name!r}")


class LazyGroup(click.Group):
    """A group of subcommands loaded on demand, listed in the table's order (as Typer
    lists them: in the order declared), with Typer's "Did you mean" on a typo."""

    def __init__(self, *, entries: Mapping[str, tuple[Loader, str]], **attrs: Any) -> None:
        super().__init__(**attrs)
        # name -> (the loader, the help text `--help` shortens into the commands' list)
        self.entries = dict(entries)
        self.built: dict[str, click.Command] = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.entries)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.built:
            entry = self.entries.get(cmd_name)
            if entry is None:
                return None
            self.built[cmd_name] = entry[0]()
        return self.built[cmd_name]

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as error:
            from difflib import get_close_matches

            matches = get_close_matches(args[0], list(self.entries)) if args else []
            if matches and "Did you mean" not in error.message:
                suggestions = ", ".join(f"{match!r}" for match in matches)
                error.message = (  # type: ignore[misc]  # Click's own suggestions do so too
                    f"{error.message.rstrip('.')}. Did you mean {suggestions}?"
                )
            raise

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if not self.entries:
            return
        limit = formatter.width - 6 - max(len(name) for name in self.entries)
        with formatter.section("Commands"):
            # A bare Command shortens the help exactly as the loaded one would.
            formatter.write_dl(
                [
                    (name, click.Command(name, help=text).get_short_help_str(limit))
                    for name, (_, text) in self.entries.items()
                ]
            )


def declared(command: click.Command) -> tuple[Loader, str]:
    """A group's entry for a command already declared (with plain Click) beside it."""
    return (lambda: command), command.help or ""
