"""A warm container (the driver's serve mode, used by shrinking) in a project image: the
venv's python serves, the package imports from the tree, and with a writable tree every
job gets a fresh copy."""

from __future__ import annotations

import pytest

from orchestrator.services.sides import ReplayPlan, SideSpec, new_run_id
from orchestrator.services.sides.serve import WarmContainer

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TESTS = "tests/test_scratch.py"


def test_a_warm_container_serves_jobs_like_a_replay(built, docker_client, docker_backend):
    plan = ReplayPlan(
        image_id=built.image_id,
        pytest_args=("-q",),
        property_ids=(),
        fixture=None,
        replays=1,
        timeout_s=60,
        seed=0,
        runner_id="local",
        writable_tree=True,
    )
    side = SideSpec(name="patch", repo=built.repo.path, rev=built.repo.base)
    with WarmContainer(plan, side, backend=docker_backend, run_id=new_run_id()) as warm:
        for job in range(2):  # the second job sees a fresh tree again
            for name in (
                "test_writes_into_its_tree",
                "test_runs_in_the_project_venv",
                "test_imported_from_the_tree",
                "test_home_and_tmpdir_are_writable",
            ):
                node = f"{TESTS}::{name}"
                run = warm.run(
                    pytest_args=("-q", node), fixture=None, timeout_s=60, job_id=f"{job}-{name}"
                )
                replay = warm.label(run, node)
                assert (replay.label, replay.reason) == ("assert_pass", None), (job, name, replay)
