"""A bilateral replay in a project image: the package imported from each side's own tree,
the venv's pytest under the probe, a suite that writes into its tree and reads time-zone
data, and the environment recorded as pins."""

from __future__ import annotations

import json

import pytest
from image_project import by_property, orchestrator
from support.cli import stored_records

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _replay(built, tmp_path, *extra: str):
    out = tmp_path / "run"
    done = orchestrator(
        "replay", "--repo", str(built.repo.path), "--base", built.repo.base,
        "--patch", built.repo.patch, "--image", built.image_id, "--no-record",
        "--out", str(out), "--json", "--timeout", "60", *extra,
    )  # fmt: skip
    return done, out


def test_a_writable_tree_replay_decides_every_test(built, tmp_path):
    # --replays-all: every test twice, each replay in a fresh copy of the tree (a whole
    # suite is otherwise screened once, and only tests with signal get their second).
    done, out = _replay(
        built, tmp_path, "--replays", "2", "--replays-all", "--writable-tree",
        "--env", "TZ=Europe/Paris", "--env", "EXPECTED_TZ=Europe/Paris",
    )  # fmt: skip
    report = done.json()
    decisions = by_property(report)
    assert (decisions["test_add"]["lane"], decisions["test_add"]["code"]) == (
        "property_regression",
        "assertion_regression",
    )
    for name in (
        "test_imported_from_the_tree",
        "test_test_dependency",
        "test_runs_in_the_project_venv",
        "test_writes_into_its_tree",
        "test_time_zone_data",
        "test_home_and_tmpdir_are_writable",
        "test_tz_is_what_the_replay_set",
    ):
        decision = decisions[name]
        assert decision["base_labels"] == ["assert_pass", "assert_pass"], (name, decision)
        assert decision["patch_labels"] == ["assert_pass", "assert_pass"], (name, decision)
        assert decision["code"] == "not_reproduced"
    assert done.exit_code == 1  # the regression blocks

    run_log = json.loads((out / "run-log.json").read_text())
    assert run_log["interpreter"] == "/opt/orchestrator-venv/bin/python"
    assert run_log["writable_tree"] is True
    assert run_log["environment"]["TZ"] == "Europe/Paris"
    assert run_log["environment"]["HOME"] == "/tmp/home"
    assert run_log["environment"]["PYTHONDONTWRITEBYTECODE"] == "1"
    assert run_log["pythonpath"] == {
        "base": ["/src/src", "/opt/orchestrator"],
        "patch": ["/src/src", "/opt/orchestrator"],
    }
    assert run_log["pythonpath_reasons"]["base"] == [
        "src: src layout (src/scratchproj/__init__.py)"
    ]
    assert run_log["image_labels"]["orchestrator.project"] == "scratchproj"
    evidence = stored_records(out)[0]["evidence"]  # the first property's
    assert evidence["environment"] == run_log["environment"]
    assert evidence["pythonpath"] == run_log["pythonpath"]
    raw = json.loads((out / "raw" / "base" / "replay-001.json").read_text())
    assert raw["result"]["pytest"] == "8.3.5"


def test_a_read_only_tree_write_is_a_harness_error_with_a_hint(built, tmp_path):
    done, _ = _replay(
        built, tmp_path, "--replays", "1",
        "--property", "tests/test_scratch.py::test_writes_into_its_tree",
        "--property", "tests/test_scratch.py::test_tz_is_what_the_replay_set",
    )  # fmt: skip
    decisions = by_property(done.json())
    writes = decisions["test_writes_into_its_tree"]
    assert writes["base_labels"] == writes["patch_labels"] == ["harness_error"]
    assert writes["base_reasons"] == writes["patch_reasons"] == ["read_only_tree"]
    assert (writes["lane"], writes["code"]) == ("infra_queue", "harness_error")
    assert "--writable-tree" in done.stderr
    # Without --env TZ the variable is unset, as EXPECTED_TZ is.
    assert decisions["test_tz_is_what_the_replay_set"]["base_labels"] == ["assert_pass"]
    assert done.exit_code == 3


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--env", "PYTHONPATH=/x"), "--pythonpath"),
        (("--env", "TZ"), "expected KEY=VALUE"),
        (("--env", "A=1", "--env", "A=2"), "given twice"),
        (("--pythonpath", "a:b"), "one folder"),
    ],
)
def test_a_bad_environment_is_one_line_before_any_container(scratch, tmp_path, extra, message):
    out = tmp_path / "run"
    done = orchestrator(
        "replay", "--repo", str(scratch.path), "--base", scratch.base, "--patch", scratch.patch,
        "--image", "orchestrator-runner:latest", "--no-record", "--out", str(out), *extra,
    )  # fmt: skip
    assert done.exit_code == 2
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1
    assert message in errors[0]
    assert not out.exists()
