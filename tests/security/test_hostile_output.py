"""A tree whose test ids and messages carry terminal control sequences, replayed for real.

The tree's own ini switches pytest's id escaping off, so its node ids reach the probe with
ESC, OSC, BEL, CR, newlines and a bidi override in them, and its assertion messages carry
the same. Nothing of it may act on a terminal or forge a row: the table, the console log,
the Markdown summary, the GitHub annotations, the JUnit XML and the HTML page carry every
such character as a visible escape, and hold exactly one row per property.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "replay"))

from replay_gitrepo import commit, init

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CLI = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "orchestrator"
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


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    root = tmp_path_factory.mktemp("hostile-ids")
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


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS")}
    return subprocess.run(
        [str(CLI), *args],
        cwd=cwd,
        env={**environment, **(env or {})},
        capture_output=True,
        timeout=600,
        check=False,
    )


def test_hostile_ids_and_messages_never_reach_a_terminal_raw(
    hostile: tuple[Path, str, str], tmp_path: Path, runner_image_id: str
) -> None:
    repo, base, patch = hostile
    out = tmp_path / "run"
    summary = tmp_path / "summary.md"
    junit = tmp_path / "junit.xml"
    html = tmp_path / "page.html"
    done = run(
        "--log-format", "console", "replay", "--repo", str(repo), "--base", base,
        "--patch", patch, "--image", runner_image_id, "--replays", "1", "--replays-all",
        "--no-record", "--out", str(out), "--summary", str(summary), "--junit", str(junit),
        "--html", str(html),
        cwd=tmp_path,
    )  # fmt: skip
    stdout, stderr = done.stdout.decode("utf-8"), done.stderr.decode("utf-8")
    assert done.returncode == 1, stderr[-3000:]  # every hostile test fails on the patch

    report = json.loads((out / "summary.json").read_text())
    decisions = report["decisions"]
    # The ids went through as the tree wrote them (--json and the run folder keep them).
    ids = {d["property_id"].partition("[")[2].removesuffix("]") for d in decisions}
    assert ids == {*HOSTILE_IDS, ""}
    assert f"{COMMAND_FOLDER}/test_c.py::test_command" in {d["property_id"] for d in decisions}

    for name, text in (("stdout", stdout), ("stderr", stderr)):
        assert unsafe(text) == [], name
    rows = [line for line in stdout.splitlines() if "test_hostile[" in line]
    assert len(rows) == len(HOSTILE_IDS)  # one row per property, none forged
    assert not any(line.lstrip().startswith(FORGED) for line in stdout.splitlines())
    assert not any(line.lstrip().startswith("::") for line in stdout.splitlines())
    assert "\\x3a:stop-commands::pwned/test_c.py::test_command" in stdout
    assert "\\x1b[2J\\x1b[31mred" in stdout  # shown, as a visible escape

    markdown = summary.read_text(encoding="utf-8")
    assert unsafe(markdown) == []
    import cmarkgfm  # GitHub's own Markdown library: what the job summary shows

    rendered = cmarkgfm.github_flavored_markdown_to_html(markdown)
    assert "<a " not in rendered
    assert "<img" not in rendered
    table_rows = [line for line in markdown.splitlines() if "test_hostile[" in line]
    assert len(table_rows) == len(HOSTILE_IDS)
    assert all(line.startswith("| ") for line in table_rows)
    assert not any(line.lstrip().startswith("::") for line in markdown.splitlines())

    xml_text = junit.read_text(encoding="utf-8")
    assert unsafe(xml_text) == []
    cases = ET.fromstring(xml_text).findall(".//testcase")
    assert len(cases) == len(HOSTILE_IDS) + 1
    for case in cases:
        system_out = case.findtext("system-out") or ""
        assert sum(line.startswith("property: ") for line in system_out.splitlines()) == 1

    page = html.read_text(encoding="utf-8")
    assert unsafe(page) == []

    # reproduce streams pytest's own output live: the test printed workflow commands.
    bell = next(d["property_id"] for d in decisions if d["property_id"].endswith("[bell\x07]"))
    again = run("reproduce", str(out), bell, "--side", "patch", cwd=tmp_path)
    streamed = again.stdout.decode("utf-8")
    assert "add-mask" in streamed, again.stderr.decode()[-2000:]
    assert unsafe(streamed) == []
    assert not any(line.lstrip().startswith("::") for line in streamed.splitlines())

    annotated = run("report", str(out), "--annotations", cwd=tmp_path)
    lines = annotated.stdout.decode("utf-8").splitlines()
    assert unsafe(annotated.stdout.decode("utf-8")) == []
    assert len(lines) == len(HOSTILE_IDS) + 1  # one per blocking property, no other command
    assert all(line.startswith("::error ") for line in lines)


def test_in_ci_the_json_logs_and_documents_keep_every_value_and_start_no_command(
    hostile: tuple[Path, str, str], tmp_path: Path, runner_image_id: str
) -> None:
    """With CI set, log lines are JSON and ``--json`` prints the report: both decode to
    the ids exactly as the tree wrote them, yet no line of either holds ``##[`` or a raw
    invisible or control character a CI log or a terminal would act on."""
    repo, base, patch = hostile
    done = run(
        "replay", "--repo", str(repo), "--base", base, "--patch", patch,
        "--image", runner_image_id, "--replays", "1", "--replays-all", "--no-record",
        "--out", str(tmp_path / "run"), "--json",
        cwd=tmp_path, env={"CI": "true"},
    )  # fmt: skip
    stdout, stderr = done.stdout.decode("utf-8"), done.stderr.decode("utf-8")
    assert done.returncode == 1, stderr[-3000:]
    for name, text in (("stdout", stdout), ("stderr", stderr)):
        assert unsafe(text) == [], name
    report = json.loads(stdout)
    ids = {d["property_id"].partition("[")[2].removesuffix("]") for d in report["decisions"]}
    assert ids == {*HOSTILE_IDS, ""}
    logged = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert logged, stderr[-2000:]
