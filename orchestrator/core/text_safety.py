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
- a leading ``::`` (blanks before it aside) as ``\\x3a:``: printed at the start of a line
  of a GitHub Actions log (a table's first cell), it would be a workflow command the
  tree wrote (``::stop-commands::``, ``::add-mask::``, a forged ``::error``).

Everything else is kept as it is, backslashes too: a node id with nothing to escape prints
as itself (it can be copied into ``--property``), and an escaped one reads as pytest's own
escaping would show it. So two ids that differ only in one holding ``\\x1b`` where the
other holds an ESC print alike; ``--json`` output keeps every value exactly.
"""

from __future__ import annotations

import re

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """``text`` on one line with no character a terminal, a log or a table would act on:
    each such character written as a visible escape (the rest unchanged)."""
    safe = text if UNSAFE.search(text) is None else UNSAFE.sub(_escape, text)
    blanks = len(safe) - len(safe.lstrip())  # the runner trims every Unicode blank
    if safe.startswith("::", blanks):
        return f"{safe[:blanks]}\\x3a{safe[blanks + 1 :]}"
    return safe


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


class CommandGuard:
    """A process's output, as it comes, with no line starting a GitHub Actions workflow
    command: a line whose first bytes after blanks are ``::`` has its first colon written
    ``\\x3a``. Only a colon at the start of a line is held, until the next byte decides;
    everything else passes at once, so pytest's progress still shows live. Control bytes
    are escaped as by :func:`terminal_safe_bytes`. Pure: bytes in, bytes out."""

    def __init__(self) -> None:
        self._line_start = True  # only blanks (or bytes of non-ASCII characters) so far
        self._colon = False  # a colon held at the start of a line

    def feed(self, data: bytes) -> bytes:
        if not self._line_start and not self._colon and b"\n" not in data:
            return terminal_safe_bytes(data)
        out = bytearray()
        for byte in data:
            if self._colon:
                self._colon = False
                self._line_start = False
                if byte == 0x3A:
                    out += b"\\x3a:"
                    continue
                out.append(0x3A)
            if self._line_start:
                if byte == 0x3A:
                    self._colon = True
                    continue
                if byte not in _BLANK_BYTES and byte < 0x80:
                    self._line_start = False
            out.append(byte)
            if byte == 0x0A:
                self._line_start = True
        return terminal_safe_bytes(bytes(out))

    def close(self) -> bytes:
        """The colon still held at the end of the output, if any."""
        held, self._colon = self._colon, False
        return b":" if held else b""
