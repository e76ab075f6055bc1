"""Result files -> labels: good, half-written, missing and wrong files read from disk.

The pure labelling rules on their own are tests/unit/test_core_labels.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

from orchestrator.adapters import results
from orchestrator.core import labels
from orchestrator.core.labels import ContainerFacts, ReplayFile

PROP = "tests/test_x.py::test_y"
OTHER = "tests/test_x.py::test_z"
IMAGE = "sha256:" + "c" * 64


def probe_doc(*entries: dict) -> dict:
    return {"schema": "replay-probe/1", "probe_version": "1", "seed": 0, "tests": list(entries)}


def entry(nodeid: str = PROP, label: str = "assert_pass", **extra) -> dict:
    return {
        "nodeid": nodeid,
        "label": label,
        "assertion_id": None,
        "message": None,
        "calls": {"clock": 1, "open": 0},
        "duration_ms": 3.5,
        "reason": None,
        **extra,
    }


def run_doc(k: int = 1, status: str = "completed", result: dict | None = None, **extra) -> dict:
    return {
        "schema": "replay-run/1",
        "probe_version": "1",
        "replay": k,
        "status": status,
        "exit_code": 0,
        "wall_ms": 100.0,
        "seed": 0,
        "result": result,
        **extra,
    }


def read_back(folder: Path, replays: int) -> tuple[ReplayFile, ...]:
    """The folder read as a container's is: the tool's reader script (run here with
    this interpreter), its tar stream parsed under the caps."""
    done = subprocess.run(
        results.reader_command(sys.executable, str(folder)),
        capture_output=True,
        check=True,
        timeout=60,
    )
    return results.replay_files_from(results.read_results_stream([done.stdout]), replays)


def write(tmp_path: Path, k: int, doc: object) -> Path:
    path = tmp_path / results.replay_file_name(k)
    path.write_text(json.dumps(doc))
    return path


def test_a_good_file_gives_the_probes_label_and_calls(tmp_path):
    write(
        tmp_path,
        1,
        run_doc(
            result=probe_doc(
                entry(), entry(OTHER, "assert_fail", assertion_id="a@x:1:AssertionError")
            )
        ),
    )
    (replay_file,) = read_back(tmp_path, 1)
    assert replay_file.state == "ok"
    labelled = labels.label_replays(
        [(replay_file, ContainerFacts(image_id=IMAGE))], [PROP, OTHER], runner_id="ci"
    )
    (passed,) = labelled[PROP]
    assert passed.label == "assert_pass"
    assert dict(passed.calls) == {"clock": 1, "open": 0}
    assert passed.duration_ms == 3.5
    assert passed.image_digest == IMAGE
    assert passed.runner_id == "ci"
    (failed,) = labelled[OTHER]
    assert failed.label == "assert_fail"
    assert failed.assertion_id == "a@x:1:AssertionError"
    assert labels.nodeids_seen([replay_file]) == (PROP, OTHER)


def test_a_missing_file_is_no_result(tmp_path):
    (replay_file,) = read_back(tmp_path, 1)
    assert replay_file.state == "missing"
    replay = labels.label_replay(replay_file, ContainerFacts(exit_code=0), PROP)
    assert (replay.label, replay.reason) == ("harness_error", "no_result")


def test_the_emptier_empties_the_folder_but_what_it_keeps(tmp_path):
    """A kept screening container's results folder is emptied once it is read: the results
    come back whole first, a link is removed (never followed), the rewrite cache stays."""
    folder = tmp_path / "out"
    folder.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("x")
    write(folder, 1, run_doc(result=probe_doc(entry())))
    (folder / "replay-001.log").write_text("pytest's output")
    (folder / "nested" / "deeper").mkdir(parents=True)
    (folder / "nested" / "deeper" / "file").write_text("x")
    (folder / "link").symlink_to(outside, target_is_directory=True)
    (folder / ".rewritten").mkdir()
    (folder / ".rewritten" / "entry.code").write_bytes(b"code")
    done = subprocess.run(
        results.reader_command(sys.executable, str(folder)),
        capture_output=True,
        check=True,
        timeout=60,
    )
    read = results.read_results_stream([done.stdout])
    command = results.emptier_command(sys.executable, str(folder), r"\.rewritten")
    emptied = subprocess.run(command, capture_output=True, check=True, timeout=60)
    assert results.status_line([emptied.stdout]) == "emptied"
    (replay_file,) = results.replay_files_from(read, 1)
    assert replay_file.state == "ok"
    assert sorted(path.name for path in folder.iterdir()) == [".rewritten"]
    assert (folder / ".rewritten" / "entry.code").read_bytes() == b"code"
    assert (outside / "precious").read_text() == "x"


def test_unasked_the_reader_leaves_the_folder_as_it_was(tmp_path):
    write(tmp_path, 1, run_doc(result=probe_doc(entry())))
    (tmp_path / "replay-001.log").write_text("pytest's output")
    done = subprocess.run(
        results.reader_command(sys.executable, str(tmp_path)),
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert results.read_results_stream([done.stdout]).emptied is None
    assert sorted(path.name for path in tmp_path.iterdir()) == ["replay-001.json", "replay-001.log"]


def test_a_folder_the_emptier_cannot_empty_is_not_emptied(tmp_path):
    missing = tmp_path / "gone"
    command = results.emptier_command(sys.executable, str(missing), r"\.rewritten")
    done = subprocess.run(command, capture_output=True, check=True, timeout=60)
    assert results.status_line([done.stdout]) == "not emptied"


def test_a_half_written_file_is_corrupt_result(tmp_path):
    text = json.dumps(run_doc(result=probe_doc(entry())))
    (tmp_path / results.replay_file_name(1)).write_text(text[: len(text) // 2])
    (replay_file,) = read_back(tmp_path, 1)
    assert replay_file.state == "corrupt"
    replay = labels.label_replay(replay_file, ContainerFacts(exit_code=0), PROP)
    assert (replay.label, replay.reason) == ("harness_error", "corrupt_result")


@settings(deadline=None, max_examples=examples(40))  # each example runs the reader as a process
@given(cut=st.integers(min_value=0))
def test_no_prefix_of_a_result_file_is_ever_trusted(tmp_path_factory, cut):
    data = json.dumps(run_doc(result=probe_doc(entry()))).encode()
    cut = cut % len(data)  # every proper prefix, including the empty file
    folder = tmp_path_factory.mktemp("cut")
    (folder / results.replay_file_name(1)).write_bytes(data[:cut])
    (replay_file,) = read_back(folder, 1)
    assert replay_file.state == "corrupt"
    assert labels.label_replay(replay_file, ContainerFacts(), PROP).label == "harness_error"


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"schema": "replay-run/2", "status": "completed"},
        run_doc(status="finished"),
        run_doc(result=None),
        run_doc(result={"schema": "replay-probe/1"}),
        run_doc(result=probe_doc({"nodeid": PROP})),
        run_doc(result=probe_doc(entry(calls={"clock": "two"}))),
        run_doc(result=probe_doc(entry(calls={"clock": True}))),
        run_doc(result=probe_doc(entry(duration_ms="slow"))),
    ],
)
def test_a_wrong_document_is_corrupt_not_a_verdict(tmp_path, doc):
    write(tmp_path, 1, doc)
    (replay_file,) = read_back(tmp_path, 1)
    assert replay_file.state == "corrupt"
    assert labels.label_replay(replay_file, ContainerFacts(), PROP).reason == "corrupt_result"


def test_driver_timeout_status_is_timeout(tmp_path):
    write(tmp_path, 1, run_doc(status="timeout", exit_code=None))
    (replay_file,) = read_back(tmp_path, 1)
    assert labels.label_replay(replay_file, ContainerFacts(), PROP).label == "timeout"


def test_driver_no_result_after_a_signal_is_signal(tmp_path):
    write(tmp_path, 1, run_doc(status="no_result", exit_code=-9))
    (replay_file,) = read_back(tmp_path, 1)
    replay = labels.label_replay(replay_file, ContainerFacts(exit_code=0), PROP)
    assert (replay.label, replay.reason) == ("harness_error", "signal")


def test_driver_no_result_in_an_oom_killed_container_is_oom(tmp_path):
    write(tmp_path, 1, run_doc(status="no_result", exit_code=-9))
    (replay_file,) = read_back(tmp_path, 1)
    replay = labels.label_replay(replay_file, ContainerFacts(exit_code=0, oom_killed=True), PROP)
    assert (replay.label, replay.reason) == ("harness_error", "oom")


def test_a_finished_replay_keeps_its_result_even_if_the_deadline_hit_later(tmp_path):
    write(tmp_path, 1, run_doc(result=probe_doc(entry())))
    (replay_file,) = read_back(tmp_path, 1)
    facts = ContainerFacts(exit_code=137, killed_at_deadline=True)
    assert labels.label_replay(replay_file, facts, PROP).label == "assert_pass"


def test_a_property_not_collected_is_not_found(tmp_path):
    write(tmp_path, 1, run_doc(result=probe_doc(entry(OTHER))))
    (replay_file,) = read_back(tmp_path, 1)
    replay = labels.label_replay(replay_file, ContainerFacts(), PROP)
    assert (replay.label, replay.reason) == ("harness_error", "not_found")


def test_a_collection_error_on_the_module_labels_its_tests(tmp_path):
    module_error = entry(
        "tests/test_x.py", "harness_error", reason="collection_error", message="boom"
    )
    write(tmp_path, 1, run_doc(result=probe_doc(module_error)))
    (replay_file,) = read_back(tmp_path, 1)
    replay = labels.label_replay(replay_file, ContainerFacts(), PROP)
    assert (replay.label, replay.reason, replay.message) == (
        "harness_error",
        "collection_error",
        "boom",
    )


def test_sides_that_ran_different_images_are_all_image_mismatch():
    from orchestrator.core import side_spec as sides

    plan = sides.ReplayPlan(
        image_id=IMAGE,
        pytest_args=(),
        property_ids=(PROP,),
        fixture=None,
        replays=1,
        timeout_s=5,
        seed=0,
        runner_id="local",
    )
    specs = [sides.SideSpec(name=n, repo=Path("."), rev="0" * 40) for n in ("base", "patch")]
    good = ReplayFile(replay=1, state="ok", doc=run_doc(result=probe_doc(entry())))
    same = {
        "base": [(good, ContainerFacts(image_id=IMAGE))],
        "patch": [(good, ContainerFacts(image_id=IMAGE))],
    }
    assert sides.label_sides(plan, specs, same)["patch"][PROP][0].label == "assert_pass"
    other = {**same, "patch": [(good, ContainerFacts(image_id="sha256:" + "d" * 64))]}
    labelled = sides.label_sides(plan, specs, other)
    for side in ("base", "patch"):
        assert [(r.label, r.reason) for r in labelled[side][PROP]] == [
            ("harness_error", "image_mismatch")
        ]


def test_without_properties_every_reported_test_is_a_property():
    from orchestrator.core import side_spec as sides

    plan = sides.ReplayPlan(
        image_id=IMAGE,
        pytest_args=(),
        property_ids=(),
        fixture=None,
        replays=1,
        timeout_s=5,
        seed=0,
        runner_id="r",
    )
    specs = [sides.SideSpec(name=n, repo=Path("."), rev="0" * 40) for n in ("base", "patch")]
    base = ReplayFile(replay=1, state="ok", doc=run_doc(result=probe_doc(entry())))
    patch = ReplayFile(replay=1, state="ok", doc=run_doc(result=probe_doc(entry(), entry(OTHER))))
    facts = ContainerFacts(image_id=IMAGE)
    labelled = sides.label_sides(plan, specs, {"base": [(base, facts)], "patch": [(patch, facts)]})
    assert list(labelled["base"]) == [PROP, OTHER]
    assert labelled["base"][OTHER][0].reason == "not_found"  # a test only the patch has
    nothing = ReplayFile(replay=1, state="missing")
    empty = sides.label_sides(
        plan, specs, {"base": [(nothing, facts)], "patch": [(nothing, facts)]}
    )
    assert list(empty["base"]) == [sides.NO_TEST_REPORTED]


def test_a_collection_error_wins_over_the_not_found_it_causes(tmp_path):
    module_error = entry("tests/test_x.py", "harness_error", reason="collection_error")
    not_found = entry(PROP, "harness_error", reason="not_found")
    write(tmp_path, 1, run_doc(result=probe_doc(module_error, not_found)))
    (replay_file,) = read_back(tmp_path, 1)
    assert labels.label_replay(replay_file, ContainerFacts(), PROP).reason == "collection_error"


def test_a_session_error_labels_every_property(tmp_path):
    session_error = entry("<session>", "harness_error", reason="usage_error")
    write(tmp_path, 1, run_doc(result=probe_doc(session_error)))
    (replay_file,) = read_back(tmp_path, 1)
    assert labels.label_replay(replay_file, ContainerFacts(), PROP).reason == "usage_error"


def test_a_wrong_node_id_in_a_good_module_is_not_found(tmp_path):
    not_found = entry(PROP, "harness_error", reason="not_found")
    write(tmp_path, 1, run_doc(result=probe_doc(entry(OTHER), not_found)))
    (replay_file,) = read_back(tmp_path, 1)
    assert labels.label_replay(replay_file, ContainerFacts(), PROP).reason == "not_found"
