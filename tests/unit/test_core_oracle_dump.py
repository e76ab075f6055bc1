"""The oracle's dump (``core/oracle/dump.py``) is ``ast.dump``'s text, character for
character: every oracle digest (in evidence, in the ledger, compared by thaw) is made of it.
Checked on real source (the standard library's and the package's own) and on generated
statements (Hypothesis), with the optional fields (``None``), empty lists and string kinds
that ``ast.dump`` treats apart."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.core.oracle.dump import dump

# 3.13's ast.dump leaves out empty lists unless asked; the oracle keeps 3.11's text.
KEEP_EMPTY = {"show_empty": True} if sys.version_info >= (3, 13) else {}
PACKAGE = Path(__file__).resolve().parents[2] / "orchestrator"
STDLIB = Path(ast.__file__).parent


def reference(node: ast.AST) -> str:
    return ast.dump(node, annotate_fields=True, include_attributes=False, **KEEP_EMPTY)


SOURCES = [
    *(STDLIB / name for name in ("ast.py", "typing.py", "dataclasses.py", "asyncio/tasks.py")),
    *sorted((PACKAGE / "core").rglob("*.py")),
]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_every_node_of_real_source_dumps_as_ast_dump(path: Path) -> None:
    tree = ast.parse(path.read_bytes())
    assert dump(tree) == reference(tree)
    for node in ast.walk(tree):
        assert dump(node) == reference(node)


NAMES = st.sampled_from(["x", "y", "self", "_a", "ünï"])
LITERALS = st.one_of(
    st.integers(), st.floats(allow_nan=False), st.complex_numbers(allow_nan=False),
    st.text(max_size=5), st.binary(max_size=5), st.booleans(), st.none(),
    st.just(...),
).map(repr)  # fmt: skip


# Expression forms around one or two smaller expressions ({0}, {1}).
OF_TWO = [
    "({0} + {1})", "({0} if {1} else {0})", "{0}({1}, *{1}, k={0}, **{1})", "{0}[{1}:{0}:]",
    "[{0} for x in {1} if x]", "{{{0}: {1}, **{0}}}",
]  # fmt: skip
OF_ONE = [
    "(lambda a, /, b=1, *c, d, e=2, **f: {0})", "(not {0})", "({0}).attr.sub", "(y := {0})",
    "({0},)", "{{{0}}}",
]  # fmt: skip


def expressions() -> st.SearchStrategy[str]:
    leaves = st.one_of(NAMES, LITERALS, st.just("u'kind'"), st.just("f'{x!r:>{y}}'"))

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        two = st.tuples(inner, inner)
        return st.one_of(
            *(two.map(lambda pair, form=form: form.format(*pair)) for form in OF_TWO),
            *(inner.map(lambda one, form=form: form.format(one)) for form in OF_ONE),
        )

    return st.recursive(leaves, extend, max_leaves=8)


STATEMENTS = [
    "return", "return {e}", "raise", "raise {e} from {e}", "x: int", "x: int = {e}",
    "x += {e}", "del x", "assert {e}", "assert {e}, {e}", "global x", "pass",
    "import a.b as c", "from . import x", "from .. m import (y as z)", "yield", "x = yield {e}",
    "def f(a: int = {e}, *, b) -> {e}:\n    return {e}",
    "@dec({e})\nasync def f():\n    await {e}\n    async with {e} as y, z:\n        pass",
    "class C({e}, metaclass=M):\n    '''doc'''\n    x = {e}",
    "for x in {e}:\n    continue\nelse:\n    break",
    "while {e}:\n    pass",
    "try:\n    pass\nexcept E as e:\n    raise\nexcept:\n    pass\nelse:\n    pass\n"
    "finally:\n    pass",
    "try:\n    pass\nexcept* E:\n    pass",
    "with {e}:\n    pass",
    "match {e}:\n    case [1, *rest] if {e}:\n        pass\n    case {{'k': v, **kw}}:\n"
    "        pass\n    case C(a, b=2) | None:\n        pass\n    case _:\n        pass",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(STATEMENTS), expressions(), expressions())
def test_generated_statements_dump_as_ast_dump(statement: str, one: str, other: str) -> None:
    source = statement.replace("{e}", one, 1).replace("{e}", other)
    if "yield" in source or "return" in source or "await" in source:
        source = "async def g():\n" + "".join(f"    {line}\n" for line in source.splitlines())
    if "yield" in source:
        source = source.replace("async def g", "def g").replace("await", "yield")
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return  # a combination the grammar refuses (a lambda as a subscript target, ...)
    for node in ast.walk(tree):
        assert dump(node) == reference(node)


def walked_references(node: ast.AST) -> tuple[set[str], set[str], set[str], set[str]]:
    """What an item refers to, by ``ast.walk``: the plain reading the analysis's stack
    walk must match."""
    from orchestrator.core.oracle.analysis import dotted_parts

    names: set[str] = set()
    attributes: set[str] = set()
    fixtures: set[str] = set()
    dotted: set[str] = set()
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name) and not isinstance(inner.ctx, ast.Store):
            names.add(inner.id)
        elif isinstance(inner, ast.Global | ast.Nonlocal):
            names.update(inner.names)
        elif isinstance(inner, ast.Attribute):
            attributes.add(inner.attr)
            parts = dotted_parts(inner)
            if parts is not None:
                dotted.add(".".join(parts))
        elif isinstance(inner, ast.Constant) and isinstance(inner.value, str):
            fixtures.update(part.strip() for part in inner.value.split(","))
    return names, attributes, fixtures, dotted


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_references_are_what_ast_walk_finds(path: Path) -> None:
    from orchestrator.core.oracle.analysis import Item
    from orchestrator.core.oracle.model import ReasonKind

    tree = ast.parse(path.read_bytes())
    for index, node in enumerate(ast.walk(tree)):
        if not isinstance(node, ast.stmt):
            continue
        item = Item(key=(ReasonKind.HELPER, str(index)), node=node, order=(index, 0, 0))
        found = item.references
        assert (set(found.names), set(found.attributes), set(found.fixtures),
                set(found.dotted)) == walked_references(node)  # fmt: skip
