"""The root command converts subcommands on demand: same help, same commands as Typer's
own conversion of the whole app."""

from __future__ import annotations

import pytest
import typer
from click.testing import CliRunner

from orchestrator.cli import app, build_command


def output(command, args):
    result = CliRunner().invoke(command, args, prog_name="orchestrator", terminal_width=100)
    return result.exit_code, result.output


@pytest.mark.parametrize(
    "args",
    [["--help"], ["freeze", "--help"], ["image", "runner", "--help"], ["replay", "--help"], []],
)
def test_the_help_is_typers_own(args):
    assert output(build_command(), args) == output(typer.main.get_command(app), args)


def test_every_command_is_there_and_built_only_when_asked_for():
    eager = typer.main.get_command(app)
    lazy = build_command()
    ctx = lazy.make_context("orchestrator", ["--help"], resilient_parsing=True)
    assert lazy.list_commands(ctx) == eager.list_commands(ctx)
    assert lazy.built == {}
    command = lazy.get_command(ctx, "freeze")
    assert command is not None
    assert list(lazy.built) == ["freeze"]
    assert lazy.get_command(ctx, "no-such-command") is None
