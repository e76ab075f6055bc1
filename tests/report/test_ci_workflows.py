"""The example CI workflows in docs/ci/ call the CLI with options it has.

Every `orchestrator ...` command line in a workflow's `run:` steps is parsed by the
real command (click's own parser, nothing run), so a renamed or dropped option breaks
this test, not a user's CI.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from orchestrator.cli import build_command

DOCS_CI = Path(__file__).resolve().parents[2] / "docs" / "ci"
SHELL_ENDS = {">", ">>", "||", "&&", ";", "|"}


def gitlab_defaults(text: str) -> dict[str, str]:
    """The values of a GitLab file's top-level `variables:` (one `NAME: "value"` a line)."""
    block = re.search(r"^variables:\n((?:  .*\n|\s*\n)+)", text, re.MULTILINE)
    assert block is not None
    return dict(re.findall(r'^  ([A-Z_]+): "([^"]*)"', block.group(1), re.MULTILINE))


def command_lines(workflow: Path) -> list[list[str]]:
    """The argument lists of each `.venv/bin/orchestrator` call in the workflow: GitHub's
    expressions as EXPR, a GitLab file's variables as their defaults (CI's own as named)."""
    text = workflow.read_text(encoding="utf-8").replace("\\\n", " ")
    text = re.sub(r"\$\{\{[^}]*\}\}", "EXPR", text)  # GitHub's expressions
    if workflow.name.startswith("gitlab"):
        defaults = gitlab_defaults(text)
        text = re.sub(r"\$([A-Z_]+)", lambda m: defaults.get(m.group(1), m.group(0)), text)
    calls = []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue  # a comment that names the tool
        _, found, rest = line.partition(".venv/bin/orchestrator ")
        if not found:
            continue
        words = shlex.split(rest, comments=True)
        for index, word in enumerate(words):
            if word in SHELL_ENDS:
                words = words[:index]
                break
        calls.append(words)
    return calls


def parse(words: list[str]) -> click.Context:
    command: click.Command | None = build_command()
    words = list(words)
    while isinstance(command, click.Group):
        name = words.pop(0)
        command = command.get_command(click.Context(command), name)
    assert command is not None
    return command.make_context(name, words)


@pytest.mark.parametrize("workflow", ["replay.yml", "thaw.yml", "gitlab-ci.yml"])
def test_every_orchestrator_call_in_the_workflow_parses(workflow: str) -> None:
    calls = command_lines(DOCS_CI / workflow)
    assert calls, f"no orchestrator call found in {workflow}"
    for words in calls:
        parse(words)  # raises click.UsageError on an unknown option or a bad value


def test_the_replay_workflow_reports_where_reviewers_look() -> None:
    calls = {words[0]: words for words in command_lines(DOCS_CI / "replay.yml")}
    report = parse(calls["report"]).params
    assert str(report["summary"]) == "$GITHUB_STEP_SUMMARY"
    assert report["annotations"] is True
    assert report["html"] is not None
    assert report["junit"] is not None
    assert [str(d) for d in report["run_dirs"]] == [str(parse(calls["merge"]).params["out"])]
    text = (DOCS_CI / "replay.yml").read_text(encoding="utf-8")
    assert "actions/upload-artifact" in text
    assert "junit.xml" in text.split("actions/upload-artifact")[-1]


def test_the_replay_workflow_is_a_matrix_of_shards_merged_into_one_verdict() -> None:
    text = (DOCS_CI / "replay.yml").read_text(encoding="utf-8")
    matrix = re.search(r"matrix:\s*\n\s*shard: \[([0-9, ]+)\]", text)
    assert matrix is not None
    shards = [int(n) for n in matrix.group(1).split(",")]
    assert shards == list(range(1, len(shards) + 1))
    calls = {words[0]: words for words in command_lines(DOCS_CI / "replay.yml")}
    replay = parse(calls["replay"]).params
    assert replay["shard"] == f"EXPR/{len(shards)}"  # I/N with N the matrix's size
    assert replay["run_id"] is not None  # a re-run job records nothing twice
    # Each shard's run folder under a name of its own (artifacts v4 refuses duplicates).
    assert "name: replay-shard-${{ matrix.shard }}" in text
    assert "needs: shard" in text
    assert "pattern: replay-shard-*" in text
    merge = parse(calls["merge"]).params
    assert [str(d) for d in merge["run_dirs"]] == ["shards/replay-shard-*"]


def test_the_test_jobs_quarantine_what_a_live_freeze_covers() -> None:
    """GitHub's and GitLab's test jobs load the plugin, name a source, and keep the JUnit
    file (in GitLab, the merge request's test report)."""
    github = (DOCS_CI / "replay.yml").read_text(encoding="utf-8")
    assert "ORCHESTRATOR_QUARANTINE: ${{ secrets.ORCHESTRATOR_LEDGER }}" in github
    assert ".venv/bin/python -m pytest -p orchestrator.quarantine --junitxml=junit-tests.xml" in (
        github
    )
    gitlab = (DOCS_CI / "gitlab-ci.yml").read_text(encoding="utf-8")
    tests_job = gitlab.split("\ntests:\n")[1].split("\n\n")[0]
    assert "${ORCHESTRATOR_QUARANTINE:-${ORCHESTRATOR_LEDGER:-}}" in tests_job
    assert "-m pytest -p orchestrator.quarantine --junitxml=junit-tests.xml" in tests_job
    assert "junit: junit-tests.xml" in tests_job


def test_the_gitlab_pipeline_shards_merges_reports_and_thaws_on_schedule() -> None:
    text = (DOCS_CI / "gitlab-ci.yml").read_text(encoding="utf-8")
    jobs = dict(re.findall(r"^([a-z]+):\n((?:  .*\n|\n)+)", text, re.MULTILINE))
    assert {"tests", "replay", "merge", "thaw"} <= jobs.keys()
    calls = {words[0]: words for words in command_lines(DOCS_CI / "gitlab-ci.yml")}
    replay = parse(calls["replay"]).params
    assert "parallel: 3" in jobs["replay"]
    assert replay["shard"] == "$CI_NODE_INDEX/$CI_NODE_TOTAL"  # I/N from GitLab's parallel:
    assert replay["run_id"] == "$CI_PIPELINE_ID-shard-$CI_NODE_INDEX"
    assert replay["base"] == "$CI_MERGE_REQUEST_DIFF_BASE_SHA"
    assert replay["out"] is not None
    assert str(replay["out"]) == "replay-shard-$CI_NODE_INDEX"
    assert "paths: [replay-shard-$CI_NODE_INDEX/]" in jobs["replay"]
    assert "needs: [replay]" in jobs["merge"]
    assert "when: always" in jobs["merge"]
    merge = parse(calls["merge"]).params
    assert [str(d) for d in merge["run_dirs"]] == ["replay-shard-*"]
    report = parse(calls["report"]).params
    assert [str(d) for d in report["run_dirs"]] == [str(merge["out"])]
    assert str(report["junit"]) == "junit.xml"
    assert "reports:\n      junit: junit.xml" in jobs["merge"]
    assert 'exit "$status"' in jobs["merge"]  # the verdict is the job's exit status
    assert '$CI_PIPELINE_SOURCE == "schedule"' in jobs["thaw"]
    assert {"thaw", "check", "freeze"} <= calls.keys()
    assert "paths: [thaw-report.json, freezes.json]" in jobs["thaw"]
