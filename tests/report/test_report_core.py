"""The pure rendering core: run-folder documents in, HTML, Markdown, JUnit, annotations out."""

from __future__ import annotations

import base64
import hashlib
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from html.parser import HTMLParser
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiers import examples

from orchestrator.core.reports.annotations import render_annotations
from orchestrator.core.reports.html import CHUNK, render_html
from orchestrator.core.reports.junit import render_junit
from orchestrator.core.reports.markdown import render_markdown
from orchestrator.core.reports.view import (
    Kind,
    RunDocuments,
    RunView,
    assertion_site,
    node_parts,
    read_run,
)
from orchestrator.core.text_safety import terminal_safe, terminal_safe_lines
from orchestrator.errors import SchemaError

LANES_BY_KIND = {
    "property_regression": Kind.BLOCKING,
    "block_patch": Kind.BLOCKING,
    "infra_queue": Kind.UNDECIDED,
    "flake_queue_eligible": Kind.NON_BLOCKING,
    "no_freeze": Kind.NON_BLOCKING,
}
# Any text a node id, reason or message may carry, control characters included.
texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)


def replay(label: str, assertion_id: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"label": label, "assertion_id": assertion_id, "calls": {}, "duration_ms": 2.0, **extra}


def entry(index: int, node: str, lane: str, code: str, reasons: list[str], **extra: Any) -> dict:
    return {
        "property_id": node,
        "lane": lane,
        "code": code,
        "reasons": reasons,
        "evidence_file": f"evidence-{index}.json",
        "decision_file": f"decision-{index}.json",
        "decision": {
            "schema": "replay-decision/1",
            "lane": lane,
            "code": code,
            "blocking": LANES_BY_KIND.get(lane) is Kind.BLOCKING,
            "freeze_allowed": False,
            "reasons": reasons,
        },
        **extra,
    }


def run_docs(
    items: list[tuple[str, str, str, list[str], dict[str, Any]]],
    *,
    run_log: dict[str, Any] | None = None,
    link: str = "",
) -> RunDocuments:
    """Documents of a run folder: (node id, lane, code, reasons, evidence) per property."""
    entries, evidence = [], {}
    for index, (node, lane, code, reasons, doc) in enumerate(items, start=1):
        entries.append(entry(index, node, lane, code, reasons))
        evidence[f"evidence-{index}.json"] = {"schema": "replay-evidence/1", **doc}
    return RunDocuments(
        name="runs/a",
        link=link,
        summary={
            "schema": "replay-report/1",
            "run_id": "run-a",
            "exit_status": 1,
            "decisions": entries,
        },
        run_log=run_log or {"base_rev": "1" * 40, "patch_rev": "2" * 40, "seed": 3},
        evidence=evidence,
        decisions={},
        raw={"raw/patch/replay-001.json": {"status": "completed", "wall_ms": 9.0}},
    )


def failing(node: str, path: str, line: int) -> dict[str, Any]:
    site = f"{node}@{path}:{line}:AssertionError"
    return {
        "base": [replay("assert_pass")],
        "patch": [replay("assert_fail", site, message="assert 1 == 2")],
    }


# ---------------------------------------------------------------- reading


@given(
    node=texts,
    path=st.text(st.characters(codec="utf-8", exclude_characters="@\n"), min_size=1, max_size=30),
    line=st.integers(min_value=1, max_value=10**6),
    exc=st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,20}", fullmatch=True),
)
def test_an_assertion_id_gives_back_its_path_line_and_type(
    node: str, path: str, line: int, exc: str
) -> None:
    site = assertion_site(f"{node}@{path}:{line}:{exc}")
    assert site is not None
    assert (site.path, site.line, site.exc_type) == (path, line, exc)


def test_an_assertion_id_without_a_site_has_none() -> None:
    assert assertion_site(None) is None
    assert assertion_site("tests/a.py::test_x") is None


@pytest.mark.parametrize(
    ("node", "classname", "name"),
    [
        ("tests/test_a.py::test_x", "tests.test_a", "test_x"),
        ("tests/test_a.py::TestY::test_x", "tests.test_a.TestY", "test_x"),
        ("tests/test_a.py::A::B::test_x[p::q-1]", "tests.test_a.A.B", "test_x[p::q-1]"),
        ("no-separator", "", "no-separator"),
    ],
)
def test_node_ids_split_into_classname_and_name(node: str, classname: str, name: str) -> None:
    parts = node_parts(node)
    assert (parts.classname, parts.name) == (classname, name)


def test_a_summary_alone_is_enough() -> None:
    docs = RunDocuments(
        name="merged",
        link="",
        summary={
            "schema": "replay-report/1",
            "decisions": [
                {"property_id": "t.py::a", "lane": "no_freeze", "code": "not_reproduced",
                 "base_labels": ["assert_pass"], "patch_labels": ["assert_pass"]},
            ],
        },
    )  # fmt: skip
    run = read_run(docs)
    assert run.run_id == "merged"
    assert run.base_rev is None
    assert run.exit_status is None
    (item,) = run.properties
    assert item.labels("patch") == ("assert_pass",)
    assert item.evidence_link is None


def test_fields_written_by_later_versions_are_read() -> None:
    docs = run_docs(
        [
            (
                "t.py::a",
                "reject_run",
                "oracle_changed",
                ["test body"],
                {
                    "oracle_changed": True,
                    "base_oracle_digest": "sha256:" + "a" * 64,
                    "patch_oracle_digest": "sha256:" + "b" * 64,
                    "oracle_reasons": ["test body"],
                    "base": [
                        replay("assert_fail", "t.py::a@t.py:3:E", assertion_key="t.py::a@a+1:E")
                    ],
                    "patch": [replay("assert_pass")],
                },
            )
        ],
        run_log={"tests_from": "3" * 40, "engines": ["unix:///a.sock", "ssh://b"]},
    )
    run = read_run(docs)
    assert run.tests_from == "3" * 40
    assert run.engines == ("unix:///a.sock", "ssh://b")
    (item,) = run.properties
    assert item.patch_oracle_digest == "sha256:" + "b" * 64
    assert item.oracle_reasons == ("test body",)
    assert item.base[0].assertion_key == "t.py::a@a+1:E"
    assert "sha256:bbbbbbbbbbbb" in render_html([run])


def test_a_lane_this_version_does_not_know_is_never_non_blocking() -> None:
    docs = run_docs([("t.py::a", "new_lane", "x", [], {}), ("t.py::b", "newer", "y", [], {})])
    docs.summary["decisions"][0]["decision"]["blocking"] = True
    kinds = [item.kind for item in read_run(docs).properties]
    assert kinds == [Kind.BLOCKING, Kind.UNDECIDED]


@pytest.mark.parametrize(
    "summary",
    [[], {"schema": "replay-evidence/1", "decisions": []}, {"schema": "replay-report/1"}],
)
def test_a_summary_of_another_shape_is_refused(summary: Any) -> None:
    with pytest.raises(SchemaError):
        read_run(RunDocuments(name="x", link="", summary=summary))


# ---------------------------------------------------------------- HTML


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.data: dict[str, list[str]] = {"script": [], "style": []}
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in = tag if tag in self.data else None

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in:
            self.data[self._in].append(data)


def _sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


# HTML reads "\r" as a line break and has no NUL: node ids never hold either.
node_ids = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\r\x00"),
    min_size=1,
    max_size=60,
)


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(node_ids, st.sampled_from(sorted(LANES_BY_KIND)), texts), max_size=30))
def test_the_page_escapes_what_it_shows_and_runs_only_its_own_script(
    rows: list[tuple[str, str, str]],
) -> None:
    items = [
        (node, lane, "code", [reason], failing(node, "t.py", 3)) for node, lane, reason in rows
    ]
    page = render_html([read_run(run_docs(items))])
    parser = _Page()
    parser.feed(page)
    tags = [tag for tag, _ in parser.tags]
    assert tags.count("script") == 1
    assert tags.count("style") == 1
    keys = [attrs["data-key"] for tag, attrs in parser.tags if tag == "article"]
    # The search key is the id as shown: control characters as visible escapes.
    assert sorted(keys) == sorted(terminal_safe_lines(node.lower()) for node, _, _ in rows)
    # The CSP names the hashes of exactly the style and script the page carries.
    csp = next(
        a["content"] for t, a in parser.tags if a.get("http-equiv") == "Content-Security-Policy"
    )
    assert csp is not None
    assert f"script-src {_sha(''.join(parser.data['script']))}" in csp
    assert f"style-src {_sha(''.join(parser.data['style']))}" in csp
    assert "default-src 'none'" in csp


def test_rows_come_blocking_first_in_chunks_of_one_lane() -> None:
    lanes = ["no_freeze"] * 45 + ["property_regression"] * 3 + ["infra_queue"] * 2
    items = [(f"t.py::test_{i}", lane, "c", [], {}) for i, lane in enumerate(lanes)]
    page = render_html([read_run(run_docs(items))])
    chunks = re.findall(r'<div class="chunk n(\d+)">(.*?)</div>(?=<div class="chunk|</main>)', page)
    order = []
    for size, body in chunks:
        found = re.findall(r'<article class="prop" data-lane="([a-z_]+)"', body)
        assert len(found) == int(size) <= CHUNK
        assert len(set(found)) == 1
        order += found
    assert order == ["property_regression"] * 3 + ["infra_queue"] * 2 + ["no_freeze"] * 45


def test_replay_cells_link_to_their_logs_relative_to_the_page() -> None:
    items = [("t.py::a", "property_regression", "c", [], failing("t.py::a", "t.py", 3))]
    page = render_html([read_run(run_docs(items, link="runs/a/"))])
    assert 'href="runs/a/raw/patch/replay-001.json"' in page
    assert 'href="runs/a/evidence-1.json"' in page
    assert "raw/base/replay-001.json" not in page  # no such file in the folder: no link


# ---------------------------------------------------------------- Markdown


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    flagged=st.integers(min_value=0, max_value=400),
    quiet=st.integers(min_value=0, max_value=50),
    padding=st.integers(min_value=0, max_value=500),
    max_bytes=st.integers(min_value=4_000, max_value=200_000),
)
def test_the_summary_stays_under_its_limit_and_says_how_many_it_cut(
    flagged: int, quiet: int, padding: int, max_bytes: int
) -> None:
    items = [
        (f"t.py::test_{i}", "property_regression", "call_budget", ["r" * padding], {})
        for i in range(flagged)
    ] + [(f"t.py::quiet_{i}", "no_freeze", "not_reproduced", [], {}) for i in range(quiet)]
    text = render_markdown([read_run(run_docs(items))], max_bytes=max_bytes)
    assert len(text.encode()) <= max_bytes
    shown = len(re.findall(r"^\| `t\.py::test_", text, flags=re.M))
    cut = re.search(r"and (\d+) more not shown", text)
    assert shown + (int(cut.group(1)) if cut else 0) == flagged
    if quiet:
        assert f"{quiet} more propert" in text


def test_the_summary_table_cannot_be_broken_by_what_it_quotes() -> None:
    node = "t.py::test_x[a|b`c]"
    items = [(node, "property_regression", "c", ["<img src=x> | pipe"], {})]
    text = render_markdown([read_run(run_docs(items))])
    row = next(line for line in text.splitlines() if "test_x" in line)
    assert "<img" not in row
    cells = re.split(r"(?<!\\)\|", row)[1:-1]  # GFM splits rows on unescaped pipes only
    assert len(cells) == 7
    assert cells[0].strip() == "``t.py::test_x[a\\|b`c]``"


# Text a tree can put in a node id, a reason or an assertion message to make the job
# summary link somewhere or load an image.
LINKS = st.sampled_from([
    "[click](https://evil.example/x)", "![img](https://evil.example/p.png)", "[r]: http://x",
    "<https://evil.example>", "https://evil.example/login", "www.evil.example", "a@evil.example",
    "mailto:a@evil.example", "xmpp:a@evil.example", "ftp://evil.example", "[x][r]", "\\[", "](",
    "<img src=x>", "<a href=x>", "&lt;img", "`", "``", "|", "*", "_", "!", " ", "\n",
])  # fmt: skip
linky = st.lists(LINKS | texts, max_size=6).map("".join)


@settings(max_examples=examples(150), deadline=None)
@given(node=linky, reason=linky, message=linky)
def test_the_summary_as_github_renders_it_links_and_loads_nothing(
    node: str, reason: str, message: str
) -> None:
    """Rendered by cmark-gfm (GitHub's own Markdown library, with its table and autolink
    extensions), nothing the tree wrote becomes a link or an image, and no row breaks."""
    import cmarkgfm

    doc = {
        "base": [replay("assert_pass")],
        "patch": [replay("assert_fail", f"{node}@t.py:3:{message}", message=message)],
    }
    items = [(node, "property_regression", "assert_regression", [reason], doc)]
    text = render_markdown([read_run(run_docs(items))])
    html = cmarkgfm.github_flavored_markdown_to_html(text)
    assert "<a " not in html
    assert "<img" not in html
    table = html.split("<table>")[-1]  # the properties' table: one row of seven cells
    assert len(re.findall("<tr>", table.split("<tbody>")[-1])) == 1
    assert len(re.findall("<td>", table)) == 7


# ---------------------------------------------------------------- JUnit


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(texts, st.sampled_from(sorted(LANES_BY_KIND)), texts), max_size=12))
def test_junit_is_valid_for_any_text(junit_schema: Any, rows: list[tuple[str, str, str]]) -> None:
    items = [
        (f"t.py::test_{i}[{node}]", lane, "code", [reason], failing(node, "t.py", 3))
        for i, (node, lane, reason) in enumerate(rows)
    ]
    run = read_run(run_docs(items))
    xml = render_junit([run])
    junit_schema.validate(xml)
    suite = ET.fromstring(xml).find("testsuite")
    assert suite is not None
    assert int(suite.get("tests", "-1")) == len(rows)
    kinds = [LANES_BY_KIND[lane] for _, lane, _ in rows]
    assert int(suite.get("failures", "-1")) == kinds.count(Kind.BLOCKING)
    assert int(suite.get("errors", "-1")) == kinds.count(Kind.UNDECIDED)


def test_each_replay_is_a_line_never_a_testcase() -> None:
    items = [("t.py::a", "property_regression", "c", ["why"], failing("t.py::a", "t.py", 3))]
    root = ET.fromstring(render_junit([read_run(run_docs(items))]))
    (case,) = root.iter("testcase")
    out = case.findtext("system-out") or ""
    assert "base replay 1: assert_pass" in out
    assert "patch replay 1: assert_fail t.py::a@t.py:3:AssertionError" in out
    assert "lane: property_regression" in out
    failure = case.find("failure")
    assert failure is not None
    assert failure.get("message") == "property_regression / c: why"


# ---------------------------------------------------------------- annotations


def _unescape(text: str) -> str:
    return (
        text.replace("%0A", "\n")
        .replace("%0D", "\r")
        .replace("%3A", ":")
        .replace("%2C", ",")
        .replace("%25", "%")
    )


def test_annotations_point_at_the_patch_assertion_and_warn_for_undecided() -> None:
    items = [
        ("tests/t.py::a", "property_regression", "assertion_regression", ["why"],
         failing("tests/t.py::a", "tests/t.py", 17)),
        ("tests/u.py::b", "infra_queue", "timeout", ["slow"], {}),
        ("tests/v.py::c", "no_freeze", "not_reproduced", [], {}),
    ]  # fmt: skip
    lines = render_annotations([read_run(run_docs(items))]).splitlines()
    assert lines[0].startswith("::error file=tests/t.py,line=17,title=property_regression")
    assert lines[1].startswith("::warning file=tests/u.py,title=infra_queue")
    assert len(lines) == 2


@given(node=node_ids, reason=texts, path=texts.filter(lambda p: "@" not in p and p.strip()))
def test_annotation_text_is_escaped_as_github_reads_it(node: str, reason: str, path: str) -> None:
    items = [(node, "block_patch", "uniform_failure", [reason], failing(node, path, 5))]
    (line,) = render_annotations([read_run(run_docs(items))]).removesuffix("\n").split("\n")
    head, _, message = line.partition("::")[2].partition("::")
    assert "\n" not in line
    assert "\r" not in line
    fields = dict(field.split("=", 1) for field in head.removeprefix("error ").split(","))
    # What GitHub reads back is the text with its control characters as visible escapes.
    assert _unescape(fields["file"]) == terminal_safe(path)
    assert fields["line"] == "5"
    assert _unescape(message).startswith(terminal_safe(f"{node}: {reason}")[:1000])


def test_a_run_view_is_frozen() -> None:
    run = read_run(run_docs([]))
    assert isinstance(run, RunView)
    with pytest.raises(AttributeError):
        run.run_id = "x"  # type: ignore[misc]


# ---------------------------------------------------------------- skips


def skipped_items(reasons: list[str]) -> list[tuple[str, str, str, list[str], dict[str, Any]]]:
    """A property skipped on both sides per reason, one skipped on the patch only, one
    skipped on base only (it ran on the patch), one that failed."""
    items: list[tuple[str, str, str, list[str], dict[str, Any]]] = [
        (
            f"t.py::test_skip_{i}",
            "no_freeze",
            "skipped",
            [f"skipped on both sides: {why}"],
            {"base": [replay("skipped", message=why)], "patch": [replay("skipped", message=why)]},
        )
        for i, why in enumerate(reasons)
    ]
    items += [
        (
            "t.py::test_gone",
            "no_freeze",
            "skipped_on_patch",
            ["skipped on the patch: gone"],
            {"base": [replay("assert_pass")], "patch": [replay("skipped", message="gone")]},
        ),
        (
            "t.py::test_new",
            "no_freeze",
            "skipped_on_base",
            ["skipped on base: new"],
            {"base": [replay("skipped", message="new")], "patch": [replay("assert_pass")]},
        ),
        ("t.py::test_red", "property_regression", "c", ["r"], failing("t.py::test_red", "t.py", 3)),
    ]
    return items


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(texts, max_size=5))
def test_junit_marks_and_counts_what_the_patch_skipped(
    junit_schema: Any, reasons: list[str]
) -> None:
    xml = render_junit([read_run(run_docs(skipped_items(reasons)))])
    junit_schema.validate(xml)
    suite = ET.fromstring(xml).find("testsuite")
    assert suite is not None
    # Skipped on both sides, and skipped on the patch: the test did not run with the patch.
    assert suite.get("skipped") == str(len(reasons) + 1)
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    for i in range(len(reasons)):
        skipped = cases[f"test_skip_{i}"].find("skipped")
        assert skipped is not None
        assert (skipped.get("message") or "").startswith("no_freeze / skipped: skipped on both")
    assert cases["test_gone"].find("skipped") is not None
    assert cases["test_new"].find("skipped") is None
    assert cases["test_red"].find("skipped") is None
    assert cases["test_red"].find("failure") is not None


def test_markdown_and_html_show_and_count_skipped_tests() -> None:
    run = read_run(run_docs(skipped_items(["needs BACKEND_URL"])))
    assert run.skipped == 2
    text = render_markdown([run])
    assert "| skipped | 2 (the project skips them on the patch) |" in text
    heading = "#### 2 properties skipped by the project on the patch"
    assert heading in text
    after = text.split(heading, 1)[1]
    assert "`t.py::test_skip_0`" in after
    assert "skipped on both sides: needs BACKEND_URL" in after
    assert "`t.py::test_gone`" in after
    assert "1 more property behaved alike" in text  # test_new ran on the patch and passed
    page = render_html([run])
    assert page.count('class="c skip"') == 4 + 1  # a cell per skipped replay, and the legend
    assert "skipped 2" in page


def test_a_verdict_set_aside_for_want_of_evidence_needs_a_look_in_the_summary() -> None:
    """weak_evidence is not blocking, but what the run could not judge is shown with its
    one line, never folded into "behaved alike" (lanes.md section 3b)."""
    line = "patch failed 1 of 20, base 0 of 20: p = 0.5 > 0.0033, not evidence of a new instability"
    items = [
        ("t.py::test_weak", "no_freeze", "weak_evidence", [line], {}),
        ("t.py::test_same", "no_freeze", "not_reproduced", ["base P, patch P"], {}),
    ]
    text = render_markdown([read_run(run_docs(items))])
    assert "#### 1 property needs a look" in text
    assert "`t.py::test_weak`" in text.split("#### 1 property needs a look", 1)[1]
    assert line.replace(">", "&gt;") in text  # as a table cell writes it
    assert "1 more property behaved alike" in text


def test_markdown_and_html_say_which_tests_the_tests_from_revision_removed() -> None:
    item = ("t.py::test_x", "no_freeze", "not_reproduced", [], failing("t.py::test_x", "t.py", 3))
    run_log = {"base_rev": "1" * 40, "patch_rev": "2" * 40, "tests_from": "2" * 40,
               "tests_from_ref": "patch"}  # fmt: skip
    docs = run_docs([item], run_log=run_log)
    summary = {**docs.summary, "removed_tests": ["t.py::test_fix", "t.py::test_other"]}
    run = read_run(replace(docs, summary=summary))
    line = (
        "the patch removes 2 tests the base has (t.py::test_fix, t.py::test_other):"
        " they judge neither side"
    )
    assert run.removed_tests_line() == line
    assert f"| removed tests | {line} |" in render_markdown([run])
    assert line in render_html([run])
    # A run without it (or a summary of an earlier version) says nothing.
    plain = read_run(docs)
    assert plain.removed_tests == ()
    assert plain.removed_tests_line() is None
    assert "removed tests" not in render_markdown([plain]) + render_html([plain])
