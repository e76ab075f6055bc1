"""A hostile tree whose test ids and messages carry terminal control sequences, the
runner's ``##[`` commands, invisible characters and Markdown links: its own ini switches
pytest's id escaping off, so the ids reach the probe as the tree wrote them. Every test
passes at the base and fails at the patch."""

from __future__ import annotations

import sys
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "replay"))

from support.scratch_git import commit, init

FORGED = "forged"
# Each a parametrize id: clear screen and red, a window title (OSC ... BEL), a bell, a
# carriage return over the line, a newline that would print a table row of its own, a
# right-to-left override, a C1 CSI, a DEL.
HOSTILE_IDS = [
    "\x1b[2J\x1b[31mred",
    "\x1b]0;pwned\x07",
    "bell\x07",
    "over\rwrite",
    f"row\n{FORGED}  P  P  -  no_freeze  not_reproduced",
    "\u202eevil",
    "c1\x9bcsi",
    "del\x7f",
    # The runner's older command syntax, read anywhere in a line of a CI log.
    "x ##[add-mask]s3cret",
    "##[stop-commands]tok",
    "y ##[error file=a.py]forged",
    # Invisible characters that make one name pass for another.
    "zero\u200bwidth\u200d\u2060\ufeff",
    "tag\U000e0041\U000e007f",
    # Markdown that would link or load an image in the job summary.
    "[click](https://evil.example/x)",
    "![img](https://evil.example/p.png) www.evil.example a@evil.example",
]
# A folder whose node ids start with a GitHub workflow command: a table row starting with
# it would stop every later annotation of the step, or forge one.
COMMAND_FOLDER = "::stop-commands::pwned"
COMMAND_TEST = "import lib\n\n\ndef test_command():\n    assert lib.ok()\n"
INI = """\
[pytest]
disable_test_id_escaping_and_forfeit_all_rights_to_community_support = true
"""
TESTS = f"""\
import pytest

import lib

IDS = {HOSTILE_IDS!r}


@pytest.mark.parametrize("value", IDS, ids=IDS)
def test_hostile(value):
    print("::add-mask::x1 ##[add-mask]x2\\n##[stop-commands]x3 " + value)
    assert lib.ok(), "message \\x1b[31m with ESC\\nand a newline\\r\\x07 " + value
"""


def hostile_ids_repo(root: Path) -> tuple[Path, str, str]:
    """(repository, base, patch)."""
    repo = init(root / "repo")
    files = {
        "pytest.ini": INI,
        "lib.py": "def ok():\n    return True\n",
        "tests/test_t.py": TESTS,
        f"{COMMAND_FOLDER}/test_c.py": COMMAND_TEST,
    }
    base = commit(repo, files, "base")
    patch = commit(repo, {"lib.py": "def ok():\n    return False\n"}, "patch")
    return repo, base, patch


def unsafe(text: str) -> list[str]:
    """Characters a terminal, a log reader or a line splitter acts on, or that print as
    nothing (a newline aside), and the runner's ``##[`` command syntax."""
    found = {
        char
        for char in text
        if char != "\n"
        and (
            unicodedata.category(char) in ("Cc", "Zl", "Zp", "Cs", "Cf")
            or 0xE0000 <= ord(char) <= 0xE0FFF
        )
    }
    return sorted(found | ({"##["} if "##[" in text else set()))
