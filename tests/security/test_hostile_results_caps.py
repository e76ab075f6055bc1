"""A container cannot grow the host's memory or run folder without bound, smuggle options
into pytest through the ids it collects, or end the driver in a traceback by filling
its results folder (docs/security.md). Through the real CLI and engine, with the canary."""

from __future__ import annotations

import json

import pytest
from hostile_repo import (
    PROPERTY,
    assert_no_host_bytes,
    folder_bytes,
    hostile_repo,
    replay,
)
from hostile_results import (
    DEEP_COLLECTION,
    FILL_RESULTS,
    FORGE_COLLECTION,
    FORGED_IDS,
    FORGED_TESTS,
    forged_suite,
)
from hostile_results import TESTS_CAP as CAPS
from support.cli import stored_evidence

pytestmark = pytest.mark.docker

PEAK_RSS_KB = 400 * 1024
# The refused result's bytes are kept as evidence (raw/, under the cap of one file).
RUN_DIR_BYTES = 16 * 1024 * 1024


def test_a_forged_result_of_80000_tests_is_refused_at_the_cap(tmp_path):
    """No property named: the results say which tests the run has, so the cap of tests
    per side is what bounds them (lowered here for speed; the default lets 100,000 run)."""
    repo = hostile_repo(tmp_path, forged_suite(FORGED_TESTS))
    run = replay(tmp_path, repo, env=CAPS, select=False)
    assert run.code == 3, run.stderr.decode()[-2000:]
    decisions = run.report()["decisions"]
    assert [d["property_id"] for d in decisions] == [PROPERTY]  # none of the forged ones
    (decision,) = decisions
    assert decision["base_labels"] == ["assert_pass"]
    assert decision["patch_labels"] == ["harness_error"]
    assert decision["patch_reasons"] == ["corrupt_result"]
    evidence = json.dumps(stored_evidence(run.run_dir))
    assert "ORCHESTRATOR_MAX_TESTS" in evidence
    size = folder_bytes(run.run_dir)
    files = sum(1 for _ in run.run_dir.rglob("*"))
    print(f"peak RSS {run.max_rss_kb // 1024} MiB, run folder {size} bytes in {files} files")
    assert run.max_rss_kb < PEAK_RSS_KB
    assert size < RUN_DIR_BYTES
    assert files < 50
    assert_no_host_bytes(run)


def test_a_run_folder_past_its_byte_cap_stops_incomplete_naming_the_cap(tmp_path):
    repo = hostile_repo(tmp_path, "def run():\n    return 2\n")
    run = replay(tmp_path, repo, env={"ORCHESTRATOR_MAX_RUN_BYTES": "4000"}, json_out=False)
    assert run.code == 3, run.stderr.decode()[-2000:]
    assert b"ORCHESTRATOR_MAX_RUN_BYTES" in run.stderr
    marker = (run.run_dir / "INCOMPLETE").read_text()
    assert "ORCHESTRATOR_MAX_RUN_BYTES" in marker
    assert folder_bytes(run.run_dir) <= 4000 + len(marker.encode())
    assert not (run.run_dir / "summary.json").exists()


def test_collected_ids_that_are_options_never_reach_pytest(tmp_path):
    """The patch's conftest puts ``--deselect <the test>`` and ``-p evil`` among the ids
    its collection names; they are refused on the host (with a reason in the log), and
    the real test is decided on both sides as usual."""
    repo = hostile_repo(tmp_path, "def run():\n    return 3\n", extra=FORGE_COLLECTION)
    run = replay(tmp_path, repo, "--shard", "1/1", select=False)
    # The patch adds a conftest: its oracle changed (reject_run, exit 1), labels decided.
    assert run.code == 1, run.stderr.decode()[-2000:]
    assert run.report()["run_log"]["collected"] == [PROPERTY]
    decisions = run.report()["decisions"]
    assert [d["property_id"] for d in decisions] == [PROPERTY]
    assert decisions[0]["patch_labels"] == ["assert_pass"]
    assert decisions[0]["base_labels"] == ["assert_pass"]
    logged = [json.loads(line) for line in run.stderr.splitlines() if line.startswith(b"{")]
    (refused,) = [event for event in logged if event["event"] == "collect.refused_ids"]
    assert refused["ids"] == len(FORGED_IDS)
    assert "option" in refused["reason"]
    assert_no_host_bytes(run)


def test_a_test_that_fills_the_results_folder_is_labelled_with_that_cause(tmp_path):
    run = replay(tmp_path, hostile_repo(tmp_path, FILL_RESULTS))
    assert run.code == 3, run.stderr.decode()[-2000:]
    decision = run.decision()
    assert decision["base_labels"] == ["assert_pass"]
    assert decision["patch_labels"] == ["harness_error"]
    assert decision["patch_reasons"] == ["results_full"]
    evidence = json.dumps(stored_evidence(run.run_dir))
    assert "/replay-out, 64 MiB) is full" in evidence
    assert b"Traceback" not in run.stderr
    assert_no_host_bytes(run)


def test_a_collection_past_the_cap_of_tests_ends_the_run_naming_it(tmp_path):
    """The patch's collection names five ids (its forged four and the real one) against
    a cap of two tests per side: exit 3 naming the cap, before any replay."""
    repo = hostile_repo(tmp_path, "def run():\n    return 3\n", extra=FORGE_COLLECTION)
    caps = {"ORCHESTRATOR_MAX_TESTS": "2"}
    run = replay(tmp_path, repo, "--shard", "1/1", select=False, json_out=False, env=caps)
    assert run.code == 3, run.stderr.decode()[-2000:]
    assert b"the patch side's collection names 5 tests" in run.stderr
    assert b"ORCHESTRATOR_MAX_TESTS" in run.stderr
    assert b"internal error" not in run.stderr
    assert not (run.run_dir / "raw").exists()  # no replay ran


def test_a_hostile_collection_document_fails_that_sides_collection_only(tmp_path):
    """The patch's collection document is 100,000 levels deep: that side's collection is
    refused (corrupt_result, with the reason in the log), the base side's names the
    tests, and they are replayed and decided on both sides."""
    repo = hostile_repo(tmp_path, "def run():\n    return 3\n", extra=DEEP_COLLECTION)
    run = replay(tmp_path, repo, "--shard", "1/1", select=False)
    # The patch adds a conftest: its oracle changed (reject_run, exit 1), labels decided.
    assert run.code == 1, run.stderr.decode()[-2000:]
    assert b"internal error" not in run.stderr
    (decision,) = run.report()["decisions"]
    assert decision["property_id"] == PROPERTY
    assert decision["base_labels"] == decision["patch_labels"] == ["assert_pass"]
    logged = [json.loads(line) for line in run.stderr.splitlines() if line.startswith(b"{")]
    (failed,) = [event for event in logged if event["event"] == "collect.failed"]
    assert failed["side"] == "patch"
    assert failed["results_problem"].startswith("corrupt_result: nested deeper")
    assert_no_host_bytes(run)
