"""The command line's shared surface: usage errors, shared options, help, tables, file modes.

Through ``orchestrator.cli.main`` (what the console script runs) or the installed entry
point in a subprocess where the process umask matters.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from orchestrator.cli import build_command, main
from orchestrator.commands._table import Column, print_table


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as stopped:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(stopped.value.code or 0), out, err


def all_commands() -> Iterator[tuple[str, click.Command]]:
    """Every leaf command, as its path after ``orchestrator`` ("freeze list", ...)."""
    root = build_command()
    assert isinstance(root, click.Group)
    groups: list[tuple[str, click.Group]] = [("", root)]
    while groups:
        prefix, group = groups.pop()
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            assert command is not None
            path = f"{prefix} {name}".strip()
            if isinstance(command, click.Group):
                groups.append((path, command))
            else:
                yield path, command


def options_named(name: str) -> list[tuple[str, click.Option]]:
    return [
        (path, param)
        for path, command in all_commands()
        for param in command.params
        if isinstance(param, click.Option) and name in param.opts
    ]


# --- usage errors: one line naming the problem, then where the help is -------------------

REPLAY = ("replay", "--repo", ".", "--base", "a", "--patch", "b", "--image", "i")


@pytest.mark.parametrize(
    ("argv", "problem", "help_of"),
    [
        (("replay", "--repo", "."), "missing option '--base'", "replay"),
        ((*REPLAY, "--isolation", "bad"), "invalid value for '--isolation': 'bad'", "replay"),
        (("tally", "--weeks", "abc"), "invalid value for '--weeks': 'abc'", "tally"),
        (("freeze", "list", "--bogus"), "no such option '--bogus'", "freeze list"),
        (("classify",), "missing argument 'EVIDENCE'", "classify"),
        (("digest", "a.json", "b.json"), "got unexpected extra argument (b.json)", "digest"),
        (("no-such-command",), "no such command 'no-such-command'", ""),
        ((*REPLAY, "--timeout", "nan"), "invalid value for '--timeout': 'nan'", "replay"),
        (("thaw", "--timeout", "inf"), "invalid value for '--timeout': 'inf'", "thaw"),
        (("accept", "--timeout", "-inf"), "invalid value for '--timeout': '-inf'", "accept"),
        (("budget", "--timeout", "0.05"), "invalid value for '--timeout': '0.05'", "budget"),
        (("thaw", "--timeout", "soon"), "invalid value for '--timeout': 'soon'", "thaw"),
    ],
)
def test_a_usage_error_is_one_line_and_a_pointer_to_help(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    argv: tuple[str, ...],
    problem: str,
    help_of: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ORCHESTRATOR_LEDGER", raising=False)
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    first, *rest = err.splitlines()
    assert first.startswith("orchestrator: error: ")
    assert problem in first
    assert rest == [f"Try '{' '.join(['orchestrator', *help_of.split()])} --help' for help."]
    assert list(tmp_path.iterdir()) == []  # nothing written, not even the default ledger


def test_the_timeout_message_is_the_same_everywhere(capsys: pytest.CaptureFixture[str]) -> None:
    problems = set()
    for command in ("thaw", "accept", "budget"):
        for value in ("nan", "0", "1e308"):
            _, _, err = run(capsys, command, "--timeout", value)
            problems.add(err.splitlines()[0].replace(repr(value), "VALUE"))
    assert problems == {
        "orchestrator: error: invalid value for '--timeout': VALUE is not a number of "
        "seconds (from 0.1 to 86400)"
    }


def test_a_bare_group_prints_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "freeze")
    assert code == 2
    assert "Usage: orchestrator freeze" in out + err
    assert "list" in out + err


# --- shared options -----------------------------------------------------------------------


def test_ledger_is_one_option_read_from_the_environment_everywhere() -> None:
    found = options_named("--ledger")
    assert {path for path, _ in found} >= {
        "replay", "accept", "admit", "budget", "check", "tally", "thaw",
        "freeze list", "freeze show", "freeze export", "infra list",
    }  # fmt: skip
    assert {(o.help, o.envvar, o.show_envvar, o.metavar) for _, o in found} == {
        (found[0][1].help, "ORCHESTRATOR_LEDGER", True, "URL")
    }


@pytest.mark.parametrize("name", ["--timeout", "--image"])
def test_timeout_and_image_are_one_option_each(name: str) -> None:
    found = options_named(name)
    assert len(found) >= 4
    assert len({option.help for _, option in found}) == 1
    assert len({option.metavar for _, option in found}) == 1


def test_ledger_help_names_the_variable_and_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check", "--help")
    assert code == 0
    flat = " ".join(out.split())
    assert "env var: ORCHESTRATOR_LEDGER" in flat
    assert ".replay/ledger.db in the current folder" in flat


def test_ledger_from_the_environment_then_the_option(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    from_env, from_option = tmp_path / "env.db", tmp_path / "option.db"
    monkeypatch.setenv("ORCHESTRATOR_LEDGER", f"sqlite:///{from_env}")
    assert run(capsys, "infra", "list", "--ledger", f"sqlite:///{from_option}")[0] == 0
    assert (from_option.exists(), from_env.exists()) == (True, False)
    assert run(capsys, "infra", "list")[0] == 0
    assert from_env.exists()
    assert not (tmp_path / ".replay").exists()
    # Empty means unset, in the variable as on the command line: the embedded default.
    monkeypatch.setenv("ORCHESTRATOR_LEDGER", "")
    assert run(capsys, "infra", "list", "--ledger", "")[0] == 0
    assert (tmp_path / ".replay" / "ledger.db").exists()


# --- help ---------------------------------------------------------------------------------


def test_every_command_explains_itself_its_arguments_and_every_option() -> None:
    for path, command in all_commands():
        text = command.help or ""
        assert len(text.split()) >= 8, path
        for param in command.params:
            if isinstance(param, click.Option):
                assert param.help, f"{path} {param.opts[0]}"
            else:  # an argument is named in the command's text, which says what it is
                assert f"{param.metavar} is " in text, f"{path} {param.metavar}"


def test_every_help_page_prints(capsys: pytest.CaptureFixture[str]) -> None:
    for path, _ in all_commands():
        code, out, _ = run(capsys, *path.split(), "--help")
        assert code == 0, path
        assert out.startswith(f"Usage: orchestrator {path} "), path


# --- tables ---------------------------------------------------------------------------------


def test_a_table_off_a_terminal_is_plain_whole_and_one_line_per_row(
    capsys: pytest.CaptureFixture[str],
) -> None:
    long_id = "tests/" + "deep/" * 40 + "test_x.py::TestClass::test_case[payload-a-b]"
    print_table(
        [Column(heading="property"), Column(heading="n", justify="right"), Column(heading="x")],
        [(long_id, "7", "[bold]kept[/bold]"), ("short", "12", "-")],
    )
    lines = capsys.readouterr().out.splitlines()
    assert [line.split() for line in lines] == [
        ["property", "n", "x"],
        [long_id, "7", "[bold]kept[/bold]"],
        ["short", "12", "-"],
    ]
    assert all("\x1b" not in line and line == line.rstrip() for line in lines)
    assert lines[1].index(" 7") + 1 == lines[2].index("12") + 1  # numbers right-aligned


# --- file modes -----------------------------------------------------------------------------

PROPERTY = "def no_a(payload):\n    assert 'a' not in payload\n"


def entry_point(cwd: Path, umask: int, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *argv],
        cwd=cwd,
        umask=umask,
        capture_output=True,
        text=True,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "ORCHESTRATOR_LEDGER"},
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(("umask", "expected"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_files_written_for_the_user_follow_the_umask(
    tmp_path: Path, umask: int, expected: int
) -> None:
    (tmp_path / "mode_props.py").write_text(PROPERTY)
    (tmp_path / "payload.json").write_text(json.dumps({"a": [1, 2], "b": "c"}))
    done = entry_point(
        tmp_path, umask, "shrink", "payload.json", "--property", "mode_props:no_a",
        "--path", str(tmp_path), "--out", "min.json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert list(json.loads((tmp_path / "min.json").read_text())) == ["a"]
    done = entry_point(tmp_path, umask, "freeze", "export", "--out", "review/freezes.json")
    assert done.returncode == 0, done.stderr
    assert (mode(tmp_path / "min.json"), mode(tmp_path / "review" / "freezes.json")) == (
        expected,
        expected,
    )
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".min")) == []


def test_probe_results_are_readable_by_the_host_whatever_the_umask(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from orchestrator.probe.atomic import write_bytes_atomic, write_json_atomic\n"
        "write_json_atomic(sys.argv[1] + '/result.json', {'schema': 'x'})\n"
        "write_bytes_atomic(sys.argv[1] + '/user.bin', b'x', mode=None)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], umask=0o077, capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert mode(tmp_path / "result.json") == 0o644
    assert mode(tmp_path / "user.bin") == 0o600
