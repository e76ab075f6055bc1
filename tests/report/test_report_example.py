"""Reports of real runs of the bundled example: annotations at real lines, valid JUnit,
and replay's --html/--junit/--summary writing what `report` writes."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import xmlschema
from example_runs import CLI, RUNS, replay_args
from junitparser import JUnitXml
from support.cli import stored_records

from fixtures.build_example import ExampleRepo, git

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ANNOTATION = re.compile(r"^::(error|warning) (?P<fields>[^:]*)::(?P<message>.*)$")


def report(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), "report", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_annotations_point_at_the_failing_assertion_in_the_patch(
    example: tuple[ExampleRepo, list[Path]],
) -> None:
    repo, outs = example
    pointed = 0
    for out in outs:
        run_log = json.loads((out / "run-log.json").read_text())
        done = report(str(out), env={"GITHUB_ACTIONS": "true"})
        assert done.returncode == 0, done.stderr
        lanes = [record["decision"]["lane"] for record in stored_records(out)]
        lines = done.stdout.splitlines()
        blocking = {"property_regression", "block_patch", "different_bug", "reject_run"}
        assert sum(line.startswith("::error ") for line in lines) == sum(
            lane in blocking for lane in lanes
        )
        for line in lines:
            match = ANNOTATION.match(line)
            assert match is not None, line
            fields = dict(field.split("=", 1) for field in match.group("fields").split(","))
            if "line" not in fields:
                continue
            source = git(repo.path, "show", f"{run_log['patch_rev']}:{fields['file']}")
            statement = source.splitlines()[int(fields["line"]) - 1].strip()
            assert statement.startswith("assert "), (line, statement)
            pointed += 1
    assert pointed >= 2  # test_clock_budget's and test_id_is_trimmed's assertions at least


def test_junit_of_real_runs_validates_and_reads_back(
    example: tuple[ExampleRepo, list[Path]], tmp_path: Path, junit_xsd: Path
) -> None:
    _, outs = example
    junit = tmp_path / "junit.xml"
    done = report(*map(str, outs), "--junit", str(junit))
    assert done.returncode == 0, done.stderr
    xmlschema.XMLSchema(junit_xsd).validate(str(junit))
    suites = list(JUnitXml.fromfile(str(junit)))
    assert [suite.tests for suite in suites] == [len(run.properties) for run in RUNS]
    for suite, out in zip(suites, outs, strict=True):
        run_id = json.loads((out / "summary.json").read_text())["run_id"]
        assert suite.name == f"orchestrator replay {run_id}"
        assert {case.classname for case in suite} <= {
            "tests.test_budget", "tests.test_trim", "tests.test_flaky", "tests.test_drafts"
        }  # fmt: skip


def test_replay_writes_the_same_reports_after_the_run(
    example: tuple[ExampleRepo, list[Path]], tmp_path: Path, junit_xsd: Path
) -> None:
    repo, _ = example
    run = RUNS[-1]  # fix-trim-id: quick, non-blocking
    out = tmp_path / "run"
    page, junit, summary = tmp_path / "page.html", tmp_path / "junit.xml", tmp_path / "summary.md"
    summary.write_text("before\n", encoding="utf-8")
    extra = ("--html", str(page), "--junit", str(junit), "--summary", str(summary))
    done = subprocess.run(
        replay_args(repo, run, out, extra),
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "CI": "1"},
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["schema"] == "replay-report/2"  # --json output untouched
    assert f"html: {page}" in done.stderr
    xmlschema.XMLSchema(junit_xsd).validate(str(junit))
    assert summary.read_text(encoding="utf-8").startswith("before\n## Replay: no blocking lane")
    assert report(str(out), "--html", str(page.with_name("page2.html"))).returncode == 0
    assert page.read_text() == page.with_name("page2.html").read_text()


def test_the_example_script_writes_the_page_and_prints_its_path(
    runner_image_id: str, tmp_path: Path
) -> None:
    """What `make replay` runs: every scenario, then one page of all its run folders."""
    out = tmp_path / "example"
    done = subprocess.run(
        [str(CLI.parents[2] / "scripts" / "replay-example")],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "REPLAY_EXAMPLE_OUT": str(out), "ORCHESTRATOR": str(CLI)},
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    page = out / "report.html"
    assert f"report: {page}" in done.stdout.splitlines()
    text = page.read_text(encoding="utf-8")
    folders = sorted(p.parent for p in out.glob("runs/*/summary.json"))
    assert len(folders) == 4
    decided = sum(len(json.loads((f / "summary.json").read_text())["decisions"]) for f in folders)
    assert text.count('<article class="prop"') == decided
