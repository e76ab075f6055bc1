"""Text from the tree under test, made safe to print. Pure.

Node ids, assertion messages, reasons and labels come from a tree nobody has reviewed
(pytest's own id escaping can be switched off by the tree's ini file). Printed raw, an
ESC or OSC sequence recolours or clears the reviewer's terminal or retitles its window, a
BEL rings, a CR overwrites what was printed, a newline forges a row of a table, a line of
a CI log or a GitHub workflow command, and a bidi override shows a name other than the one
that runs. :func:`terminal_safe` writes every such character as a visible escape:

- C0 controls (U+0000-U+001F: ESC, BEL, CR, LF, TAB...), DEL and C1 controls
  (U+0080-U+009F) as ``\\n``, ``\\r``, ``\\t`` or ``\\xNN``;
- bidi embeddings, overrides, isolates and marks (U+202A-U+202E, U+2066-U+2069, U+200E,
  U+200F, U+061C), the line and paragraph separators (U+2028, U+2029) and lone
  surrogates (which no terminal can encode) as ``\\uNNNN``;
- invisible characters, which let one name pass for another: Unicode's format
  characters (category Cf: zero-width space and joiners, word joiner, byte order mark,
  soft hyphen, tag characters U+E0000-U+E007F...) and the rest of its default-ignorable
  code points (variation selectors, Hangul fillers, U+E0080-U+E0FFF) as ``\\uNNNN`` or
  ``\\UNNNNNNNN``;
- a leading ``::`` (blanks before it aside) as ``\\x3a:``: printed at the start of a line
  of a GitHub Actions log (a table's first cell), it would be a workflow command the
  tree wrote (``::stop-commands::``, ``::add-mask::``, a forged ``::error``);
- ``##[`` anywhere in the text as ``#\\x23[``: the runner also reads the older command
  syntax (``##[add-mask]``, ``##[set-output name=x]``, ``##[error]``) at any position of
  a line.

Everything else is kept as it is, backslashes too: a node id with nothing to escape prints
as itself (it can be copied into ``--property``), and an escaped one reads as pytest's own
escaping would show it. So two ids that differ only in one holding ``\\x1b`` where the
other holds an ESC print alike; ``--json`` output keeps every value exactly.
"""

from __future__ import annotations

import re

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Invisible characters: Unicode's format characters (Cf) and default-ignorable code points
# (DerivedCoreProperties), as ranges wide enough for the Unicode versions to come.
_INVISIBLE = (
    "\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u115f\u1160"
    "\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164"
    "\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff{_INVISIBLE}]")
# The runner's older command syntax, read anywhere in a line.
_OLD_COMMAND = "##["
_OLD_COMMAND_ESCAPED = "#\\x23["


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def terminal_safe(text: str) -> str:
    """``text`` on one line with no character a terminal, a log or a table would act on:
    each such character written as a visible escape (the rest unchanged)."""
    safe = text if UNSAFE.search(text) is None else UNSAFE.sub(_escape, text)
    if _OLD_COMMAND in safe:
        safe = safe.replace(_OLD_COMMAND, _OLD_COMMAND_ESCAPED)
    blanks = len(safe) - len(safe.lstrip())  # the runner trims every Unicode blank
    if safe.startswith("::", blanks):
        return f"{safe[:blanks]}\\x3a{safe[blanks + 1 :]}"
    return safe


# In JSON text, C0 controls inside strings are escaped already and the line breaks left
# are the layout's: everything else of UNSAFE is escaped the JSON way.
_JSON_UNSAFE = re.compile(f"[\x7f-\x9f\u2028\u2029\ud800-\udfff{_INVISIBLE}]")


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_terminal_safe(text: str) -> str:
    """JSON text (``json.dumps``'s, any layout) that decodes to the same value, with the
    characters :func:`terminal_safe` escapes inside its strings written as ``\\uNNNN``
    escapes and ``##[`` as ``#\\u0023[``: what ``--json`` prints and JSON log lines keep
    every value exactly, and still start no workflow command in a CI log."""
    safe = text if _JSON_UNSAFE.search(text) is None else _JSON_UNSAFE.sub(_json_escape, text)
    return safe.replace(_OLD_COMMAND, "#\\u0023[") if _OLD_COMMAND in safe else safe


def terminal_safe_lines(text: str) -> str:
    """Like :func:`terminal_safe`, but the line breaks (``\\n``) of a text meant to hold
    several lines (an assertion's message) are kept."""
    return "\n".join(terminal_safe(line) for line in text.split("\n"))


_UNSAFE_BYTES = bytes(range(0x20)).replace(b"\n", b"").replace(b"\t", b"") + b"\x7f"
_BYTE_ESCAPES = {byte: f"\\x{byte:02x}".encode("ascii") for byte in _UNSAFE_BYTES}


def terminal_safe_bytes(data: bytes) -> bytes:
    """A chunk of a process's output (read as it comes, so a character may be cut in two)
    with every C0 control but newline and tab, and DEL, as a visible ``\\xNN``: no ESC,
    OSC, BEL or CR reaches the terminal. Bytes of UTF-8 multibyte characters (0x80 and
    above) are left as they are, so a cut character is never broken further."""
    if not any(byte in _BYTE_ESCAPES for byte in data):
        return data
    return b"".join(_BYTE_ESCAPES.get(byte, bytes((byte,))) for byte in data)


_BLANK_BYTES = frozenset(b" \t")
_COLON, _HASH, _BRACKET, _NEWLINE = 0x3A, 0x23, 0x5B, 0x0A


class CommandGuard:
    """A process's output, as it comes, with no line a GitHub Actions runner would read as
    a workflow command: a line whose first bytes after blanks are ``::`` has its first
    colon written ``\\x3a``, and ``##[`` anywhere has its second ``#`` written ``\\x23``.
    Only what may begin such a command is held (a colon at the start of a line, one or
    two ``#`` at the end of a chunk) until the next bytes decide; everything else passes
    at once, so pytest's progress still shows live. Control bytes are escaped as by
    :func:`terminal_safe_bytes`. Pure: bytes in, bytes out."""

    def __init__(self) -> None:
        self._line_start = True  # only blanks (or bytes of non-ASCII characters) so far
        self._held = b""  # b":" at the start of a line, or b"#" / b"##"

    def feed(self, data: bytes) -> bytes:
        if not self._line_start and not self._held and b"\n" not in data and b"#" not in data:
            return terminal_safe_bytes(data)
        out = bytearray()
        for byte in data:
            if self._held and self._decide(byte, out):
                continue
            if byte == _COLON and self._line_start:
                self._held = b":"
                continue
            if byte == _HASH:
                self._line_start = False
                self._held = b"#"
                continue
            if self._line_start and byte not in _BLANK_BYTES and byte < 0x80:
                self._line_start = False
            out.append(byte)
            if byte == _NEWLINE:
                self._line_start = True
        return terminal_safe_bytes(bytes(out))

    def _decide(self, byte: int, out: bytearray) -> bool:
        """Settle what is held with the next ``byte``; True when ``byte`` is used up."""
        held, self._held = self._held, b""
        if held == b":":
            self._line_start = False
            if byte == _COLON:
                out += b"\\x3a:"
                return True
            out += held
            return False
        if byte == _HASH:  # b"#" becomes b"##"; of three or more, the first ones pass
            if held == b"##":
                out.append(_HASH)
            self._held = b"##"
            return True
        if byte == _BRACKET and held == b"##":
            out += b"#\\x23["
            return True
        out += held
        return False

    def close(self) -> bytes:
        """What is still held at the end of the output, if anything."""
        held, self._held = self._held, b""
        return held
