"""An image without ``sleep`` (a distroless one) cannot hold a side's container open.

A side's container idles on ``sleep infinity`` while the driver runs in it with
``docker exec``. On an image without it every replay is a ``harness_error`` whose message
names the missing executable (the runner's fault, never the patch's), not the engine's
"container is not running".

Real engine, real git, the real `orchestrator replay` command in a subprocess; the image
is the runner image with ``sleep`` removed, built offline by the engine's classic builder.
"""

from __future__ import annotations

import contextlib
import io
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from replay_helpers import Runner, assert_nothing_left, labels_of, replay_args

from fixtures.build_example import BUDGET_PROPERTY, ExampleRepo

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture
def image_without_sleep(docker_client: Any, runner_image_id: str) -> Iterator[str]:
    """The runner image with its ``sleep`` removed (its own tag, removed afterwards)."""
    tag = f"orchestrator-no-sleep:{uuid.uuid4().hex[:12]}"
    dockerfile = (
        f"FROM {runner_image_id}\n"
        "USER root\n"
        'RUN rm "$(command -v sleep)" && ! command -v sleep\n'
        "USER 1000:1000\n"
    )
    built, _ = docker_client.images.build(
        fileobj=io.BytesIO(dockerfile.encode()),
        tag=tag,
        rm=True,
        forcerm=True,
        pull=False,
        network_mode="none",
    )
    yield tag
    with contextlib.suppress(Exception):
        docker_client.images.remove(built.id, force=True)


def test_an_image_without_sleep_is_a_harness_error_naming_it(
    docker_client: Any,
    image_without_sleep: str,
    runner: Runner,
    example: ExampleRepo,
    tmp_path: Path,
    volumes_before: set[str],
) -> None:
    out = tmp_path / "run"
    args = replay_args(
        example,
        patch="extra-clock-read",
        properties=[BUDGET_PROPERTY],
        image=image_without_sleep,
        out=out,
        replays=1,
    )
    run = runner.run(args, out)
    assert run.exit_code == 3, run.stderr[-2000:]
    (evidence,) = run.evidence()
    for side in ("base", "patch"):
        assert set(labels_of(evidence, side)) == {"harness_error"}
        for replay in evidence[side]:
            message = replay["message"]
            assert "the image has no `sleep` executable" in message, message
            assert "\n" not in message
            assert "not running" not in message  # the engine's words, not the cause
    assert run.decisions()[0]["lane"] == "infra_queue"
    assert_nothing_left(docker_client, run, runner, example, volumes_before)
