"""`orchestrator report` through the real CLI entry point, on generated run folders."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from junitparser import Error, Failure, JUnitXml
from report_factories import make_run_folder, node_id

from orchestrator.cli import main
from orchestrator.core.reports.markdown import GITHUB_SUMMARY_LIMIT
from orchestrator.services.property_store import StoreRead


class Run:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)

    def run(*argv: str) -> Run:
        with pytest.raises(SystemExit) as stopped:
            main(list(argv))
        captured = capsys.readouterr()
        return Run(int(stopped.value.code or 0), captured.out, captured.err)

    return run


def assert_refused(run: Run, fragment: str) -> None:
    assert run.code == 2, run.err
    assert run.err.startswith("orchestrator: error: ")
    assert fragment in run.err
    assert len(run.err.strip().splitlines()) == 1
    assert run.out == ""


def lanes_of(folder: Path) -> list[str]:
    """Each property's lane, in the run's order: from the run's store, or from
    decision-1.json, decision-2.json, ... in a folder of an earlier version."""
    if (folder / "properties.jsonl.gz").exists():
        return [record["decision"]["lane"] for record in StoreRead(folder).records()]
    count = len(list(folder.glob("decision-*.json")))
    return [
        json.loads((folder / f"decision-{n}.json").read_text())["lane"] for n in range(1, count + 1)
    ]


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-40])


@pytest.fixture
def run_folder(tmp_path: Path) -> Path:
    return make_run_folder(tmp_path / "runs" / "a", properties=42)


def test_without_options_the_page_goes_into_the_run_folder(cli: Any, run_folder: Path) -> None:
    run = cli("report", str(run_folder))
    page = run_folder / "report.html"
    assert run.code == 0
    assert run.out == f"html: {page}\n"
    text = page.read_text(encoding="utf-8")
    assert text.count('<article class="prop"') == 42
    assert 'href="raw/base/replay-001.json"' in text
    assert sorted(p.name for p in run_folder.glob(".report.html*")) == []  # no temporary left


def test_a_page_elsewhere_links_back_into_the_folders(
    cli: Any, run_folder: Path, tmp_path: Path
) -> None:
    other = make_run_folder(tmp_path / "runs" / "b", properties=3, run_id="run-b")
    page = tmp_path / "site" / "page.html"
    assert cli("report", str(run_folder), str(other), "--html", str(page)).code == 0
    text = page.read_text(encoding="utf-8")
    for href in set(re.findall(r'href="([^"#]+)"', text)) - {"data:,"}:
        assert (page.parent / href).resolve().is_file(), href
    assert 'href="../runs/b/raw/patch/replay-003.json"' in text


@pytest.mark.parametrize(
    ("break_it", "fragment"),
    [
        (lambda d: (d / "summary.json").unlink(), "no summary.json"),
        (lambda d: (d / "INCOMPLETE").write_text(""), "marked incomplete"),
        (
            lambda d: (d / "run-log.json").write_text(json.dumps({"incomplete": True})),
            "marked incomplete",
        ),
        (lambda d: (d / "properties.jsonl.gz").unlink(), "properties.jsonl.gz: no such file"),
        (lambda d: _truncate(d / "properties.jsonl.gz"), "properties.jsonl.gz: cannot read"),
        (
            lambda d: (d / "properties.jsonl.gz").write_bytes(b"not gzip"),
            "properties.jsonl.gz: cannot read",
        ),
        (lambda d: (d / "summary.json").write_text("{"), "summary.json: not JSON"),
        (
            lambda d: (d / "summary.json").write_text('{"schema": "replay-evidence/1"}'),
            "expected a replay-report/2 or replay-report/1 document",
        ),
    ],
)
def test_a_folder_that_is_not_a_finished_run_is_refused_by_name(
    cli: Any, run_folder: Path, break_it: Any, fragment: str
) -> None:
    break_it(run_folder)
    run = cli("report", str(run_folder))
    assert_refused(run, fragment)
    assert str(run_folder) in run.err
    assert not (run_folder / "report.html").exists()


def test_a_folder_of_an_earlier_version_missing_a_file_is_refused_by_name(
    cli: Any, tmp_path: Path
) -> None:
    run_folder = make_run_folder(tmp_path / "runs" / "old", properties=12, version=1)
    assert cli("report", str(run_folder)).code == 0  # whole, it is read
    (run_folder / "evidence-7.json").unlink()
    run = cli("report", str(run_folder))
    assert_refused(run, "evidence-7.json is missing")
    assert str(run_folder) in run.err


MARKERS = {
    "an INCOMPLETE file": lambda d: (d / "INCOMPLETE").write_text("interrupted (SIGTERM)\n"),
    "incomplete in the run log": lambda d: _edit_run_log(d, incomplete=True),
    "status incomplete in the run log": lambda d: _edit_run_log(d, status="incomplete"),
}


def _edit_run_log(folder: Path, **fields: Any) -> None:
    path = folder / "run-log.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


@pytest.mark.parametrize("marker", list(MARKERS))
@pytest.mark.parametrize("command", ["report", "merge", "reproduce"])
def test_every_reader_of_run_folders_refuses_one_marked_incomplete_by_name(
    cli: Any, run_folder: Path, tmp_path: Path, marker: str, command: str
) -> None:
    MARKERS[marker](run_folder)
    argv = {
        "report": ["report", str(run_folder)],
        "merge": ["merge", str(run_folder), str(make_run_folder(tmp_path / "b", properties=2))],
        "reproduce": ["reproduce", str(run_folder), node_id(1)],
    }[command]
    run = cli(*argv)
    assert_refused(run, "marked incomplete")
    assert str(run_folder) in run.err


def test_nothing_is_written_when_one_of_several_folders_is_refused(
    cli: Any, run_folder: Path, tmp_path: Path
) -> None:
    half = make_run_folder(tmp_path / "runs" / "half", properties=2)
    (half / "summary.json").unlink()
    page, junit = tmp_path / "page.html", tmp_path / "junit.xml"
    run = cli("report", str(run_folder), str(half), "--html", str(page), "--junit", str(junit))
    assert_refused(run, f"{half}: no summary.json")
    assert not page.exists()
    assert not junit.exists()


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["does-not-exist"], "does-not-exist: no such run folder"),
        (["{folder}/summary.json"], "not a folder"),
        (["{folder}", "{folder}"], "named twice"),
        (["{folder}", "{other}"], "several run folders: name the page with --html FILE"),
    ],
)
def test_bad_arguments_are_one_line(
    cli: Any, run_folder: Path, tmp_path: Path, argv: list[str], fragment: str
) -> None:
    other = make_run_folder(tmp_path / "runs" / "b", properties=1)
    args = [a.format(folder=run_folder, other=other) for a in argv]
    assert_refused(cli("report", *args), fragment)


def test_markdown_on_stdout_and_paths_on_stderr(cli: Any, run_folder: Path, tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    run = cli("report", str(run_folder), "--markdown", "--junit", str(junit))
    assert run.code == 0
    assert run.out.startswith("## Replay: blocking")
    assert f"junit: {junit}" in run.err
    flagged = [lane for lane in lanes_of(run_folder) if lane != "no_freeze"]
    assert f"#### {len(flagged)} properties need a look" in run.out


def test_annotations_are_on_by_default_in_github_actions(
    cli: Any, run_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    run = cli("report", str(run_folder))
    lines = run.out.splitlines()
    lanes = lanes_of(run_folder)
    blocking = {"property_regression", "block_patch", "different_bug", "reject_run"}
    undecided = {"infra_queue", "rerun_shrink", "reject_malformed"}
    assert sum(line.startswith("::error ") for line in lines) == sum(x in blocking for x in lanes)
    assert sum(line.startswith("::warning ") for line in lines) == sum(
        x in undecided for x in lanes
    )
    assert not (run_folder / "report.html").exists()  # annotations were the output asked
    # ... and off when --markdown has stdout, so the job summary stays clean.
    assert "::error" not in cli("report", str(run_folder), "--markdown").out
    assert cli("report", str(run_folder), "--no-annotations", "--markdown").out.startswith("## ")


def test_the_job_summary_is_appended_to_what_was_there(cli: Any, run_folder: Path) -> None:
    summary = run_folder.parent / "step-summary.md"
    summary.write_text("# Earlier step\n\nsome lines\n", encoding="utf-8")
    assert cli("report", str(run_folder), "--summary", str(summary)).code == 0
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("# Earlier step\n\nsome lines\n")
    assert "## Replay: blocking" in text
    assert "not shown (size limit)" not in text


# Some 20 s for 5,000 properties end to end: the whole suite runs it; the inner loop has
# the limit on the rendering core (test_report_core) and the append above.
@pytest.mark.slow
def test_the_job_summary_keeps_what_was_there_and_stays_under_githubs_limit(
    cli: Any, tmp_path: Path
) -> None:
    # 5,000 blocking properties with long reasons: far more than 1 MiB of table.
    big = make_run_folder(
        tmp_path / "big",
        properties=5000,
        mix=("property_regression", "infra_queue"),
        reason_padding=" because" * 40,
    )
    summary = tmp_path / "step-summary.md"
    summary.write_text("# Earlier step\n\nsome lines\n", encoding="utf-8")
    assert cli("report", str(big), "--summary", str(summary)).code == 0
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("# Earlier step\n\nsome lines\n")
    assert len(text.encode()) < GITHUB_SUMMARY_LIMIT
    cut = re.search(r"and (\d+) more not shown \(size limit\)", text)
    assert cut is not None
    shown = len(re.findall(r"^\| `tests/test_mod", text, flags=re.M))
    assert shown + int(cut.group(1)) == 5000
    assert shown > 1000


def test_junit_validates_and_reads_back(
    cli: Any, run_folder: Path, tmp_path: Path, junit_schema: Any
) -> None:
    junit = tmp_path / "out" / "junit.xml"
    assert cli("report", str(run_folder), "--junit", str(junit)).code == 0
    junit_schema.validate(str(junit))
    (suite,) = list(JUnitXml.fromfile(str(junit)))
    cases = list(suite)
    lanes = lanes_of(run_folder)
    assert len(cases) == len(lanes) == suite.tests
    names = [(case.classname, case.name) for case in cases]
    assert len(set(names)) == len(names)  # never a duplicate test name
    for index, (case, lane) in enumerate(zip(cases, lanes, strict=True), start=1):
        assert case.classname == f"tests.test_mod{index // 50:03d}.TestGroup{index % 7}"
        assert case.name == node_id(index).rsplit("::", 1)[1]
        kinds = {type(result) for result in case.result}
        if lane in {"property_regression", "block_patch", "different_bug", "reject_run"}:
            assert kinds == {Failure}
            assert case.result[0].type == lane
        elif lane in {"infra_queue", "rerun_shrink", "reject_malformed"}:
            assert kinds == {Error}
        else:
            assert case.is_passed
        assert f"lane: {lane}" in (case.system_out or "")
        replays = re.findall(r"^(base|patch) replay \d+: ", case.system_out or "", flags=re.M)
        assert replays == ["base"] * 3 + ["patch"] * 3  # one line per replay, base first
    pins = {prop.name: prop.value for prop in suite.properties()}
    assert pins["base_rev"] == "1" * 40
    assert pins["patch_rev"] == "2" * 40
    assert pins["seed"] == "7"


def test_a_report_path_that_cannot_be_written_is_refused_before_writing(
    cli: Any, run_folder: Path, tmp_path: Path
) -> None:
    junit = tmp_path / "junit.xml"
    assert_refused(
        cli("report", str(run_folder), "--html", str(tmp_path), "--junit", str(junit)),
        "is a folder",
    )
    under_a_file = run_folder / "summary.json" / "page.html"
    assert_refused(
        cli("report", str(run_folder), "--junit", str(junit), "--html", str(under_a_file)),
        "cannot be written",
    )
    assert not junit.exists()


def test_replay_refuses_an_unwritable_report_path_before_anything_runs(
    cli: Any, run_folder: Path, tmp_path: Path
) -> None:
    out = tmp_path / "never"
    run = cli(
        "replay", "--repo", str(tmp_path), "--base", "main", "--patch", "HEAD",
        "--image", "orchestrator-runner:latest", "--no-record", "--out", str(out),
        "--summary", str(run_folder / "summary.json" / "step.md"),
    )  # fmt: skip
    assert_refused(run, "cannot be written")
    assert not out.exists()


def test_shards_of_either_version_merge_into_one_store_that_report_reads(
    cli: Any, tmp_path: Path
) -> None:
    selection = [node_id(n) for n in range(1, 31)]
    cut = {"count": 2, "selection": "sha256:s", "selected": 30, "partition": "sha256:p"}
    old = make_run_folder(
        tmp_path / "shard-1", properties=18, version=1, run_id="r1",
        extra_run_log={"shard": {**cut, "index": 1}},
    )  # fmt: skip
    new = make_run_folder(
        tmp_path / "shard-2", properties=12, first=19, run_id="r2",
        extra_run_log={"shard": {**cut, "index": 2}},
    )  # fmt: skip
    merged_dir = tmp_path / "merged"
    done = cli("merge", str(new), str(old), "--out", str(merged_dir), "--json")
    assert done.code in (1, 3), done.err
    document = json.loads(done.out)
    assert document["schema"] == "replay-report/2"
    assert [entry["property_id"] for entry in document["decisions"]] == selection
    assert [entry["shard"] for entry in document["decisions"]] == [1] * 18 + [2] * 12
    records = list(StoreRead(merged_dir).records())
    assert [record["entry"] for record in records] == document["decisions"]
    assert [record["evidence"]["property_id"] for record in records] == selection
    summary = json.loads((merged_dir / "summary.json").read_text())
    assert summary["properties"] == 30
    assert summary["decisions_left_out"] == sum(r["entry"]["lane"] == "no_freeze" for r in records)
    assert cli("report", str(merged_dir), "--junit", str(tmp_path / "j.xml")).code == 0
    assert (tmp_path / "j.xml").read_text().count("<testcase ") == 30


def test_a_report_of_either_version_of_a_run_says_the_same(cli: Any, tmp_path: Path) -> None:
    old = make_run_folder(tmp_path / "old", properties=42, version=1)
    new = make_run_folder(tmp_path / "new", properties=42)
    outputs = []
    for folder in (old, new):
        done = cli("report", str(folder), "--markdown", "--junit", str(folder / "j.xml"))
        assert done.code == 0, done.err
        outputs.append((done.out, (folder / "j.xml").read_text()))
    assert outputs[0] == outputs[1]
