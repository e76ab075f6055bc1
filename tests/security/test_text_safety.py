"""core.text_safety: no text from the tree reaches a terminal, a log or a table raw."""

from __future__ import annotations

import itertools
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.text_safety import (
    UNSAFE,
    CommandGuard,
    terminal_safe,
    terminal_safe_bytes,
    terminal_safe_lines,
)

HOSTILE = st.sampled_from(
    ["\x1b[2J", "\x1b]0;pwned\x07", "\x07", "\r", "\n", "\t", "\x00", "\x7f", "\x85", "\x9b",
     "\u202e", "\u2066", "\u2069", "\u2028", "\u2029", "\u200f", "\ud800"]
)  # fmt: skip
texts = st.text() | st.lists(st.text(max_size=5) | HOSTILE, max_size=12).map("".join)


def unsafe_chars(text: str) -> list[str]:
    """Characters a terminal or a line-based reader acts on: Unicode's controls (Cc),
    its line and paragraph separators, bidi formatting and surrogates."""
    bidi = {"\u061c", "\u200e", "\u200f"} | {chr(c) for c in range(0x202A, 0x202F)}
    bidi |= {chr(c) for c in range(0x2066, 0x206A)}
    return [
        char
        for char in text
        if unicodedata.category(char) in ("Cc", "Zl", "Zp", "Cs") or char in bidi
    ]


@given(text=texts)
def test_the_output_holds_no_control_character_and_is_one_line(text):
    safe = terminal_safe(text)
    assert unsafe_chars(safe) == []
    assert len(safe.splitlines()) <= 1
    safe.encode("utf-8")  # printable on any UTF-8 terminal: no lone surrogate


@given(
    text=st.text().filter(lambda t: UNSAFE.search(t) is None and not t.lstrip().startswith("::"))
)
def test_text_with_nothing_to_escape_prints_as_itself(text):
    assert terminal_safe(text) == text


@given(a=texts, b=texts)
def test_distinct_texts_without_a_backslash_stay_distinct(a, b):
    if a != b and "\\" not in a + b:
        assert terminal_safe(a) != terminal_safe(b)


@given(text=texts)
def test_an_escape_says_which_character_it_was(text):
    safe = terminal_safe(text)
    if "\\" not in text:
        decoded = safe.encode("ascii", "backslashreplace").decode("unicode_escape")
        assert decoded == text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")


def test_known_sequences_are_written_as_escapes():
    assert terminal_safe("t[\x1b[31mred]\n") == "t[\\x1b[31mred]\\n"
    assert terminal_safe("a\u202eb\x07\r\t") == "a\\u202eb\\x07\\r\\t"


@given(lines=st.lists(texts.map(lambda t: t.replace("\n", "")), min_size=1, max_size=5))
def test_a_multi_line_text_keeps_only_its_line_breaks(lines):
    safe = terminal_safe_lines("\n".join(lines))
    assert safe.split("\n") == [terminal_safe(line) for line in lines]


@given(data=st.binary())
def test_a_streamed_chunk_keeps_no_control_byte_but_newline_and_tab(data):
    safe = terminal_safe_bytes(data)
    assert not any((byte < 0x20 and byte not in b"\n\t") or byte == 0x7F for byte in safe)
    assert safe.count(b"\n") == data.count(b"\n")


def test_a_streamed_escape_sequence_is_shown_not_run():
    assert terminal_safe_bytes(b"\x1b[2J\x1b]0;t\x07ok\r\n") == b"\\x1b[2J\\x1b]0;t\\x07ok\\x0d\n"


@given(head=st.text(alphabet=" \u00a0\u2003\u3000\u202f", max_size=3), rest=texts)
def test_no_output_line_starts_a_github_workflow_command(head, rest):
    for text in (f"{head}::{rest}", f"{head}::stop-commands::{rest}"):
        assert not terminal_safe(text).lstrip().startswith("::")


def test_a_workflow_command_in_a_node_id_is_shown_not_run():
    assert terminal_safe("::add-mask::x/t.py::t") == "\\x3a:add-mask::x/t.py::t"
    assert terminal_safe("tests/t.py::t") == "tests/t.py::t"


@given(
    data=st.binary(max_size=60).map(lambda b: b.replace(b"\r", b"")),
    cuts=st.lists(st.integers(min_value=0, max_value=60), max_size=6),
    head=st.sampled_from([b"", b" ", b"\t ", b"\xc2\xa0"]),
)
def test_a_streamed_output_never_starts_a_workflow_command_however_it_is_cut(data, cuts, head):
    """Each line of reproduce's streamed output, cut into chunks anywhere: no line starts
    ``::`` after its blanks, and nothing else changes but the escapes."""
    text = head + b"::stop-commands::x\n" + data + b"\n" + head + b"::error::y"
    guard = CommandGuard()
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    out = b"".join(guard.feed(text[a:b]) for a, b in itertools.pairwise(bounds)) + guard.close()
    for line in out.split(b"\n"):
        assert not line.lstrip(b" \t").lstrip("\u00a0".encode()).startswith(b"::"), out
    assert out.replace(b"\\x3a:", b"::") == terminal_safe_bytes(text).replace(b"\\x3a:", b"::")


def test_a_colon_that_starts_no_command_is_kept():
    guard = CommandGuard()
    assert guard.feed(b": ok\n") + guard.feed(b":") + guard.close() == b": ok\n:"
