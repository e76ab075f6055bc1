"""Each option is declared once, and a command is a short list of option groups.

Every ``typer.Option``/``typer.Argument`` (and plain Click option) is declared in one of
the declaration modules; no two declarations spell the same flag with the same help; a
command takes option groups (``commands/_grouped.py``), so no command function has more
than 8 parameters or 60 lines; ``ReplayOptions`` is built from the groups by name, every
field of it from a group or named where it is built.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated

import click
import pytest
import typer

from orchestrator.commands import _option_groups as groups
from orchestrator.commands._grouped import Variant, grouped, take, values_for
from orchestrator.core.replay_run import ReplayOptions

COMMANDS = Path(__file__).resolve().parents[2] / "orchestrator" / "commands"
DECLARATIONS = {"_options.py", "_command_options.py", "_ledger_option.py"}
DECLARING = {("typer", "Option"), ("typer", "Argument"), ("click", "option"), ("click", "argument")}
MAX_PARAMETERS = 8
MAX_LINES = 60

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_code_shape import body_lines  # noqa: E402


def declarations(path: Path) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and (node.func.value.id, node.func.attr) in DECLARING
    ]


@pytest.mark.parametrize("path", sorted(COMMANDS.glob("*.py")), ids=lambda p: p.name)
def test_no_option_is_declared_in_a_command_module(path: Path) -> None:
    if path.name in DECLARATIONS:
        return
    found = [f"line {call.lineno}" for call in declarations(path)]
    assert not found, f"{path.name} declares options: {found} (declare them in _options.py)"


def test_no_flag_is_declared_twice_alike() -> None:
    """Two declarations of one flag differ in what they say (``--repo`` of the commands
    that replay a revision is not ``reproduce --repo``); the same flag with the same help
    and metavar twice is one option declared twice (but for the plain-Click ``--ledger``
    of the read commands, which shares the Typer one's words)."""
    seen: dict[tuple[str, str, str], int] = {}
    for name in sorted(DECLARATIONS):
        for call in declarations(COMMANDS / name):
            flags = [a.value for a in call.args if isinstance(a, ast.Constant)]
            said = sorted(ast.unparse(k) for k in call.keywords if k.arg in ("help", "metavar"))
            kind = ast.unparse(call.func.value)
            for flag in flags:
                if isinstance(flag, str) and flag.startswith("-"):
                    key = (kind, flag, " ".join(said))
                    seen[key] = seen.get(key, 0) + 1
    assert {key: count for key, count in seen.items() if count > 1} == {}


def command_functions() -> list[tuple[str, ast.FunctionDef]]:
    found = []
    for path in sorted(COMMANDS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef):
                found.append((f"{path.name}::{node.name}", node))
    return found


@pytest.mark.parametrize(
    ("name", "node"), command_functions(), ids=[name for name, _ in command_functions()]
)
def test_every_function_of_the_commands_is_short(name: str, node: ast.FunctionDef) -> None:
    arguments = node.args
    count = len(arguments.posonlyargs) + len(arguments.args) + len(arguments.kwonlyargs)
    assert count <= MAX_PARAMETERS, f"{name}: {count} parameters (take option groups)"
    assert body_lines(node) <= MAX_LINES, f"{name}: {body_lines(node)} lines"


# --- the groups, spread into Typer's options --------------------------------------------

Names = Annotated[tuple[str, ...], typer.Option("--name", help="A name (repeatable).")]
Count = Annotated[int | None, typer.Option("--count", help="How many.")]
OtherCount = Annotated[int | None, typer.Option("--count", help="How many others.")]


@dataclass(frozen=True, kw_only=True)
class Example:
    names: Names = ()
    count: Count = None
    hidden: str = "not an option"


def build(command: object) -> click.Command:
    app = typer.Typer()
    app.command()(command)
    app.command("other")(lambda: None)  # two commands: the first is a subcommand
    group = typer.main.get_command(app)
    assert isinstance(group, click.Group)
    found = group.get_command(click.Context(group), command.__name__)  # type: ignore[attr-defined]
    assert found is not None
    return found


def test_a_group_becomes_its_options_and_comes_back_as_a_value() -> None:
    got: list[Example] = []

    @grouped
    def example(*, example: Example) -> None:
        got.append(example)

    command = build(example)
    assert sorted(p.opts[0] for p in command.params) == ["--count", "--name"]
    command.main(["--name", "a", "--name", "b", "--count", "3"], standalone_mode=False)
    command.main([], standalone_mode=False)
    assert got == [Example(names=("a", "b"), count=3), Example()]


def test_a_command_takes_some_fields_with_its_own_variant() -> None:
    got: list[Example] = []

    @grouped
    def variant(*, example: Annotated[Example, take(count=Variant(OtherCount, 7))]) -> None:
        got.append(example)

    command = build(variant)
    (option,) = command.params
    assert (option.opts, option.help, option.default) == (["--count"], "How many others.", 7)
    command.main([], standalone_mode=False)
    assert got == [Example(count=7)]


def test_an_option_named_twice_is_refused_when_the_command_is_declared() -> None:
    def twice(*, first: Example, second: Example) -> None: ...

    with pytest.raises(TypeError, match="named twice"):
        grouped(twice)


def test_replay_options_come_from_the_groups_by_name() -> None:
    arguments = groups.ReplayArguments(
        selection=groups.Selection(repo=Path("/r"), base="a", patch="b", command="pytest -q",
                                   property_ids=("t.py::t",), shard="1/2"),
        oracle=groups.Oracle(tests_from="patch", test_paths=("tests/data",)),
        fixture=groups.FixtureAndShrink(seed=7),
        scheduling=groups.Scheduling(replays=9, jobs=2, engines=("unix:///e",), slots=3,
                                     false_block_rate=0.5, evidence_cap=30),
        limits=groups.Limits(timeout_s=12.0, env=("A=1=2",), pythonpath=("src",),
                             writable_tree=True),
        recording=groups.Recording(ledger="sqlite://", run_id="r1"),
        outputs=groups.Outputs(out=Path("/o")),
    )  # fmt: skip
    options = arguments.replay_options("image:1")
    assert (options.repo, options.base, options.property_ids, options.image) == (
        Path("/r"), "a", ("t.py::t",), "image:1",
    )  # fmt: skip
    assert (options.replays, options.jobs, options.engines, options.slots) == (
        9, 2, ("unix:///e",), 3,
    )  # fmt: skip
    assert (options.false_block_rate, options.evidence_cap, options.seed) == (0.5, 30, 7)
    assert (options.timeout_s, options.env, options.pythonpath) == (12.0, (("A", "1=2"),), ("src",))
    assert (options.tests_from, options.test_paths, options.writable_tree) == (
        "patch", ("tests/data",), True,
    )  # fmt: skip
    assert (options.run_id, options.out, options.runner_id) == ("r1", Path("/o"), "local")
    assert options.shard is not None


def test_a_field_of_the_target_in_no_group_is_a_mistake_not_a_default() -> None:
    @dataclass(frozen=True, kw_only=True)
    class Target:
        count: int | None = None
        missing: str = "default"

    with pytest.raises(TypeError, match=r"Target\.missing: in no group"):
        values_for(Target, Example())
    assert values_for(Target, Example(count=2), missing="given") == {
        "count": 2,
        "missing": "given",
    }
    assert {field.name for field in fields(ReplayOptions)}  # the dataclass the test guards
