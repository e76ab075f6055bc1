"""Every command function stays small: the option groups carry the options (each declared
once, commands/_option_groups.py) and the services do the work, so a command reads as
what it asks and what it prints."""

from __future__ import annotations

import ast
from pathlib import Path

COMMANDS = Path(__file__).resolve().parents[2] / "orchestrator" / "commands"
MAX_LINES = 60  # of code: the docstring is the command's --help, as long as it needs
MAX_PARAMETERS = 8


def _functions() -> list[tuple[str, ast.FunctionDef]]:
    found = []
    for path in sorted(COMMANDS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef):
                found.append((f"{path.name}:{node.lineno} {node.name}", node))
    return found


def _code_lines(node: ast.FunctionDef) -> int:
    body = node.body
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        body = body[1:]
    if not body:
        return 0
    return (body[-1].end_lineno or body[-1].lineno) - body[0].lineno + 1


def _parameters(node: ast.FunctionDef) -> int:
    arguments = node.args
    return len(arguments.posonlyargs) + len(arguments.args) + len(arguments.kwonlyargs)


def test_the_commands_are_found() -> None:
    names = {node.name for _, node in _functions()}
    assert {"replay", "reproduce", "shrink", "accept", "thaw", "merge", "report"} <= names


def test_no_command_function_is_over_60_lines_of_code() -> None:
    long = [(where, _code_lines(node)) for where, node in _functions()]
    assert [item for item in long if item[1] > MAX_LINES] == []


def test_no_command_function_takes_more_than_8_parameters() -> None:
    wide = [(where, _parameters(node)) for where, node in _functions()]
    assert [item for item in wide if item[1] > MAX_PARAMETERS] == []
