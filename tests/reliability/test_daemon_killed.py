"""The Docker daemon dies mid-run: harness_error and exit 3, never a verdict.

The replay runs on the session's second dockerd (tests/support: its own socket, data
root and exec root, the runner image loaded once; `orchestrator replay` pointed at it
with DOCKER_HOST), which this test SIGKILLs while the patch side's container runs and
waits for until it is reaped. The main daemon is never touched. Afterwards the ``second``
fixture starts it again on the same roots (so Docker itself stops the orphaned
containers) and removes what the killed run left there.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from replay_helpers import (
    HANG_TIMEOUT_S,
    Runner,
    labels_of,
    replay_args,
    running_containers,
    worktrees,
)
from support.engine import SecondEngine
from support.polling import wait_for

from fixtures.build_example import BUDGET_PROPERTY, ExampleRepo

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_daemon_killed_mid_run_is_a_harness_error_and_exit_3(
    second: SecondEngine,
    runner_image_id: str,
    runner: Runner,
    example: ExampleRepo,
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    args = replay_args(
        example,
        patch="hang",
        properties=[BUDGET_PROPERTY],
        image=runner_image_id,
        out=out,
        replays=2,
        timeout_s=HANG_TIMEOUT_S,
    )
    process = runner.start(args, env={"DOCKER_HOST": second.url})
    watcher = second.client(timeout=10)
    try:
        wait_for(
            lambda: running_containers(watcher, process),
            timeout=90,
            what="the replay's containers to run on the second daemon",
        )
    finally:
        watcher.close()
    started = time.monotonic()
    second.kill()
    run = runner.finish(process, out, timeout=180)
    # Well inside the hanging replay's deadline: the CLI saw the engine go, it did not
    # wait the deadline out.
    assert time.monotonic() - started < HANG_TIMEOUT_S * 2 / 3, "the CLI waited for the deadline"
    assert run.exit_code == 3, run.stderr[-2000:]
    # Never a verdict: the property is decided, in the infra queue, as a harness error.
    (decision,) = run.decisions()
    assert (decision["lane"], decision["code"]) == ("infra_queue", "harness_error"), decision
    (evidence,) = run.evidence()
    assert set(labels_of(evidence, "patch")) == {"harness_error"}, evidence["patch"]
    assert worktrees(example) == [f"worktree {example.path}"]
    assert runner.leftover_trees() == []
