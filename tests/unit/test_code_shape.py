"""The package stays readable in pieces: no module over 700 lines, no function body over
100 (a Typer command's option declarations are its signature and are not counted)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "orchestrator"
MAX_MODULE_LINES = 700
MAX_BODY_LINES = 100
SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts)


def body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the end of the function."""
    body = node.body
    if (
        len(body) > 1
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    last = body[-1].end_lineno or body[-1].lineno
    return last - body[0].lineno + 1


def long_functions(source: str) -> list[str]:
    return [
        f"{node.name} (line {node.lineno}): {body_lines(node)} lines"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and body_lines(node) > MAX_BODY_LINES
    ]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_and_functions_fit(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert len(source.splitlines()) <= MAX_MODULE_LINES
    assert long_functions(source) == []


def test_the_measure_sees_a_long_body() -> None:
    """A generated function of 101 statements is too long; the docstring is not counted."""
    lines = ["def f():", '    """Doc."""', *(f"    x{i} = {i}" for i in range(101))]
    assert long_functions("\n".join(lines)) == ["f (line 1): 101 lines"]
    assert long_functions("\n".join(lines[:-1])) == []
