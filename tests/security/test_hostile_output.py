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
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostile_output import COMMAND_FOLDER, FORGED, HOSTILE_IDS, hostile_ids_repo, unsafe

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CLI = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "orchestrator"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    return hostile_ids_repo(tmp_path_factory.mktemp("hostile-ids"))


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
