"""One replay on two Docker engines: the machine's and a second one this session started.

Real engines, real git, the real CLI in a subprocess. With --engine given twice every
engine takes its inputs through labelled volumes, so these tests run that path.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from second_engine import CliProcess, SecondEngine, example_tests, ours, replay_command, wait_for

from fixtures.build_example import (
    BUDGET_PROPERTY,
    OUTPUT_PROPERTY,
    TRIM_PROPERTY,
    ExampleRepo,
)
from fixtures.sleepy import build_sleepy
from orchestrator.adapters.docker import RUNNER_IMAGE
from orchestrator.services.run_folders import read_documents

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _replays_runners(evidence: dict[str, Any]) -> set[str]:
    return {replay["runner_id"] for side in ("base", "patch") for replay in evidence[side]}


def test_a_run_on_two_engines_decides_the_same_lanes_as_a_run_on_one(
    tmp_path: Path,
    example: ExampleRepo,
    main_url: str,
    second: SecondEngine,
    second_client: Any,
    docker_client: Any,
    with_image: str,
) -> None:
    patch = example.rev("extra-clock-read")
    fixture = ["--fixture", str(example.fixture)]
    one = CliProcess(tmp_path / "scratch-one").run(
        replay_command(
            example.path,
            example.base,
            patch,
            image=RUNNER_IMAGE,
            out=tmp_path / "one",
            extra=fixture,
        ),
        tmp_path / "one",
    )
    two = CliProcess(tmp_path / "scratch-two").run(
        replay_command(
            example.path,
            example.base,
            patch,
            image=RUNNER_IMAGE,
            out=tmp_path / "two",
            engines=[main_url, second.url],
            extra=fixture,
        ),
        tmp_path / "two",
    )
    assert one.exit_code == 1, one.stderr[-3000:]
    assert two.exit_code == one.exit_code, two.stderr[-3000:]
    assert len(one.lanes()) == example_tests()  # every test, collected on both sides
    assert two.lanes() == one.lanes()

    # Both sides of a property ran on one engine, and its evidence names that engine.
    runners = {}
    for evidence in two.evidence():
        assert _replays_runners(evidence) == {evidence["runner_id"]}
        runners[evidence["property_id"]] = evidence["runner_id"]
    assert set(runners.values()) == {main_url, second.url}
    assert {e["runner_id"] for e in one.evidence()} == {"local"}  # as before pools
    log = two.run_log()
    assert log["engines"] == [main_url, second.url]
    assert sorted(log["collected"]) == sorted(one.lanes())
    assert [engine["status"] for engine in two.summary()["engines"]] == ["ok", "ok"]

    # Nothing left on either engine: containers, volumes (sources, probe, fixture, results).
    assert ours(docker_client, two.pid) == ([], [])
    assert ours(second_client, two.pid) == ([], [])

    # The report finds each property's raw files in its batch's folder.
    documents = read_documents(two.out)
    raw_dirs = {entry["raw_dir"] for entry in two.entries()}
    assert raw_dirs == {"raw/e1-b1", "raw/e2-b1"}
    for raw_dir in raw_dirs:
        assert f"{raw_dir}/base/replay-001.json" in (documents.raw or {})

    # Screened (no --property names the tests): a property with signal had its second
    # phase on the engine that screened it, and replay k of either phase is in its folder.
    replayed = [evidence for evidence in two.evidence() if evidence.get("signal")]
    assert replayed  # the patch's extra clock read, at least
    assert {(e["replays"], e["screened"]) for e in replayed} == {(2, 1)}
    assert two.summary()["screening"]["replayed"] == len(replayed)
    for entry in two.entries():
        for side in ("base", "patch"):
            for k in range(1, entry["replays"] + 1):
                assert f"{entry['raw_dir']}/{side}/replay-{k:03d}.json" in (documents.raw or {})
    assert not (two.out / "raw" / "replays").exists()
    replays = {entry["property_id"]: entry["replays"] for entry in two.entries()}
    assert replays == {e["property_id"]: e["replays"] for e in one.entries()}


def test_the_image_is_shipped_to_a_new_engine_on_first_use_and_not_again(
    tmp_path: Path,
    example: ExampleRepo,
    main_url: str,
    second: SecondEngine,
    second_client: Any,
    runner_image_id: str,
) -> None:
    from orchestrator.adapters.docker import image_state

    if image_state(second_client, runner_image_id, runner_image_id).present:
        second_client.images.remove(runner_image_id, force=True)  # our engine: a new one
    assert not image_state(second_client, runner_image_id, RUNNER_IMAGE).present

    def replay(name: str) -> dict[str, Any]:
        done = CliProcess(tmp_path / f"scratch-{name}").run(
            replay_command(
                example.path,
                example.base,
                example.rev("extra-clock-read"),
                image=RUNNER_IMAGE,
                out=tmp_path / name,
                engines=[main_url, second.url],
                properties=[BUDGET_PROPERTY, OUTPUT_PROPERTY],
                replays=1,
                extra=["--fixture", str(example.fixture)],
            ),
            tmp_path / name,
        )
        assert done.exit_code == 1, done.stderr[-3000:]
        return done.summary()

    first = replay("first")
    assert first["engines"][0]["image_shipped"] is None
    shipped = first["engines"][1]["image_shipped"]
    assert shipped is not None
    assert shipped["bytes"] > 0
    held = second_client.images.get(runner_image_id)
    assert held.id == runner_image_id  # the same content, checked after loading
    assert RUNNER_IMAGE in held.tags  # the run's reference names it there too
    assert {e["runner_id"] for e in first["engines"]} == {main_url, second.url}
    assert [entry["lane"] for entry in first["decisions"]] == ["property_regression"] * 2

    again = replay("again")
    assert [engine["image_shipped"] for engine in again["engines"]] == [None, None]


def test_an_engine_whose_tag_names_another_image_is_refused_for_the_run(
    tmp_path: Path,
    example: ExampleRepo,
    main_url: str,
    second: SecondEngine,
    second_client: Any,
    docker_client: Any,
    with_image: str,
) -> None:
    repository, tag = "orchestrator-scaleout-ref", uuid.uuid4().hex[:12]
    ref = f"{repository}:{tag}"
    docker_client.images.get(with_image).tag(repository, tag)
    maker = second_client.containers.create(with_image, ["true"])
    try:
        other = maker.commit(repository=repository, tag=tag)  # same name, another image
    finally:
        maker.remove()
    try:
        assert other.id != with_image
        done = CliProcess(tmp_path / "scratch").run(
            replay_command(
                example.path,
                example.base,
                example.rev("fix-trim-id"),
                image=ref,
                out=tmp_path / "run",
                engines=[main_url, second.url],
                properties=[BUDGET_PROPERTY, TRIM_PROPERTY],
                replays=1,
                extra=["--fixture", str(example.fixture)],
            ),
            tmp_path / "run",
        )
    finally:
        docker_client.images.remove(ref)  # our tag only; the runner image stays
        second_client.images.remove(other.id, force=True)
    assert done.exit_code == 3, done.stderr[-3000:]
    summary = done.summary()
    assert [engine["status"] for engine in summary["engines"]] == ["ok", "refused"]
    by_property = {e["property_id"]: e for e in done.evidence()}
    refused = by_property[TRIM_PROPERTY]  # the second engine's share: never run there
    assert refused["runner_id"] == second.url
    for side in ("base", "patch"):
        assert [(r["label"], r["reason"]) for r in refused[side]] == [
            ("harness_error", "image_mismatch")
        ]
    decided = by_property[BUDGET_PROPERTY]
    assert decided["runner_id"] == main_url
    assert done.lanes() == {BUDGET_PROPERTY: "no_freeze", TRIM_PROPERTY: "infra_queue"}
    assert ours(second_client, done.pid) == ([], [])


def test_sigkill_of_the_second_engine_mid_run_leaves_every_property_decided_by_the_first(
    tmp_path: Path,
    main_url: str,
    second: SecondEngine,
    docker_client: Any,
    runner_image_id: str,
    with_image: str,
) -> None:
    repo = build_sleepy(tmp_path / "sleepy", count=6, seconds=1.5)
    out = tmp_path / "run"
    cli = CliProcess(tmp_path / "scratch")
    process = cli.start(
        replay_command(
            repo.path,
            repo.base,
            repo.patch,
            image=runner_image_id,
            out=out,
            engines=[main_url, second.url],
            properties=repo.property_ids,
            replays=2,
        )
    )
    watcher = second.client(timeout=10)
    try:

        def running_there() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"the replay ended early: {process.communicate()[1][-3000:]}")
            label = f"orchestrator.pid={process.pid}"
            return bool(watcher.containers.list(filters={"label": label, "status": "running"}))

        wait_for(running_there, timeout=240, what="the run's containers on the second engine")
    finally:
        watcher.close()
    second.kill()  # only the engine this session started
    done = cli.finish(process, out)

    assert done.exit_code == 0, done.stderr[-3000:]
    assert done.lanes() == dict.fromkeys(repo.property_ids, "no_freeze")
    for evidence in done.evidence():
        assert evidence["runner_id"] == main_url
        assert _replays_runners(evidence) == {main_url}
    summary = done.summary()
    assert [engine["status"] for engine in summary["engines"]] == ["ok", "gone"]
    (attempt,) = summary["attempts"]  # the first attempt, kept in the run folder
    assert attempt["engine"] == second.url
    retried = {entry["property_id"] for entry in attempt["properties"]}
    assert retried
    assert retried < set(repo.property_ids)
    for entry in attempt["properties"]:
        assert "harness_error" in entry["base_labels"] + entry["patch_labels"]
    assert attempt["raw_dir"] == "raw/e2-b1"
    assert ours(docker_client, done.pid) == ([], [])

    # The second engine, back: the next run sweeps what the killed one kept there.
    second.restart()
    client = second.client()
    try:
        left = ours(client, done.pid)
        assert left != ([], [])  # the gone engine could not be cleaned by the run itself
        follow = CliProcess(tmp_path / "scratch-next").run(
            replay_command(
                repo.path,
                repo.base,
                repo.patch,
                image=runner_image_id,
                out=tmp_path / "next",
                engines=[main_url, second.url],
                properties=repo.property_ids[:2],
                replays=1,
            ),
            tmp_path / "next",
        )
        assert follow.exit_code == 0, follow.stderr[-3000:]
        assert ours(client, done.pid) == ([], [])
    finally:
        client.close()


def test_a_writable_tree_reaches_every_engine_of_a_pool(
    tmp_path: Path,
    example: ExampleRepo,
    main_url: str,
    second: SecondEngine,
    second_client: Any,
    with_image: str,
) -> None:
    # The volume path mounts the fixture's volume at /replay: the tree to copy per replay
    # has a place of its own there, never inside that read-only volume.
    done = CliProcess(tmp_path / "scratch").run(
        replay_command(
            example.path,
            example.base,
            example.rev("extra-clock-read"),
            image=RUNNER_IMAGE,
            out=tmp_path / "run",
            engines=[main_url, second.url],
            properties=[BUDGET_PROPERTY, OUTPUT_PROPERTY],
            replays=1,
            extra=["--fixture", str(example.fixture), "--writable-tree"],
        ),
        tmp_path / "run",
    )
    assert done.exit_code == 1, done.stderr[-3000:]
    assert done.lanes() == dict.fromkeys([BUDGET_PROPERTY, OUTPUT_PROPERTY], "property_regression")
    assert {e["runner_id"] for e in done.evidence()} == {main_url, second.url}
    assert ours(second_client, done.pid) == ([], [])
