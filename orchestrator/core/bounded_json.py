"""JSON that came from a container, parsed within bounds. Pure.

Every JSON document a container hands back (a replay file, ``collected.json``, the
results reader's report, a serve-mode result line) is written by, or can be forged by,
the tree under test. ``json.loads`` on such bytes can fail in ways its callers do not
expect: deep nesting raises ``RecursionError`` (or leaves a document that recursion on
the host trips over later), a long integer literal raises ``ValueError`` (Python's limit
on the digits of an int), ``1e999`` becomes infinity and ``NaN`` a float that equals
nothing. :func:`loads` refuses all of those with :class:`JsonRefused` (a ``ValueError``)
before or while parsing, and otherwise returns exactly what ``json.loads`` would:

- nesting deeper than :data:`MAX_DEPTH` arrays and objects;
- a number literal with a run of more than :data:`MAX_DIGITS` digits, and one that is
  not finite as a float (``1e999``);
- ``NaN``, ``Infinity`` and ``-Infinity`` (never written by the probe);
- bytes that are not UTF-8, and text that is not JSON.

The checks run at C speed: string literals are cut out with ``bytes.split``, every
byte but the brackets deleted with ``bytes.translate``, and the depth found by
removing innermost pairs, one level per pass (a valid document has balanced brackets
outside its strings). Nothing here recurses, so no input can exhaust the stack.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any, Final

MAX_DEPTH: Final = 64
MAX_DIGITS: Final = 64

_LONG_NUMBER: Final = re.compile(rb"[0-9]{%d}" % (MAX_DIGITS + 1))
_ALL_BYTES: Final = bytes(range(256))
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")
# Both kinds of bracket as one: a document whose kinds do not match is not JSON, which
# the parser says; the depth does not depend on the kind.
_ONE_KIND: Final = bytes.maketrans(b"[]{}", b"()()")


class JsonRefused(ValueError):
    """The document is not JSON, or is JSON outside the bounds; the message says which."""


def depth_of(data: bytes) -> int | None:
    """The nesting depth of arrays and objects in ``data`` (bytes of JSON text), or None
    when its brackets outside string literals do not balance (it is not JSON). Counting
    stops past :data:`MAX_DEPTH` (then ``MAX_DEPTH + 1``)."""
    return _depth(_outside_strings(data))


# Split a slice at a time: a whole suite's result holds millions of string literals, and
# splitting all of it at once would hold a small object for each.
_SLICE: Final = 1 << 20


def _outside_strings(data: bytes) -> bytes:
    """``data`` without its string literals (bytes.replace and split: C speed). Escaped
    backslashes go first, then escaped quotes; every quote left opens or closes one (a
    slice that ends inside a literal hands that on to the next)."""
    unescaped = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    if len(unescaped) <= _SLICE:
        return b"".join(unescaped.split(b'"')[::2])
    kept: list[bytes] = []
    inside = False
    for start in range(0, len(unescaped), _SLICE):
        pieces = unescaped[start : start + _SLICE].split(b'"')
        kept.append(b"".join(pieces[1 if inside else 0 :: 2]))
        inside ^= len(pieces) % 2 == 0  # an odd count of quotes in the slice
    return b"".join(kept)


def _depth(stripped: bytes) -> int | None:
    brackets = stripped.translate(_ALL_BYTES, _NOT_BRACKETS).translate(_ONE_KIND)
    depth = 0
    while brackets:
        if depth > MAX_DEPTH:
            return depth
        shorter = brackets.replace(b"()", b"")
        if len(shorter) == len(brackets):
            return None  # an opening bracket never closed, or the reverse
        brackets = shorter
        depth += 1
    return depth


def _refuse_constant(name: str) -> Any:
    raise JsonRefused(f"{name} is not a number this tool accepts")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonRefused(f"the number {text[:40]} is too large")
    return value


def loads(
    data: bytes | str, *, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None
) -> Any:
    """``json.loads(data)`` for a document within the bounds (the module docstring says
    which); :class:`JsonRefused` for anything else. Never raises anything else for any
    input. ``object_pairs_hook`` is handed to ``json.loads`` (it makes each object)."""
    if isinstance(data, str):
        try:
            raw = data.encode("utf-8")
        except UnicodeEncodeError as error:  # a lone surrogate
            raise JsonRefused("not UTF-8 text") from error
    else:
        raw = data
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise JsonRefused(f"not UTF-8 ({error.reason} at byte {error.start})") from None
    stripped = _outside_strings(raw)
    if _LONG_NUMBER.search(stripped):
        raise JsonRefused(f"a number longer than {MAX_DIGITS} digits")
    depth = _depth(stripped)
    if depth is None:
        raise JsonRefused("not JSON: its brackets do not balance")
    if depth > MAX_DEPTH:
        raise JsonRefused(f"nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(
            text,
            parse_float=_finite_float,
            parse_constant=_refuse_constant,
            object_pairs_hook=object_pairs_hook,
        )
    except JsonRefused:
        raise
    except (ValueError, RecursionError, MemoryError) as error:
        # JSONDecodeError is a ValueError; the others cannot happen within the bounds,
        # but a refusal is what any failure of an untrusted document must be.
        raise JsonRefused(f"not JSON: {error}") from None
