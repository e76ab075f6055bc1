"""A replay run as values: the run log, evidence and decisions, the replay report."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples
from unit_factories import evidence, side

from orchestrator.core import replay_run
from orchestrator.core.lanes import decide
from orchestrator.core.oracle import OracleChange
from orchestrator.core.replay_run import BASE, PATCH, Pins, ReplayOptions, RunPlan
from orchestrator.model import Decision, Lane, Replay

IMAGE = "sha256:" + "a" * 64
PROP = "tests/t.py::test_a"


def run_plan(**changes: Any) -> RunPlan:
    options = ReplayOptions(
        repo=Path("/repo"),
        base="main",
        patch="HEAD",
        image="orchestrator-runner:latest",
        command="pytest -q tests/",
        property_ids=(PROP,),
        replays=2,
        **changes,
    )
    return RunPlan(
        run_id="r1",
        run_dir=Path("/runs/r1"),
        started_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        options=options,
        pins=Pins(
            base_rev="1" * 40,
            patch_rev="2" * 40,
            image_ref=options.image,
            image_id=IMAGE,
            repo_digests=("orchestrator-runner@sha256:" + "b" * 64,),
            fixture_digest="sha256:f",
            origin_digest="sha256:o",
            shrink=None,
            probe_version="1.0.0",
        ),
        pytest_args=("-q",),
    )


def test_run_log_carries_every_records_field() -> None:
    log = run_plan().run_log()
    for name in (
        "base_rev",
        "patch_rev",
        "command",
        "image_digest",
        "runner_id",
        "fixture_digest",
        "seed",
        "replays",
        "probe_version",
        "started_at",
    ):
        assert log[name] is not None, name
    assert log["schema"] == "replay-run-log/1"
    assert log["image_digest"] == IMAGE
    assert log["started_at"] == "2026-01-02T03:04:05Z"
    assert log["repo_digests"] == ["orchestrator-runner@sha256:" + "b" * 64]
    assert log["pytest_args"] == ["-q"]


def test_run_log_names_the_kept_fixture_the_hash_seed_and_the_limits() -> None:
    plain = run_plan(seed=2**32 + 5).run_log()
    assert plain["fixture_file"] is None  # no fixture, nothing kept
    assert plain["hash_seed"] == "5"  # PYTHONHASHSEED lies in [0, 2**32)
    assert plain["limits"] is None  # not known to this plan
    with_fixture = run_plan(fixture=Path("/in/event.json"))
    limits = {"memory": "1g", "pids": 64, "cpus": 2.0, "tmp_size": "32m"}
    log = RunPlan(**{**with_fixture.__dict__, "limits": limits}).run_log()
    assert log["fixture_file"] == "fixture.json"
    assert with_fixture.kept_fixture == Path("/runs/r1/fixture.json")
    assert log["limits"] == limits


def test_evidence_carries_the_pins_and_both_sides() -> None:
    base = (Replay(label="assert_pass", calls={"clock": 1}),) * 2
    patch = (Replay(label="assert_pass", calls={"clock": 2}),) * 2
    evidence = replay_run.build_evidence(run_plan(), PROP, base, patch)
    doc = evidence.to_json()
    assert doc["schema"] == "replay-evidence/1"
    assert doc["base_rev"] == "1" * 40
    assert doc["patch_rev"] == "2" * 40
    assert doc["image_digest"] == IMAGE
    assert doc["origin_digest"] == "sha256:o"
    assert doc["shrink"] is None
    assert len(doc["base"]) == len(doc["patch"]) == 2
    assert replay_run.call_deltas(base, patch) == ["clock: base {1} vs patch {2}"]


def test_call_deltas_compare_sets_not_sequences() -> None:
    base = (
        Replay(label="assert_pass", calls={"clock": 1}),
        Replay(label="assert_pass", calls={"clock": 2}),
    )
    patch = tuple(reversed(base))
    assert replay_run.call_deltas(base, patch) == []


def test_the_report_says_what_moved_the_way_the_decision_does() -> None:
    plan = run_plan()
    base = (Replay(label="assert_pass", calls={"clock": 1}, image_digest=IMAGE),) * 2
    patch = (Replay(label="assert_pass", calls={"clock": 2, "open": 1}, image_digest=IMAGE),) * 2
    (item,) = replay_run.decide_all(plan, {BASE: {PROP: base}, PATCH: {PROP: patch}}, {})
    assert (item.index, item.decision.code) == (1, "call_budget")
    report = replay_run.report_document(
        plan, [replay_run.decided(item, replay_run.report_entry(item))]
    )
    assert report["schema"] == "replay-report/2"
    assert report["exit_status"] == 1
    (entry,) = report["decisions"]
    assert entry["calls_base"] == {"clock": [1]}
    assert entry["calls_patch"] == {"clock": [2], "open": [1]}
    assert entry["call_deltas"] == list(item.decision.reasons)
    assert entry["call_deltas"] == ["clock: base {1} vs patch {2}", "open: base {0} vs patch {1}"]
    # Its evidence and decision are in the run's store, by its index.
    assert (entry["index"], entry["evidence_file"], entry["decision_file"]) == (1, None, None)
    assert (report["properties"], report["decisions_left_out"]) == (1, 0)
    assert report["lanes"] == {"property_regression": 1}
    assert report["properties_file"] == "properties.jsonl.gz"


def test_the_report_lists_what_needs_a_look_and_counts_the_rest() -> None:
    plan = run_plan()
    same = (Replay(label="assert_pass", calls={"clock": 1}, image_digest=IMAGE),) * 2
    moved = (Replay(label="assert_fail", calls={"clock": 1}, image_digest=IMAGE),) * 2
    labelled = {
        BASE: {"t.py::test_a": same, PROP: same, "t.py::test_c": same},
        PATCH: {"t.py::test_a": same, PROP: moved, "t.py::test_c": same},
    }
    items = replay_run.decide_all(plan, labelled, {})
    rows = [replay_run.decided(item, replay_run.report_entry(item)) for item in items]
    report = replay_run.report_document(plan, rows)
    assert [entry["property_id"] for entry in report["decisions"]] == [PROP]
    assert report["decisions"][0]["index"] == 2
    assert (report["properties"], report["decisions_left_out"]) == (3, 2)
    assert report["lanes"] == {"no_freeze": 2, "property_regression": 1}
    assert report["exit_status"] == 1
    assert [row.entry is not None for row in rows] == [False, True, False]
    assert replay_run.not_listed_line(rows) == (
        "2 more in no_freeze (behaved alike on both sides): --all lists them"
    )
    quiet = [rows[0], rows[2]]
    assert replay_run.not_listed_line(quiet) == (
        "2 properties, all in no_freeze (behaved alike on both sides): --all lists them"
    )
    assert replay_run.not_listed_line(quiet[:1]) == (
        "1 property in no_freeze (behaved alike on both sides): --all lists it"
    )
    assert replay_run.not_listed_line([rows[1]]) is None


def test_a_property_only_the_base_reported_is_decided_with_an_empty_patch() -> None:
    base = (Replay(label="assert_pass", calls={"clock": 1}),) * 2
    moved = OracleChange(property_id=PROP, base_digest="sha256:b", patch_digest="sha256:p")
    (item,) = replay_run.decide_all(run_plan(), {BASE: {PROP: base}, PATCH: {}}, {PROP: moved})
    assert item.evidence.patch == ()
    assert item.evidence.oracle_changed
    assert (item.decision.lane, item.decision.code) == (Lane.REJECT_MALFORMED, "replay_count")


@given(st.lists(st.sampled_from(list(Lane)), max_size=6))
def test_exit_status_is_the_worst_lanes(lanes: list[Lane]) -> None:
    decisions = [
        Decision(lane=lane, code="x", blocking=lane.blocking, freeze_allowed=False)
        for lane in lanes
    ]
    status = replay_run.worst_exit(decisions)
    if not lanes:
        assert status == 3  # nothing decided is undecided
    elif any(lane.blocking for lane in lanes):
        assert status == 1
    elif any(lane.undecided for lane in lanes):
        assert status == 3
    else:
        assert status == 0


def test_label_summary_groups_labels_and_names_infra_reasons() -> None:
    replays = (
        Replay(label="assert_pass"),
        Replay(label="assert_pass"),
        Replay(label="harness_error", reason="oom"),
    )
    assert replay_run.label_summary(replays) == "assert_pass x2, harness_error(oom) x1"
    assert replay_run.label_summary(()) == "-"


def test_with_tests_from_the_run_log_the_evidence_and_the_decision_name_the_revision() -> None:
    from orchestrator.core.test_files import plan_overlay, rule_for_tests

    sha = "3" * 40
    overlay = plan_overlay(
        ref="patch",
        rev=sha,
        rule=rule_for_tests((PROP,), (), ()),
        tests_tree={"tests/t.py": "b" * 40},
        side_trees={BASE: {"tests/old_test.py": "c" * 40}, PATCH: {}},
    )
    plan = run_plan(tests_from="patch")
    plain_log = plan.run_log()
    assert plain_log["tests_from"] is None
    assert plain_log["overlaid_files"] == []
    assert plain_log["selection"] is None
    judged = RunPlan(**{**plan.__dict__, "overlay": overlay})
    log = judged.run_log()
    assert (log["tests_from"], log["tests_from_ref"]) == (sha, "patch")
    assert log["overlaid_files"] == [{"path": "tests/t.py", "blob": "b" * 40}]
    assert log["overlay_removed"] == {
        BASE: [{"path": "tests/old_test.py", "blob": "c" * 40}],
        PATCH: [],
    }
    passing = (Replay(label="assert_pass"),) * 2
    (outcome,) = replay_run.decide_all(judged, {BASE: {PROP: passing}, PATCH: {PROP: passing}}, {})
    assert outcome.evidence.tests_from == sha
    assert outcome.evidence.to_json()["tests_from"] == sha
    assert outcome.decision.to_json()["tests_from"] == sha
    assert replay_run.report_entry(outcome)["tests_from"] == sha
    (plain,) = replay_run.decide_all(plan, {BASE: {PROP: passing}, PATCH: {PROP: passing}}, {})
    assert plain.evidence.to_json()["tests_from"] is None
    assert "tests_from" not in plain.decision.to_json()


def test_a_changed_selection_of_nothing_is_no_verdict_to_wait_for() -> None:
    from orchestrator.core.changed import Selection

    nothing = Selection(
        candidates=(PROP,), selected=(), oracle_changed=(), importing=(), changed_modules=()
    )
    plan = RunPlan(**{**run_plan().__dict__, "selection": nothing})
    assert plan.nothing_selected
    assert plan.property_ids == ()
    report = replay_run.report_document(plan, ())
    assert (report["exit_status"], report["decisions"]) == (0, [])
    assert report["run_log"]["selection"]["candidates"] == 1
    # Without a selection, no decision at all is undecided, as before.
    assert replay_run.report_document(run_plan(), ())["exit_status"] == 3


@settings(max_examples=examples(60), deadline=None)
@given(
    base=st.lists(st.sampled_from(["assert_pass", "assert_fail"]), min_size=1, max_size=3),
    patch=st.lists(st.sampled_from(["assert_pass", "assert_fail"]), min_size=1, max_size=3),
)
def test_the_tables_reasons_say_why_unless_another_column_does(
    base: list[str], patch: list[str]
) -> None:
    n = max(len(base), len(patch))
    decision = decide(evidence(base=side(*(base * n)[:n]), patch=side(*(patch * n)[:n])))
    cell = replay_run.table_reasons(decision.code, decision.reasons)
    if decision.code == "not_reproduced":
        assert cell == "-"  # the base and patch columns already say P and P
    else:
        assert cell == "; ".join(decision.reasons)
    if decision.code == "uniform_failure":
        assert cell.startswith("fails_on_base_too; ")
