"""Indented JSON, the text ``json.dumps(document, indent=2, sort_keys=True,
ensure_ascii=False)`` gives, about twice as fast. Pure.

With ``indent`` the standard library encodes in Python, a generator per container; a run
folder of a whole suite is thousands of such documents (evidence, decisions, a summary of
megabytes). Here one recursive writer takes the plain types (``str``, ``int``, ``float``,
``bool``, ``None``, ``dict`` with ``str`` keys, ``list``, ``tuple``, and subclasses of
``str``, ``int`` and ``float`` such as the model's enums) and strings are escaped by the
standard library's C function; anything else (a non-string key, a ``dict`` or ``list``
subclass, an object the encoder refuses, a cycle) is handed whole to ``json.dumps``, so the
text and the errors are always the standard library's.
"""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring  # the C escaper when _json is there
from typing import Any

_INFINITY = float("inf")


class _Unusual(Exception):
    """Something only ``json.dumps`` should decide."""


def indented(document: Any) -> str:
    """``json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)``."""
    out: list[str] = []
    try:
        _write(document, 0, out.append, {})
    except (_Unusual, RecursionError):
        return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)
    return "".join(out)


def _write(value: Any, level: int, write: Any, separators: dict[int, str]) -> None:
    kind = type(value)
    if kind is str:
        write(encode_basestring(value))
    elif kind is dict or kind is list or kind is tuple:
        if not value:
            write("{}" if kind is dict else "[]")
            return
        separator = separators.get(level)
        if separator is None:  # ",\n" and the indent of this level's items
            separator = separators[level] = ",\n" + "  " * (level + 1)
        if kind is dict:
            try:
                items = sorted(value.items())
            except TypeError:  # keys of mixed types: json.dumps says so
                raise _Unusual from None
            write("{" + separator[1:])
            for index, (key, item) in enumerate(items):
                if type(key) is not str:
                    raise _Unusual
                if index:
                    write(separator)
                write(encode_basestring(key))
                write(": ")
                _write(item, level + 1, write, separators)
            write("\n" + "  " * level + "}")
        else:
            write("[" + separator[1:])
            for index, item in enumerate(value):
                if index:
                    write(separator)
                _write(item, level + 1, write, separators)
            write("\n" + "  " * level + "]")
    elif value is None:
        write("null")
    elif value is True:
        write("true")
    elif value is False:
        write("false")
    elif isinstance(value, str):
        write(encode_basestring(value))
    elif isinstance(value, int):
        write(int.__repr__(value))
    elif isinstance(value, float):
        if math.isnan(value):
            write("NaN")
        elif value == _INFINITY:
            write("Infinity")
        elif value == -_INFINITY:
            write("-Infinity")
        else:
            write(float.__repr__(value))
    else:
        raise _Unusual
