"""The oracle's text of a syntax tree: ``ast.dump(node)`` as Python 3.11 prints it
(fields named, no positions, no indent), about twice as fast, and the same on every
Python version (3.13's ``ast.dump`` leaves out empty lists and ``None`` fields, which
would change every digest). Pure.

The format, field by field as ``ast.dump`` 3.11 writes it: ``Name(field=value, ...)``;
a field missing on the node is left out, and so is a ``None`` value whose class default is
``None`` (an optional field); lists as ``[a, b]``; anything else by its ``repr``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

# Per node class: its fields, each with whether a None value there is left out; for a
# class without fields (``Load``, ``Add``...), its whole text.
_Layout = tuple[tuple[str, bool], ...] | str
_LAYOUTS: dict[type, _Layout] = {}


def _layout(cls: type[ast.AST]) -> _Layout:
    fields = tuple((name, getattr(cls, name, ...) is None) for name in cls._fields)
    layout: _Layout = fields if fields else f"{cls.__name__}()"
    _LAYOUTS[cls] = layout
    return layout


def dump(node: ast.AST) -> str:
    """``ast.dump(node, annotate_fields=True, include_attributes=False)`` of Python 3.11."""
    out: list[str] = []
    _write(node, out.append)
    return "".join(out)


def _write(value: object, write: Callable[[str], object]) -> None:
    cls = type(value)
    if cls is list and isinstance(value, list):
        write("[")
        for index, item in enumerate(value):
            if index:
                write(", ")
            _write(item, write)
        write("]")
        return
    layout = _LAYOUTS.get(cls)
    if layout is None:
        if not isinstance(value, ast.AST):
            write(repr(value))
            return
        layout = _layout(type(value))
    if isinstance(layout, str):
        write(layout)
        return
    write(cls.__name__)
    write("(")
    first = True
    for name, optional in layout:
        try:
            field = getattr(value, name)
        except AttributeError:
            continue
        if field is None and optional:
            continue
        if not first:
            write(", ")
        first = False
        write(name)
        write("=")
        _write(field, write)
    write(")")
