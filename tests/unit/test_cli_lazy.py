"""The root command lists its commands from a table and imports a command's module only
when that command is asked for; the read commands are plain Click. The help is the same,
byte for byte, as when Typer converted every command (the pages below were printed by the
commit before this change), and the table agrees with the commands' own help texts."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import click
import pytest
import typer
from click.testing import CliRunner

from orchestrator import commands
from orchestrator.adapters.ledger_location import ENV_VAR
from orchestrator.cli import COMMANDS, build_command
from orchestrator.commands._lazy import LazyGroup


def output(command: click.Command, args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(command, args, prog_name="orchestrator", terminal_width=100)
    return result.exit_code, result.output


PAGES = {
    "": """\
Usage: orchestrator [OPTIONS] COMMAND [ARGS]...

  Bilateral replay for CI: sort a red run into "the patch broke it", "the test is flaky" and "the
  runner broke", with evidence.

  Exit status: 0 ok or a non-blocking lane, 1 a blocking verdict, 2 bad usage or input, 3 undecided
  or infrastructure failure, 130 interrupted.

Options:
  --log-format [auto|console|json]
                                  auto (JSON lines when CI is set), console or json. Logs go to
                                  stderr.  [default: auto]
  -v, --verbose                   Log debug detail.
  --version                       Print the version.
  --help                          Show this message and exit.

Commands:
  accept     Accept a drafted property only if it is a real check and a mutant kills it.
  admit      Admit (or refuse) a timing freeze: lanes.md section 4's gates, first failing code...
  budget     Sample one check >= 5 times (one revision, same input, same image) and classify it.
  check      Exit 1 listing every live freeze past its expiry (with owners), else exit 0.
  classify   Decide the lane for one property's bilateral evidence (docs/lanes.md section 3).
  digest     Print sha256:<hex> of the canonical JSON (sorted keys, compact, UTF-8).
  doctor     Check the engine, the runner image, git and Python: one line each; then one line...
  merge      Join the shards of one run (replay --shard 1/N ...
  replay     Replay --command on --base and --patch, N times each, in hermetic containers; decide.
  report     Write other views of finished run folders: nothing is replayed or decided again.
  reproduce  Run one recorded replay of PROPERTY again, exactly as it ran, and say whether the...
  shrink     Shrink FIXTURE to a minimal payload that still fails the same way.
  tally      Weekly counts from the ledger's event log, oldest week first.
  thaw       Re-probe every freeze at or past its expiry, then thaw it or leave it overdue.
  freeze     Read the freeze ledger: time-boxed quarantine rows, never merge approvals.
  image      The runner image, and images for projects with dependencies.
  infra      The infra queue: timeouts and harness errors, never freeze rows.
""",
    "freeze": """\
Usage: orchestrator freeze [OPTIONS] COMMAND [ARGS]...

  Read the freeze ledger: time-boxed quarantine rows, never merge approvals.

Options:
  --help  Show this message and exit.

Commands:
  list    List live freezes: id, kind, state (live or EXPIRED), expiry, owner, property or test.
  show    Print one live freeze as JSON: its record and the stored fixture bytes.
  export  Canonical JSON of all live rows, sorted, for review in a pull request.
""",
    "freeze list": """\
Usage: orchestrator freeze list [OPTIONS]

  List live freezes: id, kind, state (live or EXPIRED), expiry, owner, property or test.

  With --expired only the rows past their expiry now (what `orchestrator check` fails on).

Options:
  --expired     Only rows past their expiry now.
  --json        Print a freeze-list/1 JSON document.
  --ledger URL  The ledger: a SQLAlchemy URL, sqlite:///PATH or postgresql+psycopg://USER@HOST/DB.
                [env var: ORCHESTRATOR_LEDGER; default: (.replay/ledger.db in the current folder)]
  --help        Show this message and exit.
""",
    "infra list": """\
Usage: orchestrator infra list [OPTIONS]

  List queued infrastructure cases: labels per side, runner id, error sub-reasons.

  `replay` queues a property here when a replay timed out or ended in a harness error (lane
  infra_queue): the runner broke, not the patch, so nothing is frozen.

Options:
  --json        Print an infra-list/1 JSON document.
  --ledger URL  The ledger: a SQLAlchemy URL, sqlite:///PATH or postgresql+psycopg://USER@HOST/DB.
                [env var: ORCHESTRATOR_LEDGER; default: (.replay/ledger.db in the current folder)]
  --help        Show this message and exit.
""",
    "check": """\
Usage: orchestrator check [OPTIONS]

  Exit 1 listing every live freeze past its expiry (with owners), else exit 0.

  Each expired freeze found also appends an OVERDUE event to the ledger's log, so the weekly tally
  counts freezes that outlived their expiry. Meant for CI (see docs/ci/thaw.yml): a freeze is a time
  box, and this is where the box closes.

Options:
  --json        Print a freeze-check/1 JSON document.
  --ledger URL  The ledger: a SQLAlchemy URL, sqlite:///PATH or postgresql+psycopg://USER@HOST/DB.
                [env var: ORCHESTRATOR_LEDGER; default: (.replay/ledger.db in the current folder)]
  --help        Show this message and exit.
""",
}


@pytest.mark.parametrize("path", list(PAGES), ids=lambda path: path or "root")
def test_the_help_is_as_it_was(path: str) -> None:
    assert output(build_command(), [*path.split(), "--help"]) == (0, PAGES[path])


def test_no_arguments_print_the_roots_help() -> None:
    assert output(build_command(), []) == (2, PAGES[""])


def typer_reference() -> click.Command:
    """Typer's own conversion of every Typer-declared command under one root."""
    app = typer.Typer(name="orchestrator", rich_markup_mode=None, add_completion=False)
    for name in COMMANDS:
        module = importlib.import_module(f"{commands.__name__}.{name}")
        if hasattr(module, "register"):
            module.register(app)
    documents = typer.Typer(rich_markup_mode=None)
    importlib.import_module(f"{commands.__name__}._freeze_documents").register(documents)
    app.add_typer(documents, name="freeze")
    return typer.main.get_command(app)


@pytest.mark.parametrize(
    "args",
    [
        ["replay", "--help"],
        ["tally", "--help"],
        ["image", "--help"],
        ["image", "runner", "--help"],
        ["freeze", "show", "--help"],
        ["freeze", "export", "--help"],
    ],
)
def test_a_typer_declared_commands_help_is_typers_own(args: list[str]) -> None:
    assert output(build_command(), args) == output(typer_reference(), args)


def first_paragraph(text: str | None) -> str:
    return " ".join(inspect.cleandoc(text or "").partition("\f")[0].partition("\n\n")[0].split())


def test_the_tables_agree_with_the_commands_own_help() -> None:
    modules = {m.name for m in pkgutil.iter_modules(commands.__path__) if m.name[0] != "_"}
    assert set(COMMANDS) == modules
    groups: list[click.Group] = [build_command()]
    while groups:
        group = groups.pop()
        assert isinstance(group, LazyGroup)
        ctx = click.Context(group)
        for name, (_, text) in group.entries.items():
            command = group.get_command(ctx, name)
            assert command is not None
            assert first_paragraph(text) == first_paragraph(command.help), name
            if isinstance(command, LazyGroup):
                groups.append(command)


def test_a_command_is_loaded_only_when_asked_for() -> None:
    root = build_command()
    assert isinstance(root, LazyGroup)
    ctx = root.make_context("orchestrator", ["--help"], resilient_parsing=True)
    assert root.list_commands(ctx) == list(COMMANDS)
    assert root.built == {}
    assert root.get_command(ctx, "freeze") is not None
    assert list(root.built) == ["freeze"]
    assert root.get_command(ctx, "no-such-command") is None


def ledger_options() -> tuple[click.Command, click.Command]:
    """``freeze list`` (plain Click) and ``freeze show`` (Typer's ``LedgerOption``)."""
    root = build_command()
    assert isinstance(root, click.Group)
    freeze = root.get_command(click.Context(root), "freeze")
    assert isinstance(freeze, click.Group)
    ctx = click.Context(freeze)
    listing, show = freeze.get_command(ctx, "list"), freeze.get_command(ctx, "show")
    assert listing is not None
    assert show is not None
    return listing, show


def test_the_click_ledger_option_is_the_typer_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    listing, show = ledger_options()
    (plain,) = (p for p in listing.params if p.name == "ledger")
    (typed,) = (p for p in show.params if p.name == "ledger")
    assert isinstance(plain, click.Option)
    assert isinstance(typed, click.Option)
    assert plain.get_help_record(click.Context(listing)) == typed.get_help_record(
        click.Context(show)
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV_VAR, raising=False)
    for env, args in [
        (None, []),
        (None, ["--ledger", ""]),
        (None, ["--ledger", "sqlite:///x.db"]),
        ("", []),
        ("sqlite:///from-env.db", []),
        ("sqlite:///from-env.db", ["--ledger", "sqlite:///x.db"]),
    ]:
        if env is None:
            monkeypatch.delenv(ENV_VAR, raising=False)
        else:
            monkeypatch.setenv(ENV_VAR, env)
        from_plain = listing.make_context("list", list(args)).params["ledger"]
        from_typed = show.make_context("show", ["1", *args]).params["ledger"]
        assert from_plain == from_typed, (env, args)
