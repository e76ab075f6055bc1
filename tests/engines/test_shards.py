"""A CI matrix of shards: each a complete run folder, merged into one verdict."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from second_engine import CLI, CliProcess, Run, example_tests, replay_command
from support.cli import stored_records

from fixtures.build_example import BUDGET_PROPERTY, OUTPUT_PROPERTY, TRIM_PROPERTY, ExampleRepo
from orchestrator.adapters.docker import RUNNER_IMAGE

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def merge(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), "merge", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def replay_shard(
    tmp_path: Path, example: ExampleRepo, name: str, *, patch: str, extra: list[str]
) -> Run:
    out = tmp_path / name
    done = CliProcess(tmp_path / f"scratch-{name}").run(
        replay_command(
            example.path,
            example.base,
            example.rev(patch),
            image=RUNNER_IMAGE,
            out=out,
            extra=["--fixture", str(example.fixture), *extra],
        ),
        out,
    )
    assert done.exit_code in (0, 1, 3), done.stderr[-3000:]
    return done


def test_three_shards_merged_give_the_unsharded_runs_lanes_and_exit_status(
    tmp_path: Path, example: ExampleRepo
) -> None:
    whole = replay_shard(tmp_path, example, "whole", patch="extra-clock-read", extra=[])
    shards = [
        replay_shard(
            tmp_path, example, f"shard-{i}", patch="extra-clock-read", extra=["--shard", f"{i}/3"]
        )
        for i in (1, 2, 3)
    ]
    parts = [set(shard.lanes()) for shard in shards]
    assert (
        sum(len(part) for part in parts) == len(whole.lanes()) == example_tests()
    )  # collected, cut
    assert set().union(*parts) == set(whole.lanes())
    for shard in shards:  # each a complete run folder with the same pins
        log = shard.run_log()
        for pin in ("base_rev", "patch_rev", "image_digest", "command", "seed"):
            assert log[pin] == whole.run_log()[pin]
        assert log["shard"]["selected"] == example_tests()

    merged_dir = tmp_path / "merged"
    merged = merge(shards[2].out, shards[0].out, shards[1].out, "--out", merged_dir, "--json")
    assert merged.returncode == whole.exit_code == 1, merged.stderr
    document = json.loads(merged.stdout)
    assert {d["property_id"]: d["lane"] for d in document["decisions"]} == whole.lanes()
    assert document["exit_status"] == whole.exit_code
    # Each shard screened its part: the counts add up to the whole run's, and every
    # property's evidence declares the replays it got, as in the unsharded run.
    assert document["screening"]["screened"] == whole.summary()["screening"]["screened"]
    assert document["screening"]["replayed"] == whole.summary()["screening"]["replayed"]
    replays = {d["property_id"]: d["replays"] for d in document["decisions"]}
    assert replays == {d["property_id"]: d["replays"] for d in whole.entries()}

    # The merged folder is a run folder: report reads it, each replay linked to its raw file.
    page = tmp_path / "page.html"
    report = subprocess.run(
        [
            str(CLI),
            "report",
            str(merged_dir),
            "--html",
            str(page),
            "--junit",
            str(tmp_path / "j.xml"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert report.returncode == 0, report.stderr
    html = page.read_text()
    stored = {r["property_id"]: r for r in stored_records(merged_dir)}
    for entry in document["decisions"]:
        assert stored[entry["property_id"]]["entry"] == entry  # its evidence in the store
        assert stored[entry["property_id"]]["evidence"]["property_id"] == entry["property_id"]
        assert (merged_dir / entry["raw_dir"] / "base" / "replay-001.json").is_file()
        assert f"merged/{entry['raw_dir']}/base/replay-001.json" in html

    table = merge(*(shard.out for shard in shards))
    assert table.returncode == 1
    assert f"merged 3 shards, {example_tests()} properties" in table.stdout
    assert f"screened {example_tests()}, replayed " in table.stdout


def test_merge_refuses_mismatched_pins_a_missing_or_repeated_shard_and_an_unfinished_one(
    tmp_path: Path, example: ExampleRepo
) -> None:
    properties = []
    for node_id in (BUDGET_PROPERTY, OUTPUT_PROPERTY, TRIM_PROPERTY):
        properties += ["--property", node_id]
    cut = ["--replays", "1", *properties]
    first = replay_shard(
        tmp_path, example, "a1", patch="extra-clock-read", extra=[*cut, "--shard", "1/2"]
    )
    second = replay_shard(
        tmp_path, example, "a2", patch="extra-clock-read", extra=[*cut, "--shard", "2/2"]
    )
    other = replay_shard(
        tmp_path, example, "b2", patch="fix-trim-id", extra=[*cut, "--shard", "2/2"]
    )
    assert merge(first.out, second.out).returncode in (0, 1, 3)

    refused = merge(first.out, other.out)
    assert refused.returncode == 2
    assert "patch_rev" in refused.stderr
    assert str(other.out) in refused.stderr

    missing = merge(first.out)
    assert missing.returncode == 2
    assert "shard 2 of 2 missing" in missing.stderr

    copy = tmp_path / "a1-copy"
    shutil.copytree(first.out, copy)
    twice = merge(first.out, copy, second.out)
    assert twice.returncode == 2
    assert "given twice" in twice.stderr

    unfinished = tmp_path / "a2-unfinished"
    shutil.copytree(second.out, unfinished)
    (unfinished / "INCOMPLETE").write_text("interrupted\n")
    marked = merge(first.out, unfinished)
    assert marked.returncode == 2
    assert "incomplete" in marked.stderr

    (unfinished / "INCOMPLETE").unlink()
    (unfinished / "summary.json").unlink()
    running = merge(first.out, unfinished)
    assert running.returncode == 2
    assert "not a finished run" in running.stderr
    for result in (refused, missing, twice, marked, running):
        assert result.stdout == ""
        assert result.stderr.count("\n") <= 2  # one line (and a pointer at --help at most)
