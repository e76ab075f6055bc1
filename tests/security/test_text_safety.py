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
     "\u202e", "\u2066", "\u2069", "\u2028", "\u2029", "\u200f", "\ud800", "\u200b", "\u200d",
     "\u2060", "\ufeff", "\U000e0000", "\U000e0041", "\U000e007f", "\u00ad", "\ufe0f", "##[",
     "::", "#", "["]
)  # fmt: skip
texts = st.text() | st.lists(st.text(max_size=5) | HOSTILE, max_size=12).map("".join)


# Unicode's default-ignorable code points that are not format characters (Cf): drawn
# as nothing, so a name holding one prints like a name without it
# (DerivedCoreProperties.txt, Default_Ignorable_Code_Point).
IGNORABLE_NOT_CF = (
    {0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0}
    | set(range(0x180B, 0x1810))
    | set(range(0xFE00, 0xFE10))
    | set(range(0xFFF0, 0xFFF9))
    | set(range(0xE0000, 0xE1000))
)


def unsafe_chars(text: str) -> list[str]:
    """Characters a terminal or a line-based reader acts on, or that print as nothing:
    Unicode's controls (Cc), its line and paragraph separators, its format characters
    (Cf: bidi formatting, zero-width characters, tags...), the other default-ignorable
    code points, and surrogates."""
    return [
        char
        for char in text
        if unicodedata.category(char) in ("Cc", "Zl", "Zp", "Cs", "Cf")
        or ord(char) in IGNORABLE_NOT_CF
    ]


@given(text=texts)
def test_the_output_holds_no_control_character_and_is_one_line(text):
    safe = terminal_safe(text)
    assert unsafe_chars(safe) == []
    assert len(safe.splitlines()) <= 1
    safe.encode("utf-8")  # printable on any UTF-8 terminal: no lone surrogate


@given(
    text=st.text().filter(
        lambda t: UNSAFE.search(t) is None and not t.lstrip().startswith("::") and "##[" not in t
    )
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


def test_every_format_character_of_this_python_is_escaped():
    """The escaped ranges cover every Cf character of the Unicode version this Python
    knows, and every other default-ignorable code point."""
    missed = [
        hex(code)
        for code in range(0x110000)
        if (unicodedata.category(chr(code)) == "Cf" or code in IGNORABLE_NOT_CF)
        and UNSAFE.fullmatch(chr(code)) is None
    ]
    assert missed == []


def test_zero_width_and_tag_characters_cannot_spoof_a_name():
    spoofed = "tests/t.py::test_ok\u200b\u200d\u2060\ufeff\U000e0041\U000e007f"
    assert terminal_safe(spoofed) == (
        "tests/t.py::test_ok\\u200b\\u200d\\u2060\\ufeff\\U000e0041\\U000e007f"
    )
    assert terminal_safe("a\u200bb") != terminal_safe("ab")


@given(text=texts)
def test_no_output_holds_the_runners_older_command_syntax(text):
    assert "##[" not in terminal_safe(text)


def test_an_older_workflow_command_anywhere_is_shown_not_run():
    for command in ("##[add-mask]s3cret", "##[stop-commands]tok", "##[error file=x]y",
                    "##[set-output name=a;]b"):  # fmt: skip
        assert terminal_safe(f"tests/t.py::t[{command}]") == (
            "tests/t.py::t[" + command.replace("##[", "#\\x23[", 1) + "]"
        )
    assert terminal_safe("###[x]") == "##\\x23[x]"
    assert terminal_safe("# [ ## [") == "# [ ## ["


@given(
    data=st.lists(
        st.sampled_from([b"#", b"##", b"[", b"##[", b"x", b"\n", b":", b" "]), max_size=20
    ).map(b"".join),
    cuts=st.lists(st.integers(min_value=0, max_value=80), max_size=6),
)
def test_a_streamed_output_holds_no_older_command_however_it_is_cut(data, cuts):
    text = b"ok ##[add-mask]x\n" + data + b"##[error]y ##"
    guard = CommandGuard()
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    out = b"".join(guard.feed(text[a:b]) for a, b in itertools.pairwise(bounds)) + guard.close()
    assert b"##[" not in out
    restored = out.replace(b"#\\x23[", b"##[").replace(b"\\x3a:", b"::")
    assert restored == terminal_safe_bytes(text)


def test_a_streamed_hash_that_starts_no_command_is_kept():
    guard = CommandGuard()
    assert guard.feed(b"# ok ##") + guard.feed(b"#") + guard.feed(b" x") + guard.close() == (
        b"# ok ### x"
    )
    assert guard.feed(b"end #") + guard.close() == b"end #"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)


@given(value=json_values, indent=st.sampled_from([None, 2]))
def test_printed_json_decodes_to_the_same_value_and_holds_nothing_unsafe(value, indent):
    import json

    from orchestrator.core.text_safety import json_terminal_safe

    text = json.dumps(value, ensure_ascii=False, indent=indent)
    safe = json_terminal_safe(text)
    assert json.loads(safe) == value
    assert "##[" not in safe
    assert [char for char in unsafe_chars(safe) if char != "\n"] == []
    safe.encode("utf-8")
